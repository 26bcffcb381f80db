import BetterSqlite3 from 'better-sqlite3';
import { closeSync, constants, openSync, statSync } from 'node:fs';
import type { StorageFailureCode } from '../../errors.js';

/** Another process (a running `kvb serve`, a `kvb db restore`) holds the database's lock. */
export class DatabaseInUseError extends Error {
  readonly code = 'KVB_DATABASE_IN_USE' satisfies StorageFailureCode;
}

/** The sidecar file whose lock says "a kvb process owns this SQLite database". */
export const lockFileOf = (dbPath: string) => `${dbPath}-lock`;

/** A held lock; `release` closes it (so does the process's end, however it ends). */
export interface HeldLock {
  /** Whether this call created the lock file (so that a refused open can take it away again). */
  readonly created: boolean;
  release(): void;
}

/**
 * Takes the lock that keeps one writing kvb process per SQLite file. The database itself runs in
 * normal (shared) locking mode so that `kvb db backup`, `dump`, `check` and exports can read it
 * while a server writes; ownership moves to `<db>-lock`, a tiny SQLite file opened in exclusive
 * locking mode and written once, so its connection holds the OS lock (fcntl) until it closes.
 * A crash or `kill -9` releases it with the process. Node has no flock/fcntl of its own, hence a
 * SQLite file rather than a plain one. The file holds no data; it gets the database file's
 * permission bits (SQLite does the same for `-wal` and `-shm`).
 */
export function takeSqliteLock(dbPath: string): HeldLock {
  const file = lockFileOf(dbPath);
  const created = createLike(file, dbPath);
  // No busy wait: a lock another process holds fails at once.
  const lock = new BetterSqlite3(file, { timeout: 0 });
  try {
    lock.pragma('locking_mode = EXCLUSIVE');
    // No journal file beside it: the one write below changes only the header of a file without data.
    lock.pragma('journal_mode = MEMORY');
    // One write takes the EXCLUSIVE lock, which exclusive locking mode keeps until close.
    lock.pragma(`user_version = ${process.pid}`);
  } catch (err) {
    lock.close();
    const code = (err as { code?: unknown }).code;
    if (code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED') {
      throw new DatabaseInUseError(`${dbPath} is in use by another process (another kvb serve?); one server per SQLite file`);
    }
    throw err;
  }
  return {
    created,
    release() {
      if (lock.open) lock.close();
    },
  };
}

/**
 * Creates the lock file, if missing, with the database file's permission bits (0644 minus umask,
 * like SQLite, before it exists); true when it created it.
 */
function createLike(file: string, dbPath: string): boolean {
  let mode = 0o644;
  try {
    mode = statSync(dbPath).mode & 0o777;
  } catch {
    // No database yet: SQLite will create it with its default, 0644 minus the umask.
  }
  try {
    closeSync(openSync(file, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY, mode));
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    return false;
  }
}
