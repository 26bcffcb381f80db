import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SERVER_POSTGRES_URL, TEST_BACKEND, dropSchema, postgresUrl, uniqueName } from './backend.js';

/**
 * Where a test's server keeps its data, spawned (server.ts) or in-process (app-server.ts): a data
 * dir, and a SQLite file in it or, in the PostgreSQL projects, a fresh schema of the project's
 * database (through PgBouncer in that project). A database handed in (another server's `db`) is
 * shared and left in place.
 */
export interface TestDatabase {
  dataDir: string;
  /** The `--db` value: a SQLite file, or a PostgreSQL URL (with `?schema=`). Give it to another server to share the store. */
  db: string;
  backend: 'sqlite' | 'postgres';
  /** PostgreSQL: the server's application_name, so a test can find (and kill) only its connections. */
  applicationName?: string;
  /** What the server connects with: `db`, with the application_name on PostgreSQL. */
  connectWith: string;
  /** Removes what this made: the data dir (unless handed in) and the schema, unless keepData. */
  remove(options?: { keepData?: boolean }): Promise<void>;
}

export const isPostgres = (db: string) => /^postgres(ql)?:\/\//.test(db);

export function testDatabase(options: { db?: string; dataDir?: string; prefix?: string } = {}): TestDatabase {
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), options.prefix ?? 'kvb-test-'));
  let ownSchema: string | undefined;
  let db = options.db;
  if (db === undefined && TEST_BACKEND === 'postgres') {
    ownSchema = uniqueName('kvb_test');
    db = postgresUrl({ schema: ownSchema }, SERVER_POSTGRES_URL);
  }
  db ??= join(dataDir, 'kvb.db');
  const applicationName = isPostgres(db) ? uniqueName('kvb_server') : undefined;
  return {
    dataDir,
    db,
    backend: isPostgres(db) ? 'postgres' : 'sqlite',
    ...(applicationName && { applicationName }),
    connectWith: applicationName ? postgresUrl({ application_name: applicationName }, db) : db,
    async remove({ keepData = false } = {}) {
      if (keepData) return;
      if (!options.dataDir) rmSync(dataDir, { recursive: true, force: true });
      if (ownSchema) await dropSchema(ownSchema);
    },
  };
}
