import { CommanderError } from '@commander-js/extra-typings';
import { buildProgram } from './program.js';

/** Every failure is one line on stderr and a documented exit code; never a stack trace. */
async function report(err: unknown): Promise<number> {
  const { debug, failure } = await import('./output.js');
  if (err instanceof CommanderError) {
    // Help and --version end here with 0 (or 1 for a group given no subcommand: its help is shown).
    if (err.exitCode === 0 || err.code === 'commander.help' || err.code === 'commander.helpDisplayed' || err.code === 'commander.version') {
      return err.exitCode;
    }
    // A usage error found by commander reads like kvb's own: `kvb: too many arguments for 'del'…`.
    failure(err.message.replace(/^error: /, '').replace(/\s*\n\s*/g, ' '));
    return 1;
  }
  const exitCode = (err as { exitCode?: unknown } | null)?.exitCode;
  // One line, always: scripts read the first line of stderr.
  const message = (err instanceof Error ? err.message : String(err)).replace(/\s*\n\s*/g, ' ');
  if (typeof exitCode === 'number') {
    failure(message);
    return exitCode;
  }
  failure(`unexpected error: ${message}`);
  if (process.env.KVB_DEBUG && err instanceof Error && err.stack) debug(err.stack);
  return 1;
}

// No top-level await: this module is also the entry of the CommonJS bundle (scripts/build-bundle.mjs).
buildProgram(process.argv)
  .parseAsync(process.argv)
  .catch(async (err: unknown) => {
    process.exitCode = await report(err);
  });
