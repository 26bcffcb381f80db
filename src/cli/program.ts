import { Argument, Command, InvalidArgumentError, Option } from 'commander';
import { VERSION } from '../version.js';
import { registerServe } from './commands/serve.js';

/*
 * The `kvb` command tree: every command, flag and help text, and nothing else. Each command's
 * implementation lives in commands/, one file per command, and is loaded with import() only when
 * that command runs (with undici, clack or cli-table3 behind it): start-up time is a feature.
 */

export const EXIT_CODES_HELP = `
Exit codes:
  0  success
  1  usage or client error (bad flags, bad input, 400)
  2  key or bucket not found (404)
  3  authentication or permission refused (401, 403)
  4  server or network unreachable
  5  server error (500, 503)`;

const MAX_TTL = 2147483647;
const TYPES = ['json', 'text', 'int', 'float', 'bytes'];
const PERMISSIONS = ['read', 'write', 'enumerate', 'delete'];

type Run = (...args: any[]) => Promise<void>;

/** An action that loads its implementation module only when it runs. */
function lazy<M, K extends keyof M>(load: () => Promise<M>, name: K) {
  return async (...args: unknown[]): Promise<void> => {
    const implementation = (await load())[name] as Run;
    await implementation(...args);
  };
}

function integer(flag: string, min: number, max: number) {
  return (value: string): number => {
    if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
      throw new InvalidArgumentError(`${flag} must be an integer from ${min} to ${max}`);
    }
    return Number(value);
  };
}

const collect = (value: string, previous: string[]) => [...previous, value];

function permissionList(value: string): string[] {
  const list = value
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  if (list.length === 0 || list.some((p) => !PERMISSIONS.includes(p))) {
    throw new InvalidArgumentError(`permissions are a comma-separated list of ${PERMISSIONS.join(', ')}`);
  }
  return list;
}

const examples = (...lines: string[]) => `\nExamples:\n${lines.map((l) => `  ${l}`).join('\n')}`;

