import { buildProgram } from './program.js';

/** Every failure is one line on stderr and a documented exit code; never a stack trace. */
async function report(err: unknown): Promise<number> {
  const { debug, failure } = await import('./output.js');
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

try {
  await buildProgram().parseAsync(process.argv);
} catch (err) {
  process.exitCode = await report(err);
}
