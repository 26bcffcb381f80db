import { buildProgram } from './program.js';


/** Every failure is one line on stderr and a documented exit code; never a stack trace. */
async function report(err: unknown): Promise<number> {
  const { failure } = await import('./output.js');
  const exitCode = (err as { exitCode?: unknown } | null)?.exitCode;
  const message = err instanceof Error ? err.message : String(err);
  if (typeof exitCode === 'number') {
    failure(message);
    return exitCode;
  }
  failure(`unexpected error: ${message}`);
  if (process.env.KVB_DEBUG && err instanceof Error) process.stderr.write(`${err.stack}\n`);
  return 1;
}

try {
  await buildProgram().parseAsync(process.argv);
} catch (err) {
  process.exitCode = await report(err);
}
