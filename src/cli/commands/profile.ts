import { Argument } from '@commander-js/extra-typings';
import { DEFAULT_URL, type Profile, normalizeUrl, configPath, readConfig, resolveConnection, writeConfig } from '../config.js';
import { defineCommand, defineGroup, examples } from '../define-command.js';
import { info, json, line, stdoutIsTty, verticalTable } from '../output.js';
import { UsageError, globalFlags } from '../session.js';

/** A profile name argument; completion scripts offer the saved names (see completion-script.ts). */
const profileArgument = (description: string) => new Argument('<profile>', description);

/** The profile in use: --profile, else KVB_PROFILE, else `kvb profile use`, else "default". */
function currentName(command: Parameters<typeof globalFlags>[0]): string {
  return resolveConnection(globalFlags(command), process.env, { allowMissingProfile: true }).profileName;
}

function existing(name: string): Profile {
  const profile = readConfig().profiles[name];
  if (!profile) throw new UsageError(`no profile ${JSON.stringify(name)} in ${configPath()} (kvb profile list shows them)`);
  return profile;
}

/** What a profile holds, secrets never shown: only which credential it carries. */
function describe(name: string, profile: Profile): Record<string, string | null> {
  return {
    name,
    url: profile.url ?? null,
    bucket: profile.bucket ?? null,
    credential: profile.token !== undefined ? 'token' : profile.secret_key !== undefined ? 'secret key' : null,
  };
}

const list = defineCommand({
  define: (parent) =>
    parent
      .command('list')
      .description('list the saved profiles (the one in use is marked *)')
      .option('--names', 'print only the names, one per line')
      .option('--json', 'print them as JSON (no secrets)'),
  async run(options, command) {
    const { profiles } = readConfig();
    const names = Object.keys(profiles).sort();
    if (options.names) {
      for (const name of names) await line(name);
      return;
    }
    const inUse = currentName(command);
    if (options.json) {
      await json(names.map((name) => ({ ...describe(name, profiles[name]!), in_use: name === inUse })));
      return;
    }
    if (names.length === 0) info(`no profiles in ${configPath()} (create one with kvb init or kvb create-bucket --save)`);
    for (const name of names) {
      const p = profiles[name]!;
      const row = [`${name === inUse ? '*' : ' '} ${name}`, p.url ?? '-', p.bucket ?? '-'];
      await line(stdoutIsTty() ? row.join('  ') : row.join('\t'));
    }
  },
});

const show = defineCommand({
  define: (parent) =>
    parent
      .command('show')
      .description('show a profile: url, bucket and which credential it holds (never the credential)')
      .addArgument(profileArgument('the profile (default: the one in use)').argOptional())
      .option('--json', 'print it as JSON (the default when piped)'),
  async run(name, options, command) {
    const chosen = name ?? currentName(command);
    const shown = describe(chosen, existing(chosen));
    if (options.json || !stdoutIsTty()) await json(shown);
    else await verticalTable(Object.entries(shown).map(([k, v]) => [k, v ?? '-']));
  },
});

const use = defineCommand({
  define: (parent) =>
    parent
      .command('use')
      .description('use this profile by default (--profile and KVB_PROFILE still win)')
      .addArgument(profileArgument('the profile')),
  async run(name) {
    existing(name);
    const config = readConfig();
    writeConfig({ ...config, current: name });
    info(`now using profile ${JSON.stringify(name)}`);
  },
});

const add = defineCommand({
  define: (parent) =>
    parent
      .command('add')
      .description('save a profile for a bucket that already exists (--url, --bucket, --token)')
      .addArgument(profileArgument('the name to save it as'))
      .option('--force', 'replace a profile of that name')
      .addHelpText(
        'after',
        `
Takes the global --url (default ${DEFAULT_URL}), --bucket (required) and --token
(any of the bucket's keys, or a temporary token), or KVB_URL, KVB_BUCKET and
KVB_TOKEN; nothing is sent to the server. The credential is stored as "token"
and used when no --token is given.
${examples('kvb profile add team --url https://kv.example.com --bucket "$B" --token "$READ_KEY"', 'kvb --profile team ls')}`,
      ),
  async run(name, options, command) {
    const flags = globalFlags(command);
    const pick = (flag: string | undefined, env: string | undefined) =>
      flag !== undefined && flag !== '' ? flag : env !== undefined && env !== '' ? env : undefined;
    const url = pick(flags.url, process.env.KVB_URL) ?? DEFAULT_URL;
    const bucket = pick(flags.bucket, process.env.KVB_BUCKET);
    const token = pick(flags.token, process.env.KVB_TOKEN);
    if (bucket === undefined) throw new UsageError('kvb profile add needs --bucket ID (or KVB_BUCKET)');
    const config = readConfig();
    if (config.profiles[name] !== undefined && !options.force) {
      throw new UsageError(`profile ${JSON.stringify(name)} already exists in ${configPath()}: pass --force to replace it`);
    }
    config.profiles[name] = { url: normalizeUrl(url), bucket, ...(token !== undefined && { token }) };
    writeConfig(config);
    info(
      `saved profile ${JSON.stringify(name)} (${token === undefined ? 'no credential: anonymous' : 'with its credential'}); use it with --profile ${name} or kvb profile use ${name}`,
    );
  },
});

const remove = defineCommand({
  define: (parent) =>
    parent.command('remove').description('remove a saved profile (the bucket itself is kept)').addArgument(profileArgument('the profile')),
  async run(name) {
    existing(name);
    const config = readConfig();
    delete config.profiles[name];
    if (config.current === name) delete config.current;
    writeConfig(config);
    info(`removed profile ${JSON.stringify(name)}`);
  },
});

/** `kvb profile list|show|use|remove`: the saved connections in the config file. */
export const profile = defineGroup(
  (parent) =>
    parent
      .command('profile')
      .description('list, show, add, choose or remove saved profiles')
      .addHelpText(
        'after',
        `
Profiles are saved by kvb init, kvb create-bucket --save and kvb profile add, in
$XDG_CONFIG_HOME/kvb/config.json. Secrets are never printed.
${examples('kvb profile list', 'kvb profile show work', 'kvb profile add team --url http://kv:8080 --bucket "$B" --token "$K"', 'kvb profile use work', 'kvb profile remove old')}`,
      ),
  [list, show, add, use, remove],
);
