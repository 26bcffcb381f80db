import BetterSqlite3 from 'better-sqlite3';
import type { Durability } from '../../limits.js';
import { SERVER_AUTOCHECKPOINT_PAGES } from './sqlite-checkpointer.js';

/** How much of the database file is read through a memory map. */
const MMAP_BYTES = 256 * 1024 * 1024;

/** How a connection commits: the file's journal, its sync level and the auto-checkpoint fallback. */
export function writeSettings(raw: BetterSqlite3.Database, durability: Durability, file: boolean): void {
  raw.pragma(`synchronous = ${durability === 'full' ? 'FULL' : 'NORMAL'}`);
  // The checkpointer copies the WAL beside the writer (sqlite-checkpointer.ts); this is the fallback.
  if (file) raw.pragma(`wal_autocheckpoint = ${SERVER_AUTOCHECKPOINT_PAGES}`);
}

/** Settings every connection on a kvb file takes, the writer's and the readers'. */
export function readSettings(raw: BetterSqlite3.Database, file: boolean): void {
  // Reads through a memory map instead of pread into SQLite's 2 MB page cache: at 1M keys that
  // cache missed on most reads, about 10 µs of system time each. Mapped pages are the OS page
  // cache (file-backed, counted in RSS but not in anonymous memory).
  if (file) raw.pragma(`mmap_size = ${MMAP_BYTES}`);
  raw.pragma('busy_timeout = 5000');
}

/** The writer thread's connection to a file the request thread has opened and migrated (it holds the lock). */
export function openWriteConnection(path: string, durability: Durability): BetterSqlite3.Database {
  const raw = new BetterSqlite3(path, { fileMustExist: true, timeout: 0 });
  try {
    readSettings(raw, true);
    writeSettings(raw, durability, true);
    return raw;
  } catch (err) {
    raw.close();
    throw err;
  }
}
