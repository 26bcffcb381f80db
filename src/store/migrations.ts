import { type Kysely, type Migration, type MigrationProvider, Migrator, sql } from 'kysely';

export type Dialect = 'sqlite' | 'postgres';

/**
 * Schema migrations for both dialects. Keys and values are byte strings (BLOB / bytea) so that
 * ordering is plain byte order on both, and any UTF-8 key (NUL included) round-trips.
 */
function migrations(dialect: Dialect): Record<string, Migration> {
  const bytes = dialect === 'sqlite' ? 'blob' : 'bytea';
  const bigint = dialect === 'sqlite' ? 'integer' : 'bigint';
  return {
    '0001_initial': {
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('buckets')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('email', 'text', (c) => c.notNull())
          .addColumn('secret_key_hash', 'text')
          .addColumn('read_key_hash', 'text')
          .addColumn('write_key_hash', 'text')
          // bytea on PostgreSQL: its text type cannot hold NUL, and a signing key is any string.
          .addColumn('signing_key', sql.raw(dialect === 'sqlite' ? 'text' : 'bytea'))
          .addColumn('signing_key_generation', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('default_ttl', 'integer', (c) => c.notNull())
          .addColumn('created_at', sql.raw(bigint), (c) => c.notNull())
          .execute();
        await db.schema
          .createTable('entries')
          .addColumn('bucket_id', 'text', (c) => c.notNull())
          .addColumn('key', sql.raw(bytes), (c) => c.notNull())
          .addColumn('type', 'text', (c) => c.notNull())
          .addColumn('value', sql.raw(bytes), (c) => c.notNull())
          .addColumn('expires_at', sql.raw(bigint))
          .addPrimaryKeyConstraint('entries_pkey', ['bucket_id', 'key'])
          .execute();
        // The TTL sweep finds expired rows through this index instead of scanning the table.
        await db.schema
          .createIndex('entries_expires_at')
          .on('entries')
          .column('expires_at')
          .where(sql.ref('expires_at'), 'is not', null)
          .execute();
      },
    },
  };
}

class StaticProvider implements MigrationProvider {
  constructor(private readonly dialect: Dialect) {}
  async getMigrations() {
    return migrations(this.dialect);
  }
}

/**
 * Runs every pending migration; throws with the failing migration's error. On PostgreSQL, `schema`
 * must name the schema the tables live in: Kysely otherwise finds its bookkeeping tables in any schema.
 */
export async function migrateToLatest(db: Kysely<unknown>, dialect: Dialect, schema?: string): Promise<void> {
  const migrator = new Migrator({ db, provider: new StaticProvider(dialect), ...(schema && { migrationTableSchema: schema }) });
  const { error } = await migrator.migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
}
