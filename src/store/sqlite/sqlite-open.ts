import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';
import { mkdirSync, rmSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { kvbMigrations } from '../kvb-migrations.js';
import { MIGRATION_TABLE, appliedMigrations, migrateToLatest, refuseNewerDatabase } from '../migration-runner.js';
import type { Database } from '../schema.js';
import { type HeldLock, DatabaseInUseError, lockFileOf, takeSqliteLock } from './sqlite-lock.js';
import type { Durability } from '../../limits.js';
import { readSettings, writeSettings } from './sqlite-settings.js';

/** Size of a file in bytes; 0 when it does not exist. */
function fileSize(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

/** The tables, indexes and bookkeeping a kvb database holds; anything else means the file belongs to someone else. */
const KVB_OBJECTS = new Set([
  'buckets',
  'entries',
  'entries_expires_at',
  'changes',
  'changes_committed_at',
  'changes_key',
  'revision_ops',
  'webhooks',
  'webhooks_bucket',
  'webhook_deliveries',
  MIGRATION_TABLE,
  'kysely_migration_lock',
]);

/** A SQLite file that is neither empty nor kvb's: kvb refuses it before writing anything. */
export class ForeignDatabaseError extends Error {
  readonly code = 'KVB_FOREIGN_DATABASE';
}

/**
 * Refuses a file that holds another application's schema, reading only (no WAL switch, no
 * tables yet). A kvb database has the migration table and kvb's tables; an empty file has nothing.
 */
function assertEmptyOrKvb(raw: BetterSqlite3.Database, path: string): void {
  const names = (raw.prepare("select name from sqlite_master where name not like 'sqlite_%'").all() as Array<{ name: string }>).map(
    (r) => r.name,
  );
  if (names.length === 0) return;
  const foreign = names.filter((n) => !KVB_OBJECTS.has(n));
  if (!names.includes(MIGRATION_TABLE) || !names.includes('buckets') || foreign.length > 0) {
    const shown = (foreign.length > 0 ? foreign : names).slice(0, 5).join(', ');
    throw new ForeignDatabaseError(
      `${path} is not a kvb database (it holds ${shown}); kvb has not changed it. Point --db at a new file or an existing kvb database.`,
    );
  }
}

export interface OpenedSqlite {
  /** The request thread's connection: it migrated the file, and reads; on ':memory:' it also writes. */
  raw: BetterSqlite3.Database;
  db: Kysely<Database>;
  /** The sidecar lock this process holds; undefined for a store that reads beside a running server. */
  lock: HeldLock | undefined;
}

/**
 * Opens a kvb SQLite file for the request thread: takes its lock (or, with `access: 'read'`,
 * reads beside the process holding it), refuses a foreign or newer file, and migrates it.
 */
export async function openSqlite(options: { path: string; durability: Durability; access?: 'own' | 'read' }): Promise<OpenedSqlite> {
  const memory = options.path === ':memory:';
  if (!memory) mkdirSync(dirname(options.path), { recursive: true });
  let lock: HeldLock | undefined;
  if (!memory) {
    try {
      lock = takeSqliteLock(options.path);
    } catch (err) {
      if (!(err instanceof DatabaseInUseError) || options.access !== 'read') throw err;
    }
  }
  // A first start that fails (a full disk part-way through the migrations) must leave no
  // half-made file for the next start to refuse: a file that was absent or empty is removed.
  const fresh = !memory && lock !== undefined && fileSize(options.path) === 0;
  // No busy wait while opening; the lock above already says whether another kvb owns the file.
  let raw: BetterSqlite3.Database | undefined;
  try {
    raw = new BetterSqlite3(options.path, { timeout: 0 });
    // Normal (shared) locking: backups, dumps and exports read from connections of their own
    // while the server writes. Exclusive mode made reads faster at the SQLite level, but a GET
    // hit is served from the entry cache; measured at the HTTP level in docs/performance.md.
    // Before anything that writes (the WAL switch included).
    assertEmptyOrKvb(raw, options.path);
    const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: raw }) });
    if (lock || memory) {
      raw.pragma('journal_mode = WAL');
      // ':memory:' writes on this connection (no other thread can open it); a file, on the writer's.
      if (memory) writeSettings(raw, options.durability, false);
      await migrateToLatest(db, 'sqlite');
    } else {
      // Reading beside the server that owns the file: it migrated it; a newer kvb's file is left alone.
      await refuseNewerDatabase(db, kvbMigrations('sqlite'));
      const applied = await appliedMigrations(db);
      const missing = kvbMigrations('sqlite').filter((m) => !applied.has(m.name));
      if (missing.length > 0) throw new Error(`the kvb serve that holds ${options.path} has not upgraded it to this kvb's schema`);
    }
    readSettings(raw, !memory);
    return { raw, db, lock };
  } catch (err) {
    raw?.close();
    if (fresh) for (const suffix of ['', '-wal', '-shm', '-journal']) rmSync(`${options.path}${suffix}`, { force: true });
    lock?.release();
    // Another application's file: leave nothing of kvb's beside it either.
    if ((fresh || err instanceof ForeignDatabaseError) && lock?.created) rmSync(lockFileOf(options.path), { force: true });
    throw err;
  }
}
