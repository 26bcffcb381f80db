import type { RunningServer } from './server.js';

/**
 * Resolves with the first match of `pattern` in the server's output once it is logged: an event,
 * polled every 10 ms, not a sleep. Fails after `ms` with the output so far.
 */
export async function logged(server: Pick<RunningServer, 'logs'>, pattern: RegExp, ms = 20_000): Promise<RegExpExecArray> {
  const start = Date.now();
  for (;;) {
    const match = pattern.exec(server.logs());
    if (match) return match;
    if (Date.now() - start > ms) throw new Error(`not logged within ${ms} ms: ${pattern}\n${server.logs()}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
