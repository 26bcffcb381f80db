import { Command } from 'commander';
import { VERSION } from '../version.js';
import { registerBucket } from './commands/bucket.js';
import { registerCompletion } from './commands/completion.js';
import { registerCreateBucket } from './commands/create-bucket.js';
import { registerDel } from './commands/del.js';
import { registerGet } from './commands/get.js';
import { registerIncr } from './commands/incr.js';
import { registerInit } from './commands/init.js';
import { registerLs } from './commands/ls.js';
import { registerMintToken } from './commands/mint-token.js';
import { registerServe } from './commands/serve.js';
import { registerSet } from './commands/set.js';
import { registerTxn } from './commands/txn.js';

export const EXIT_CODES_HELP = `
Exit codes:
  0  success
  1  usage or client error (bad flags, bad input, 400)
  2  key or bucket not found (404)
  3  authentication or permission refused (401, 403)
  4  server or network unreachable
  5  server error (500, 503)`;

/**
 * The `kvb` command tree. Each command lives in commands/, one file per command; this module and
 * those files stay light: command implementations load their heavy modules (undici, clack,
 * cli-table3, server code) with import() when they run.
 */
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

Examples:
  kvb init
  B=$(kvb create-bucket --email me@example.com --secret-key "$S")
  export KVB_BUCKET=$B KVB_TOKEN=$S
  kvb set greeting hello
  kvb get greeting || echo missing
  kvb incr visits
  kvb ls --format jsonl --values | jq -c .

See man kvb for everything.`,
    );
  program.addHelpText('afterAll', EXIT_CODES_HELP);
  registerInit(program);
  registerCreateBucket(program);
  registerBucket(program);
  registerSet(program);
  registerGet(program);
  registerDel(program);
  registerIncr(program);
  registerLs(program);
  registerTxn(program);
  registerMintToken(program);
  registerCompletion(program);
  registerServe(program);
  return program;
}
