import { type Kysely, sql } from 'kysely';
import type { StorageFailureCode } from '../errors.js';
import { VERSION } from '../version.js';
import type { Dialect } from './dialect.js';
import { type MigrationStep, kvbMigrations } from './kvb-migrations.js';

// Applying migrations and their bookkeeping: which ran, which are pending, a database too new to
// open. The steps themselves are in kvb-migrations.ts.

/** Kysely's bookkeeping table (same name and shape as its Migrator's, so databases made by kvb 0.1.0 carry over). */
export const MIGRATION_TABLE = 'kysely_migration';

// biome-ignore lint/suspicious/noExplicitAny: the bookkeeping table is not in the Database type, and callers pass both typed and migration builders
type AnyDb = Kysely<any>;

const scoped = (db: AnyDb, schema: string | undefined) => (schema ? db.withSchema(schema) : db);

/** Names of the migrations already applied. */
export async function appliedMigrations(db: AnyDb, schema?: string): Promise<Set<string>> {
  const rows = await scoped(db, schema).selectFrom(MIGRATION_TABLE).select('name').execute();
  return new Set(rows.map((r) => String(r.name)));
}

/** A database migrated by a newer kvb than this one: refused before anything is read or written. */
export class DatabaseTooNewError extends Error {
  readonly code = 'KVB_DATABASE_TOO_NEW' satisfies StorageFailureCode;
}

/**
 * Refuses a database holding migrations this kvb does not know (a newer kvb upgraded it): running
 * on it could misread or damage what the newer schema means. Names both versions when the newer
 * kvb recorded its own (the `kvb_version` column of the bookkeeping table, kept since 0.1.x).
 */
export async function refuseNewerDatabase(db: AnyDb, steps: MigrationStep[], schema?: string): Promise<void> {
  const known = new Set(steps.map((s) => s.name));
  // `kvb_version` may be absent: older databases have no such column.
  let rows: Array<{ name: unknown; kvb_version?: unknown }>;
  try {
    rows = await scoped(db, schema).selectFrom(MIGRATION_TABLE).select(['name', 'kvb_version']).execute();
  } catch {
    rows = [...(await appliedMigrations(db, schema))].map((name) => ({ name }));
  }
  const unknown = rows.filter((r) => !known.has(String(r.name))).sort((a, b) => String(a.name).localeCompare(String(b.name)));
  if (unknown.length === 0) return;
  const newest = unknown.at(-1)!;
  const by = typeof newest.kvb_version === 'string' && newest.kvb_version ? `kvb ${newest.kvb_version}` : 'a newer kvb';
  throw new DatabaseTooNewError(
    `this database was upgraded by ${by} (schema migration ${String(newest.name)}); this is kvb ${VERSION}, which knows migrations up to ` +
      `${steps.at(-1)?.name ?? 'none'}. Run ${by === 'a newer kvb' ? 'that newer kvb' : `${by} or newer`}, or restore the backup taken before the upgrade.`,
  );
}

/** Migrations not yet applied to a database, in order (`kvb db migrate --dry-run`). */
export async function pendingMigrations(db: AnyDb, steps: MigrationStep[], schema?: string): Promise<string[]> {
  let applied: Set<string>;
  try {
    applied = await appliedMigrations(db, schema);
  } catch {
    applied = new Set(); // no bookkeeping table yet: a new database, every migration pending
  }
  if (applied.size > 0) await refuseNewerDatabase(db, steps, schema);
  return steps.filter((s) => !applied.has(s.name)).map((s) => s.name);
}

/**
 * Runs `work` in one transaction on one connection. Kysely's transaction() rolls back when work
 * throws, and when SQLite has already rolled back by itself (SQLITE_FULL) that rollback throws
 * "cannot rollback - no transaction is active", hiding the error that matters: here a failed
 * rollback is ignored and the first error is the one thrown.
 */
async function inTransaction(db: AnyDb, work: (trx: AnyDb) => Promise<void>): Promise<void> {
  await db.connection().execute(async (conn) => {
    await sql`begin`.execute(conn);
    try {
      await work(conn);
      await sql`commit`.execute(conn);
    } catch (err) {
      await sql`rollback`.execute(conn).catch(() => undefined);
      throw err;
    }
  });
}

/**
 * Runs every pending migration, each in its own transaction together with its bookkeeping row,
 * so a migration that fails (a full disk, a crash) leaves nothing behind and the next start
 * runs it again. SQLite and PostgreSQL both roll back DDL. The bookkeeping table is made in the
 * first migration's transaction, so a first start that fails leaves no table at all (a file
 * holding only `kysely_migration` used to be refused later as not a kvb database). Kysely's own
 * Migrator is not used: it runs SQLite migrations outside any transaction, and on PostgreSQL
 * takes an advisory lock. Callers serialise instances themselves (PostgreSQL: the `migrate`
 * lease). Each row records the kvb version that applied it, so an older kvb can name it when it
 * refuses the database. Returns what it ran.
 */
export async function runMigrations(db: AnyDb, steps: MigrationStep[], schema?: string): Promise<string[]> {
  const ran: string[] = [];
  let bookkeeping = await hasMigrationTable(db, schema);
  if (bookkeeping) {
    await refuseNewerDatabase(db, steps, schema);
    await addVersionColumn(db, schema);
  }
  for (const step of steps) {
    await inTransaction(db, async (trx) => {
      const t = scoped(trx, schema);
      if (!bookkeeping) {
        await t.schema
          .createTable(MIGRATION_TABLE)
          .ifNotExists()
          .addColumn('name', 'varchar(255)', (c) => c.notNull().primaryKey())
          .addColumn('timestamp', 'varchar(255)', (c) => c.notNull())
          .addColumn('kvb_version', 'varchar(64)')
          .execute();
      } else {
        const done = await t.selectFrom(MIGRATION_TABLE).select('name').where('name', '=', step.name).executeTakeFirst();
        if (done) return;
      }
      await step.up(t);
      await t.insertInto(MIGRATION_TABLE).values({ name: step.name, timestamp: new Date().toISOString(), kvb_version: VERSION }).execute();
      ran.push(step.name);
    });
    bookkeeping = true;
  }
  return ran;
}

async function hasMigrationTable(db: AnyDb, schema: string | undefined): Promise<boolean> {
  try {
    await scoped(db, schema).selectFrom(MIGRATION_TABLE).select('name').limit(1).execute();
    return true;
  } catch {
    return false;
  }
}

/** Databases made before kvb recorded versions get the column (nullable: their rows stay unnamed). */
async function addVersionColumn(db: AnyDb, schema: string | undefined): Promise<void> {
  try {
    await scoped(db, schema).selectFrom(MIGRATION_TABLE).select('kvb_version').limit(1).execute();
  } catch {
    await scoped(db, schema).schema.alterTable(MIGRATION_TABLE).addColumn('kvb_version', 'varchar(64)').execute();
  }
}

export async function migrateToLatest(db: AnyDb, dialect: Dialect, schema?: string): Promise<string[]> {
  return runMigrations(db, kvbMigrations(dialect), schema);
}
