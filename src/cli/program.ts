import { Command } from 'commander';
import { VERSION } from '../version.js';
import { registerServe } from './commands/serve.js';

/** The `kvb` command tree. Each command lives in commands/, one file per command. */
export function buildProgram(): Command {
  const program = new Command('kvb')
    .description('kvb: an HTTP key-value bucket service and its command-line client')
    .version(VERSION, '-V, --version');
  registerServe(program);
  return program;
}
