import { Worker } from 'node:worker_threads';

/** How often the checkpointer looks for new commits. */
const CHECKPOINT_INTERVAL_MS = 50;
/**
 * The server connection's own auto-checkpoint, in WAL pages (4 KiB each): the fallback when the
 * checkpointer cannot keep up or catch up. SQLite's default is 1,000; with the checkpointer
 * copying frames meanwhile, the server's checkpoint finds little left to copy when it runs.
 */
export const SERVER_AUTOCHECKPOINT_PAGES = 10_000;

/**
 * Moves WAL checkpoints off the server's thread. SQLite's auto-checkpoint runs inside the commit
 * that crosses its threshold, on the thread that committed: it copies the WAL's pages into the
 * database file and syncs it, and every request waits meanwhile (measured: a transaction of 10
 * keys ran at 1.4x the requests per second with no checkpoint at all). A worker thread with its
 * own connection runs PASSIVE checkpoints shortly after commits instead, as SQLite's documentation
 * suggests for such applications; the server's auto-checkpoint stays as the fallback, at a higher
 * threshold (SERVER_AUTOCHECKPOINT_PAGES), so the WAL stays bounded under any load.
 */
export class Checkpointer {
  private readonly commits = new Int32Array(new SharedArrayBuffer(4));
  private readonly worker: Worker;
  private readonly exited: Promise<void>;

  constructor(path: string) {
    this.worker = new Worker(new URL('./sqlite-checkpoint-worker.js', import.meta.url), {
      workerData: { path, commits: this.commits, intervalMs: CHECKPOINT_INTERVAL_MS },
    });
    // The worker never keeps the process alive; an error in it only loses the early copying.
    this.worker.unref();
    this.exited = new Promise((resolve) => this.worker.once('exit', () => resolve()));
    this.worker.on('error', () => undefined);
  }

  /** A batch committed: the next round copies it. (An atomic add: no message per commit.) */
  committed(): void {
    Atomics.add(this.commits, 0, 1);
  }

  /** Closes the worker's connection and waits for it to end (before the server's final checkpoint). */
  async close(): Promise<void> {
    // Held while waiting: with nothing else left, an unref'd worker would let the process end here.
    this.worker.ref();
    this.worker.postMessage('close');
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.exited, new Promise<void>((resolve) => (timer = setTimeout(resolve, 2000)))]);
    clearTimeout(timer);
    await this.worker.terminate();
  }
}
