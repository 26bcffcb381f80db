import { anonymousAccessLeft } from '../../client/anonymous-access.js';
import { normalizeUrl, readConfig, resolveConnection, saveProfile } from '../config.js';
import { stdinIsTty } from '../output.js';
import { type RunningCommand, defineCommand } from '../define-command.js';
import { generateKey } from '../random-key.js';
import { UsageError, globalFlags, openClient } from '../session.js';
import { DEFAULT_BUCKET_TTL_SECONDS, MAX_TTL_SECONDS } from '../../limits.js';
import { EXIT_CODES } from '../../errors.js';

const CREDENTIALS = [
  { value: 'secret_key', label: 'secret key', hint: 'admin: policy, tokens, everything' },
  { value: 'read_key', label: 'read key', hint: 'without it anyone can read and list' },
  { value: 'write_key', label: 'write key', hint: 'without it anyone can write and delete' },
  { value: 'signing_key', label: 'signing key', hint: 'needed to mint temporary tokens' },
] as const;
type CredentialName = (typeof CREDENTIALS)[number]['value'];

class Cancelled extends Error {}

/** Keys shorter than this get a warning and the offer of a generated one. */
const MIN_KEY_LENGTH = 16;

/** `kvb init`: the interactive wizard. Nothing is created or written until every answer is in. */
export const init = defineCommand({
  define: (parent) =>
    parent
      .command('init')
      .description('interactive set-up: check the server, create a bucket, save a profile')
      .addHelpText(
        'after',
        `
Asks for the server URL (and checks /health), an email, which credentials to
set (offering strong random keys, shown once; a key of your own shorter than
16 characters is warned about) and a default TTL; then creates the bucket and
saves a profile (no to replacing one asks for another name). Ctrl-C at any
question leaves nothing behind.
It needs a terminal; in scripts use:
  kvb create-bucket --email me@example.com --secret-key "$S" --save`,
      ),
  run: (_options, command) => wizard(command),
});

type Prompts = typeof import('@clack/prompts');
/** An answer, or `Cancelled` thrown when the question was cancelled (Ctrl-C). */
type Ask = <T>(answer: T | symbol) => Exclude<T, symbol>;
/** What every step of the wizard asks with. */
interface Wizard {
  p: Prompts;
  ask: Ask;
  flags: ReturnType<typeof globalFlags>;
}

async function wizard(command: RunningCommand): Promise<void> {
  const flags = globalFlags(command);
  if (!stdinIsTty()) {
    throw new UsageError(
      'kvb init is interactive and stdin is not a terminal; in scripts use: kvb create-bucket --email E --secret-key K --save [PROFILE]',
    );
  }
  const connection = resolveConnection(flags, process.env, { allowMissingProfile: true });
  const p = await import('@clack/prompts');
  const ask: Ask = (answer) => {
    if (p.isCancel(answer)) throw new Cancelled();
    return answer as Exclude<typeof answer, symbol>;
  };
  const w: Wizard = { p, ask, flags };
  try {
    p.intro('kvb init');
    const url = await askServer(w, connection.url);
    const email = ask(
      await p.text({
        message: 'Admin email for the bucket',
        validate: (v) => (v?.includes('@') && v.length <= 254 ? undefined : 'an email address'),
      }),
    );
    const chosen = await askCredentials(w, url);
    const { keys, generated } = await askKeys(w, chosen);
    const ttlText = ask(
      await p.text({
        message: 'Default TTL of keys, in seconds (0 = never expire)',
        initialValue: String(DEFAULT_BUCKET_TTL_SECONDS),
        validate: (v) => (v && /^\d+$/.test(v) && Number(v) <= MAX_TTL_SECONDS ? undefined : `an integer from 0 to ${MAX_TTL_SECONDS}`),
      }),
    );
    const profileName = await askProfile(w, connection.profileName);
    const id = await createAndSave(w, { url, email, keys, defaultTtl: Number(ttlText), profileName });
    if (generated.length > 0) {
      p.note(
        generated.map((name) => `${name}: ${keys[name]}`).join('\n'),
        'Generated keys (shown once; the secret key is also in the profile)',
      );
    }
    const left = anonymousAccessLeft(chosen);
    if (left.length > 0) p.log.warn(`ANONYMOUS ACCESS to bucket ${id}: anyone who can reach the server can ${left.join('; ')}.`);
    else p.log.info('Private bucket: every request needs one of its keys.');
    p.outro(`Saved profile "${profileName}". Try: kvb${profileName === 'default' ? '' : ` --profile ${profileName}`} set hello world`);
  } catch (err) {
    if (err instanceof Cancelled) {
      p.cancel('Cancelled: nothing was created or saved.');
      process.exitCode = EXIT_CODES.usage;
      return;
    }
    throw err;
  }
}

/** The server URL, asked until a kvb server answers its /health there. */
async function askServer({ p, ask, flags }: Wizard, initial: string): Promise<string> {
  let url = initial;
  for (;;) {
    url = ask(
      await p.text({
        message: 'Server URL',
        initialValue: url,
        validate: (v) => {
          try {
            const parsed = new URL(normalizeUrl(v ?? ''));
            return parsed.protocol === 'http:' || parsed.protocol === 'https:' ? undefined : 'an http:// or https:// URL';
          } catch {
            return 'an http:// or https:// URL';
          }
        },
      }),
    );
    url = normalizeUrl(url);
    const spin = p.spinner();
    spin.start(`Checking ${url}/health`);
    const { client, close } = await openClient(url, undefined, 5000, flags.ca);
    try {
      const health = await client.health();
      spin.stop(`Server is up (kvb ${health.version})`);
      return url;
    } catch (err) {
      spin.error(`No kvb server answered: ${(err as Error).message}`);
    } finally {
      await close();
    }
  }
}