export function buildProgram(): Command {
  const program = new Command('kvb')
    .description('kvb: an HTTP key-value bucket service and its command-line client')
    .version(VERSION, '-V, --version')
    .option('--url <url>', 'server URL (env KVB_URL; default http://127.0.0.1:8080)')
    .option('--bucket <id>', 'bucket id (env KVB_BUCKET)')
    .option('--token <token>', 'credential sent as Authorization: Bearer (env KVB_TOKEN)')
    .option('--profile <name>', 'profile from the config file (env KVB_PROFILE; default "default")')
    .option('-q, --quiet', 'no messages on stderr (failures are still reported)')
    .configureHelp({ showGlobalOptions: true })
    .addHelpText(
      'after',
      `
Each setting comes from, in order: flag > environment > profile > default.
Profiles live in $XDG_CONFIG_HOME/kvb/config.json (default ~/.config/kvb/);
a profile holding a secret key uses it when no --token is given.
${examples(
  'kvb init',
  'B=$(kvb create-bucket --email me@example.com --secret-key "$S")',
  'export KVB_BUCKET=$B KVB_TOKEN=$S',
  'kvb set greeting hello',
  'kvb get greeting || echo missing',
  'kvb incr visits',
  'kvb ls --format jsonl --values | jq -c .',
)}

See man kvb for everything.`,
    );
  program.addHelpText('afterAll', EXIT_CODES_HELP);

  program
    .command('init')
    .description('interactive set-up: check the server, create a bucket, save a profile')
    .addHelpText(
      'after',
      `
Asks for the server URL (and checks /health), an email, which credentials to
set (offering strong random keys, shown once) and a default TTL; then creates
the bucket and saves a profile. Ctrl-C at any question leaves nothing behind.
It needs a terminal; in scripts use:
  kvb create-bucket --email me@example.com --secret-key "$S" --save`,
    )
    .action(lazy(() => import('./commands/init.js'), 'init'));

  program
    .command('create-bucket')
    .description('create a bucket and print its id')
    .requiredOption('--email <email>', 'admin contact for the bucket (required)')
    .option('--secret-key <key>', 'admin credential (policy, tokens, everything)')
    .option('--read-key <key>', 'credential for reading and listing')
    .option('--write-key <key>', 'credential for writing')
    .option('--signing-key <key>', 'key the server signs temporary tokens with')
    .addOption(
      new Option('--default-ttl <seconds>', 'TTL of keys set without one (0 = no expiry; server default 604800)').argParser(
        integer('--default-ttl', 0, MAX_TTL),
      ),
    )
    .option('--save [profile]', 'save url, bucket and secret key as a profile (default: --profile, or "default")')
    .addHelpText(
      'after',
      `
Prints the bucket id alone on stdout. A --token (or KVB_TOKEN) given
explicitly is sent as the server's bucket-creation key.
${examples(
  'B=$(kvb create-bucket --email me@example.com --secret-key "$S")',
  'kvb create-bucket --email me@example.com --secret-key "$S" --save work',
  'kvb --url https://kv.example.com create-bucket --email me@example.com --default-ttl 0',
)}`,
    )
    .action(lazy(() => import('./commands/create-bucket.js'), 'createBucket'));

  const bucket = program
    .command('bucket')
    .description("show, change, check or delete the bucket's policy (needs the secret key)")
    .addHelpText('after', examples('kvb bucket show', 'kvb bucket update --read-key "$R" --default-ttl 3600', 'kvb bucket delete --yes'));
  bucket
    .command('show')
    .description('show the policy: which credentials are set, default TTL, anonymous access')
    .option('--json', "print the server's policy projection as JSON")
    .addHelpText('after', examples('kvb bucket show', 'kvb bucket show --json | jq .anonymous_access'))
    .action(lazy(() => import('./commands/bucket.js'), 'show'));
  bucket
    .command('update')
    .description('set, rotate or clear credentials and the default TTL')
    .option('--secret-key <key>', 'set a new admin key (a profile holding the old one is updated)')
    .option('--read-key <key>', 'set the read key')
    .option('--clear-read-key', 'remove the read key (anonymous read and list allowed)')
    .option('--write-key <key>', 'set the write key')
    .option('--clear-write-key', 'remove the write key (anonymous write allowed)')
    .option('--signing-key <key>', 'set the token signing key (invalidates earlier tokens)')
    .option('--rotate-signing-key', 'generate a new random signing key (invalidates earlier tokens)')
    .option('--clear-signing-key', 'remove the signing key (no more tokens)')
    .addOption(new Option('--default-ttl <seconds>', 'TTL of keys set without one (0 = no expiry)').argParser(integer('--default-ttl', 0, MAX_TTL)))
    .addHelpText(
      'after',
      examples('kvb bucket update --read-key "$R"', 'kvb bucket update --clear-read-key --default-ttl 0', 'kvb bucket update --rotate-signing-key'),
    )
    .action(lazy(() => import('./commands/bucket.js'), 'update'));
  bucket
    .command('delete')
    .description('delete the bucket and every key in it (asks first unless --yes)')
    .option('-y, --yes', 'do not ask for confirmation')
    .addHelpText('after', examples('kvb bucket delete', 'kvb --bucket "$B" bucket delete --yes'))
    .action(lazy(() => import('./commands/bucket.js'), 'remove'));
  bucket
    .command('exists')
    .description('exit 0 if the bucket exists and the credential is admin, 2 otherwise (prints nothing)')
    .addHelpText('after', examples('kvb bucket exists && echo ok', 'kvb --bucket "$B" bucket exists || echo "no such bucket"'))
    .action(lazy(() => import('./commands/bucket.js'), 'exists'));

  program
    .command('set')
    .description('set a key to a value (from the argument, --file, or stdin)')
    .argument('<key>', 'the key (1 to 128 bytes)')
    .argument('[value]', "the value; '-', or none with stdin piped, reads stdin (binary-safe)")
    .addOption(new Option('--ttl <seconds>', 'expire after this many seconds (0 = never; default: the bucket default)').argParser(integer('--ttl', 0, MAX_TTL)))
    .addOption(new Option('--type <type>', 'store as this type (default: the server infers it)').choices(TYPES))
    .option('--file <path>', 'read the value from a file')
    .addHelpText(
      'after',
      `
Without --type the server infers the type as it does for curl: a number is
int64 or float64, other valid JSON is json, anything else is bytes. --type
json, text and bytes send the matching Content-Type; --type int and float check
the value and send it in the server's number grammar (3 with --type float is 3.0).
${examples(
  'kvb set greeting hello --type text',
  `kvb set config '{"a":1}' --ttl 3600`,
  'kvb set ratio 3 --type float',
  'kvb set photo --file photo.jpg --type bytes',
  'tar c dir | kvb set backup -',
)}`,
    )
    .action(lazy(() => import('./commands/set.js'), 'set'));

  program
    .command('get')
    .description("print a key's value (exact bytes), or with --json its type and expiry too")
    .argument('<key>', 'the key')
    .option('--json', 'print {"key","type","value","expires_at"} (bytes as base64)')
    .addHelpText(
      'after',
      `
Exits 2 when the key does not exist (or has expired), so scripts can write
  kvb get k || echo missing
${examples('kvb get greeting', 'kvb get photo > photo.jpg', 'kvb get config --json | jq .value')}`,
    )
    .action(lazy(() => import('./commands/get.js'), 'get'));

  program
    .command('del')
    .description('delete a key (exit 2 if it does not exist)')
    .argument('<key>', 'the key')
    .addHelpText('after', examples('kvb del greeting', 'kvb del session/42 || true'))
    .action(lazy(() => import('./commands/del.js'), 'del'));

  program
    .command('incr')
    .description('add a signed delta to a numeric key (default +1) and print the new value')
    .argument('<key>', 'the key (created with the delta as its value if missing)')
    .argument('[delta]', 'a number: 5 or +5 adds, -1 subtracts, 0.5 makes it a float', '+1')
    .addOption(new Option('--ttl <seconds>', 'set the expiry (default: keep it; new keys get the bucket default)').argParser(integer('--ttl', 0, MAX_TTL)))
    .addHelpText('after', examples('kvb incr visits', 'kvb incr stock -1', 'kvb incr score 5 --ttl 3600'))
    .action(lazy(() => import('./commands/incr.js'), 'incr'));

  program
    .command('ls')
    .description('list keys (and values) in byte order')
    .argument('[prefix]', 'only keys starting with this')
    .addOption(new Option('--limit <n>', 'at most this many keys (server default 10000)').argParser(integer('--limit', 0, 1_000_000)))
    .addOption(new Option('--skip <n>', 'skip this many keys first').argParser(integer('--skip', 0, Number.MAX_SAFE_INTEGER)))
    .option('--reverse', 'reverse byte order')
    .option('--values', 'include the values')
    .addOption(
      new Option('--format <format>', 'table (default on a terminal), text (default when piped), json or jsonl').choices(['table', 'text', 'json', 'jsonl']),
    )
    .addHelpText(
      'after',
      `
text, json and jsonl are the server's own list formats, passed through as they
stream in, so large buckets are never held in memory.
${examples('kvb ls user/', 'kvb ls --values --limit 20', "kvb ls --format jsonl --values | jq -r '.[0]'", 'kvb ls --format json | jq length')}`,
    )
    .action(lazy(() => import('./commands/ls.js'), 'ls'));

  program
    .command('txn')
    .description('set and delete several keys atomically (all or nothing)')
    .argument('[file]', "a {\"txn\":[…]} document or JSONL operations; '-', or none with stdin piped, reads stdin")
    .option('--set <key=value>', 'set a key (repeatable); the value is JSON if it parses (except null), else text', collect, [])
    .option('--del <key>', 'delete a key (repeatable)', collect, [])
    .addOption(new Option('--ttl <seconds>', 'TTL of every --set (default: the bucket default)').argParser(integer('--ttl', 0, MAX_TTL)))
    .addHelpText(
      'after',
      `
Operations are {"set":"key","value":<json>,"ttl":S} and {"delete":"key"}. A JSON
string value is stored as text, any other JSON value as JSON.
${examples(
  'kvb txn --set a=1 --set b=hello --del c',
  'kvb txn ops.json',
  `printf '%s\\n' '{"set":"a","value":1}' '{"delete":"b"}' | kvb txn -`,
)}`,
    )
    .action(lazy(() => import('./commands/txn.js'), 'txn'));

  program
    .command('mint-token')
    .description('mint a temporary token limited to a key prefix and permissions (needs the secret key)')
    .requiredOption('--prefix <prefix>', 'keys the token may reach')
    .addOption(new Option('--permissions <list>', 'comma-separated: read, write, enumerate, delete').argParser(permissionList).makeOptionMandatory())
    .addOption(new Option('--ttl <seconds>', 'lifetime in seconds').argParser(integer('--ttl', 1, MAX_TTL)).makeOptionMandatory())
    .option('--json', 'print the whole response, {"access_token": …}')
    .addHelpText(
      'after',
      `
The bucket needs a signing key (kvb bucket update --rotate-signing-key).
${examples(
  'export KVB_TOKEN=$(kvb mint-token --prefix user/42/ --permissions read,write --ttl 600)',
  'kvb mint-token --prefix logs/ --permissions enumerate --ttl 3600 --json',
)}`,
    )
    .action(lazy(() => import('./commands/mint-token.js'), 'mintToken'));

  program
    .command('completion')
    .description('print a shell completion script (bash, zsh or fish)')
    .addArgument(new Argument('<shell>', 'the shell').choices(['bash', 'zsh', 'fish']))
    .addHelpText(
      'after',
      `
The same scripts ship in completions/ (kvb.bash, _kvb, kvb.fish).
${examples(
  'source <(kvb completion bash)              # in ~/.bashrc',
  'kvb completion zsh > "${fpath[1]}/_kvb"',
  'kvb completion fish > ~/.config/fish/completions/kvb.fish',
)}`,
    )
    .action(lazy(() => import('./commands/completion.js'), 'completion'));

  registerServe(program);
  return program;
}
