import { writeSync } from 'node:fs';

/** How long to wait before writing again to a full non-blocking pipe (sonic-boom, pino's own writer, waits as long). */
const BUSY_WAIT_MS = 100;
const sleeper = new Int32Array(new SharedArrayBuffer(4));

/**
 * The JSON log's stdout, written once per event-loop turn: the lines a turn logs (an access line
 * per request answered in it) go out in one `write` after the turn instead of one each. pino's
 * own destination makes a write system call per line, which was the largest single cost of a GET
 * hit answered by the fast lane after the socket write itself (docs/performance.md). Lines are
 * still written synchronously, in order, and before the process exits ('exit' flushes what the
 * last turn logged); only a SIGKILL within the turn that logged them can lose them.
 * As pino does, a reader that went away (EPIPE) ends logging, and a full pipe is waited for.
 */
export function stdoutByTurn(fd = 1): { write(line: string): void; flushSync(): void } {
  let pending: string[] = [];
  let closed = false;
  const flushSync = () => {
    if (pending.length === 0) return;
    const chunk = Buffer.from(pending.join(''));
    pending = [];
    if (!closed) closed = !writeAll(fd, chunk);
  };
  process.once('exit', flushSync);
  return {
    write(line) {
      if (closed) return;
      if (pending.push(line) === 1) setImmediate(flushSync);
    },
    flushSync,
  };
}

/** Writes the whole chunk; false when the reader is gone (EPIPE). Other errors are thrown, as pino's are. */
function writeAll(fd: number, chunk: Buffer): boolean {
  let offset = 0;
  while (offset < chunk.length) {
    try {
      offset += writeSync(fd, chunk, offset);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EPIPE') return false;
      if (code !== 'EAGAIN' && code !== 'EBUSY') throw err;
      Atomics.wait(sleeper, 0, 0, BUSY_WAIT_MS);
    }
  }
  return true;
}
