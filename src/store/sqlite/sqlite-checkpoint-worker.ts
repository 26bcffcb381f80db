/**
 * The WAL checkpointer's thread (started by sqlite-checkpointer.ts): its own connection to the
 * server's file, copying committed WAL frames into the database file while the server's thread
 * goes on writing. A PASSIVE checkpoint never blocks a writer or a reader and never waits.
 */
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

const { path, commits, intervalMs } = workerData as { path: string; commits: Int32Array; intervalMs: number };
const db = new Database(path, { fileMustExist: true });
let seen = Atomics.load(commits, 0);

const timer = setInterval(() => {
  const now = Atomics.load(commits, 0);
  if (now === seen) return;
  seen = now;
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
  } catch {
    // A busy or full disk: the server's own checkpoint (SQLite's auto-checkpoint) still runs.
  }
}, intervalMs);

parentPort!.on('message', (message: unknown) => {
  if (message !== 'close') return;
  clearInterval(timer);
  db.close();
  parentPort!.close();
});
