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

async function wizard(command: RunningCommand): Promise<void> {
  const flags = globalFlags(command);
  if (!stdinIsTty()) {
    throw new UsageError(
      'kvb init is interactive and stdin is not a terminal; in scripts use: kvb create-bucket --email E --secret-key K --save [PROFILE]',
    );
  }
  const connection = resolveConnection(flags, process.env, { allowMissingProfile: true });
  const p = await import('@clack/prompts');
  const ask = <T>(answer: T | symbol): Exclude<T, symbol> => {
    if (p.isCancel(answer)) throw new Cancelled();
    return answer as Exclude<T, symbol>;
  };

  try {
    p.intro('kvb init');
    let url = connection.url;
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
        break;
      } catch (err) {
        spin.error(`No kvb server answered: ${(err as Error).message}`);
      } finally {
        await close();
      }
    }

    const email = ask(
      await p.text({
        message: 'Admin email for the bucket',
        validate: (v) => (v?.includes('@') && v.length <= 254 ? undefined : 'an email address'),
      }),
    );
    // A private bucket by default: secret, read and write keys. A choice that leaves anonymous
    // access says so loudly and must be confirmed; "No" asks again.
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
      if (left.length === 0) break;
      p.log.warn(`ANONYMOUS ACCESS: anyone who can reach ${url} will be able to ${left.join('; ')}.`);
      cursorAt = (['secret_key', 'read_key', 'write_key'] as const).find((name) => !chosen.includes(name));
      if (ask(await p.confirm({ message: 'Create the bucket open to anonymous callers like this?', initialValue: false }))) break;
    }
    const keys: Partial<Record<CredentialName, string>> = {};
    const generated: CredentialName[] = [];
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
        keys[name] = generateKey();
        generated.push(name);
      } else {
        const own = ask(await p.password({ message: `Enter the ${label}`, validate: (v) => (v ? undefined : 'cannot be empty') }));
        if (own.length < MIN_KEY_LENGTH) {
          p.log.warn(
            `That ${label} is ${own.length} characters: anyone who guesses it gets its access. ${MIN_KEY_LENGTH} or more is recommended.`,
          );
          const choice = ask(
            await p.select({
              message: `Keep this short ${label}?`,
              options: [
                { value: 'generate', label: 'use a generated strong key instead' },
                { value: 'keep', label: 'keep mine' },
              ],
            }),
          );
          if (choice === 'generate') {
            keys[name] = generateKey();
            generated.push(name);
            continue;
          }
        }
        keys[name] = own;
      }
    }
    const ttlText = ask(
      await p.text({
        message: 'Default TTL of keys, in seconds (0 = never expire)',
        initialValue: String(DEFAULT_BUCKET_TTL_SECONDS),
        validate: (v) => (v && /^\d+$/.test(v) && Number(v) <= MAX_TTL_SECONDS ? undefined : `an integer from 0 to ${MAX_TTL_SECONDS}`),
      }),
    );
    // Answering "No" to replacing a profile asks for another name (Ctrl-C still cancels).
    let profileName = connection.profileName;
    let message = 'Save as profile';
    for (;;) {
      profileName = ask(await p.text({ message, initialValue: profileName, validate: (v) => (v ? undefined : 'a name') }));
      if (readConfig().profiles[profileName] === undefined) break;
      if (ask(await p.confirm({ message: `Profile "${profileName}" exists. Replace it?`, initialValue: false }))) break;
      profileName = '';
      message = 'Save as profile (another name)';
    }

    // From here a Ctrl-C would leave a bucket without a profile (or with its generated keys never
    // shown): the two steps are finished first, and the interruption is reported after them.
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
        id = await client.createBucket({ email, ...keys, default_ttl: Number(ttlText) });
      } catch (err) {
        p.log.error('Could not create the bucket');
        throw err;
      } finally {
        await close();
      }
      saveProfile(profileName, { url, bucket: id, ...(keys.secret_key ? { secret_key: keys.secret_key } : {}) });
      p.log.success(`Created bucket ${id}`);
    } finally {
      process.off('SIGINT', holdInterrupt);
    }
    if (interrupted) p.log.warn(`Bucket ${id} was created and its profile saved despite the interruption.`);
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