/**
 * Which credentials to set. A private bucket by default: secret, read and write keys. A choice
 * that leaves anonymous access says so loudly and must be confirmed; "No" asks again.
 */
async function askCredentials({ p, ask }: Wizard, url: string): Promise<CredentialName[]> {
  let chosen: CredentialName[] = ['secret_key', 'read_key', 'write_key'];
  let cursorAt: CredentialName | undefined;
  for (;;) {
    chosen = ask(
      await p.multiselect<CredentialName>({
        message: 'Credentials to set (space toggles, enter confirms; all three access keys make a private bucket)',
        options: CREDENTIALS.map((c) => ({ ...c })),
        initialValues: chosen,
        // Each time round is a new prompt, and clack starts a new one on its first row; asked
        // again after "No", the cursor belongs on the key whose absence opened the bucket.
        ...(cursorAt && { cursorAt }),
        required: false,
      }),
    );
    const left = anonymousAccessLeft(chosen);
    if (left.length === 0) return chosen;
    p.log.warn(`ANONYMOUS ACCESS: anyone who can reach ${url} will be able to ${left.join('; ')}.`);
    cursorAt = (['secret_key', 'read_key', 'write_key'] as const).find((name) => !chosen.includes(name));
    if (ask(await p.confirm({ message: 'Create the bucket open to anonymous callers like this?', initialValue: false }))) return chosen;
  }
}

/** Each chosen credential's key: generated, or the user's own (a short one warned about, with a generated one offered). */
async function askKeys(
  { p, ask }: Wizard,
  chosen: CredentialName[],
): Promise<{ keys: Partial<Record<CredentialName, string>>; generated: CredentialName[] }> {
  const keys: Partial<Record<CredentialName, string>> = {};
  const generated: CredentialName[] = [];
  const generate = (name: CredentialName) => {
    keys[name] = generateKey();
    generated.push(name);
  };
  for (const name of chosen) {
    const label = CREDENTIALS.find((c) => c.value === name)!.label;
    const how = ask(
      await p.select({
        message: `${label[0]!.toUpperCase()}${label.slice(1)}`,
        options: [
          { value: 'generate', label: 'generate a strong random key', hint: 'recommended: 256 random bits' },
          { value: 'enter', label: 'enter my own', hint: 'make it long: a short key can be guessed' },
        ],
      }),
    );
    if (how === 'generate') {
      generate(name);
      continue;
    }
    const own = ask(await p.password({ message: `Enter the ${label}`, validate: (v) => (v ? undefined : 'cannot be empty') }));
    if (own.length < MIN_KEY_LENGTH && (await prefersGenerated({ p, ask }, label, own.length))) generate(name);
    else keys[name] = own;
  }
  return { keys, generated };
}

/** Warns about a short key of the user's own; true when they take a generated one instead. */
async function prefersGenerated({ p, ask }: Pick<Wizard, 'p' | 'ask'>, label: string, length: number): Promise<boolean> {
  p.log.warn(`That ${label} is ${length} characters: anyone who guesses it gets its access. ${MIN_KEY_LENGTH} or more is recommended.`);
  const choice = ask(
    await p.select({
      message: `Keep this short ${label}?`,
      options: [
        { value: 'generate', label: 'use a generated strong key instead' },
        { value: 'keep', label: 'keep mine' },
      ],
    }),
  );
  return choice === 'generate';
}

/** The profile to save as; answering "No" to replacing one asks for another name (Ctrl-C still cancels). */
async function askProfile({ p, ask }: Wizard, initial: string): Promise<string> {
  let profileName = initial;
  let message = 'Save as profile';
  for (;;) {
    profileName = ask(await p.text({ message, initialValue: profileName, validate: (v) => (v ? undefined : 'a name') }));
    if (readConfig().profiles[profileName] === undefined) return profileName;
    if (ask(await p.confirm({ message: `Profile "${profileName}" exists. Replace it?`, initialValue: false }))) return profileName;
    profileName = '';
    message = 'Save as profile (another name)';
  }
}

/**
 * Creates the bucket and saves its profile; the bucket's id. From here a Ctrl-C would leave a
 * bucket without a profile (or with its generated keys never shown): the two steps are finished
 * first, and the interruption is reported after them.
 */
async function createAndSave(
  { p, flags }: Wizard,
  answers: { url: string; email: string; keys: Partial<Record<CredentialName, string>>; defaultTtl: number; profileName: string },
): Promise<string> {
  const { url, keys } = answers;
  let interrupted = false;
  const holdInterrupt = () => {
    interrupted = true;
  };
  process.on('SIGINT', holdInterrupt);
  // No spinner here: clack's spinner takes the terminal raw and exits at once on Ctrl-C.
  p.log.step('Creating the bucket…');
  const { client, close } = await openClient(url, flags.token || process.env.KVB_TOKEN || undefined, 30_000, flags.ca);
  let id: string;
  try {
    try {
      id = await client.createBucket({ email: answers.email, ...keys, default_ttl: answers.defaultTtl });
    } catch (err) {
      p.log.error('Could not create the bucket');
      throw err;
    } finally {
      await close();
    }
    saveProfile(answers.profileName, { url, bucket: id, ...(keys.secret_key ? { secret_key: keys.secret_key } : {}) });
    p.log.success(`Created bucket ${id}`);
  } finally {
    process.off('SIGINT', holdInterrupt);
  }
  if (interrupted) p.log.warn(`Bucket ${id} was created and its profile saved despite the interruption.`);
  return id;
}
