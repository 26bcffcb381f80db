import { Kysely, PostgresDialect, SqliteDialect } from 'kysely';
import { kvbMigrations } from './kvb-migrations.js';
import { pendingMigrations } from './migration-runner.js';
import { isPostgresUrl, parseDbTarget } from './open-store.js';

/**
 * The migrations a database still needs (`kvb db migrate --dry-run`), read without changing
 * anything: SQLite is opened read-only, PostgreSQL is only queried. A database a newer kvb has
 * upgraded is refused (DatabaseTooNewError) exactly as `kvb serve` refuses it.
 */
export async function migrationStatus(url: string): Promise<{ backend: 'sqlite' | 'postgres'; pending: string[] }> {
  if (isPostgresUrl(url)) {
    const { default: pg } = await import('pg');
    const { parsePostgresUrl } = await import('./postgres/postgres-url.js');
    const { connectionString, schema } = parsePostgresUrl(url);
    const db = new Kysely({
      dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString, max: 1, connectionTimeoutMillis: 5000 }) }),
    });
    try {
      return { backend: 'postgres', pending: await pendingMigrations(db, kvbMigrations('postgres'), schema) };
    } finally {
      await db.destroy();
    }
  }
  const target = parseDbTarget(url);
  const path = target.kind === 'sqlite' ? target.path : url;
  const { default: BetterSqlite3 } = await import('better-sqlite3');
  const db = new Kysely({ dialect: new SqliteDialect({ database: new BetterSqlite3(path, { readonly: true, fileMustExist: true }) }) });
  try {
    return { backend: 'sqlite', pending: await pendingMigrations(db, kvbMigrations('sqlite')) };
  } finally {
    await db.destroy();
  }
}
