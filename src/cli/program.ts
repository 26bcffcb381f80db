import { Command } from '@commander-js/extra-typings';
import { VERSION } from '../version.js';
import { bucket } from './commands/bucket.js';
import { hook } from './commands/hook.js';
import { completion } from './commands/completion.js';
import { createBucket } from './commands/create-bucket.js';
import { db } from './commands/db.js';
import { del } from './commands/del.js';
import { edit } from './commands/edit.js';
import { expire } from './commands/expire.js';
import { exportCommand } from './commands/export.js';
import { get } from './commands/get.js';
import { importCommand } from './commands/import.js';
import { history } from './commands/history.js';
import { incr } from './commands/incr.js';
import { init } from './commands/init.js';
import { lock } from './commands/lock.js';
import { ls } from './commands/ls.js';
import { mintToken } from './commands/mint-token.js';
import { profile } from './commands/profile.js';
import { rollbackCommand } from './commands/rollback.js';
import { serve } from './commands/serve.js';
import { set } from './commands/set.js';
import { ttl } from './commands/ttl.js';
import { txn } from './commands/txn.js';
import { version } from './commands/version.js';
import { watch } from './commands/watch.js';
import { exitCodesHelp } from './exit-codes.js';
import { type CommandModule, type ParentCommand, declareGlobalOptions, examples } from './define-command.js';

/*
 * The command registry: the root `kvb` command, its global flags, and the list of commands.
 *
 * To add a command (say `kvb export`):
 *   1. Create src/cli/commands/export.ts exporting
 *        export const exportCommand = defineCommand({
 *          define: (parent) => parent.command('export').description('…').argument('[prefix]', '…').option('--gzip', '…'),
 *          async run(prefix, options, command) { … options.gzip … },   // typed from `define`
 *        });
 *      (a group of subcommands, like `kvb db …`, is `defineGroup(define, [sub1, sub2])`; see commands/bucket.ts).
 *      Import only light modules at the top of that file; load heavy ones with `await import()` in
 *      `run` (withClient in session.ts already loads the HTTP client lazily).
 *   2. Add it to COMMANDS below under its name (the order is the order of `kvb --help`).
 *   3. `npm run completions`, and document it in man/kvb.1 and docs/cli.md (tests check the man page).
 */
export const COMMANDS: Record<string, CommandModule> = {
  init,
  'create-bucket': createBucket,
  bucket,
  set,
  get,
  edit,
  del,
  incr,
  expire,
  ttl,
  ls,
  history,
  rollback: rollbackCommand,
  watch,
  lock,
  txn,
  export: exportCommand,
  import: importCommand,
  'mint-token': mintToken,
  hook,
  profile,
  version,
  completion,
  db,
  serve,
};

/** Commands that read the whole command tree when they run (`completion` prints it). */
const READS_THE_TREE = new Set(['completion']);

/**
 * The command `args` (argv after the script) runs, when it can be told from the root's own options
 * alone; undefined for anything else (no command, `help`, `--help`, an unknown name or option):
 * then every command is defined, as commander's help and "did you mean" need.
 */
export function commandToRun(program: ParentCommand, args: readonly string[]): string | undefined {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === '--') return undefined;
    if (arg.startsWith('-') && arg !== '-') {
      if (arg.startsWith('--') && arg.includes('=')) continue;
      const option = program.options.find((o) => o.long === arg || o.short === arg);
      if (!option) return undefined;
      if (option.required || option.optional) i++;
      continue;
    }
    return Object.hasOwn(COMMANDS, arg) && !READS_THE_TREE.has(arg) ? arg : undefined;
  }
  return undefined;
}

/** `kvb serve` exits differently: it is a server, not a client of one. */
export const SERVE_EXIT_CODES_HELP = `
Exit codes:
  0  stopped cleanly (SIGTERM or SIGINT)
  1  could not start: a bad option or environment variable, storage that cannot be
     opened (or is in use by another server), or a port already in use`;

/**
 * The program. Given `argv` (process.argv), only the command it runs is defined when that can be
 * told (commandToRun): defining all of them was about 5% of a `kvb get` process's CPU (profiled).
 */
export function buildProgram(argv?: readonly string[]) {
  const program = declareGlobalOptions(
    new Command('kvb').description('kvb: an HTTP key-value bucket service and its command-line client').version(VERSION, '-V, --version'),
  )
    .configureHelp({ showGlobalOptions: true })
    // Commander's usage errors are thrown (not printed and exited) so main.ts reports them in
    // kvb's one format, `kvb: …` and exit 1. Subcommands inherit both settings when created.
    .exitOverride()
    .configureOutput({ outputError: () => undefined })
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
  program.addHelpText('afterAll', ({ command }) => (command.name() === 'serve' ? SERVE_EXIT_CODES_HELP : exitCodesHelp()));
  // The root's own options are the global ones every command inherits: see GlobalOptions.
  const parent = program as unknown as ParentCommand;
  const only = argv && commandToRun(parent, argv.slice(2));
  for (const [name, command] of Object.entries(COMMANDS)) if (only === undefined || name === only) command.register(parent);
  return program;
}
