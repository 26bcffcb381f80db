import { randomBytes } from 'node:crypto';
import pg from 'pg';

/**
 * Which storage the black-box suites run against: the `postgres` vitest project sets
 * KVB_TEST_BACKEND=postgres; the `pgbouncer` project sets it to `pgbouncer`, which is PostgreSQL
 * reached through PgBouncer in transaction pooling mode.
 */
const backendEnv = process.env.KVB_TEST_BACKEND;
export const THROUGH_PGBOUNCER = backendEnv === 'pgbouncer';
export const TEST_BACKEND: 'sqlite' | 'postgres' = backendEnv === 'postgres' || THROUGH_PGBOUNCER ? 'postgres' : 'sqlite';

/** PostgreSQL through PgBouncer (transaction pooling) in front of the same database as KVB_TEST_POSTGRES_URL, or undefined. */
export const PGBOUNCER_URL = process.env.KVB_TEST_PGBOUNCER_URL || undefined;

/** The PostgreSQL the tests may use (a database they can create schemas in), or undefined. */
export const POSTGRES_URL = process.env.KVB_TEST_POSTGRES_URL || undefined;

/** The URL kvb servers of this test project connect with (through PgBouncer in the `pgbouncer` project). */
export const SERVER_POSTGRES_URL = THROUGH_PGBOUNCER ? PGBOUNCER_URL : POSTGRES_URL;

if (TEST_BACKEND === 'postgres' && !POSTGRES_URL) {
  throw new Error('KVB_TEST_BACKEND=postgres needs KVB_TEST_POSTGRES_URL');
}
if (THROUGH_PGBOUNCER && !PGBOUNCER_URL) {
  throw new Error('KVB_TEST_BACKEND=pgbouncer needs KVB_TEST_PGBOUNCER_URL');
}

let sequence = 0;

/** A name no other test run (of any agent or CI job sharing the database) will pick. */
export function uniqueName(prefix: string): string {
  return `${prefix}_${process.pid}_${++sequence}_${randomBytes(3).toString('hex')}`;
}

/** POSTGRES_URL with these query parameters set (kvb's `schema`, PostgreSQL's `application_name`, …). */
export function postgresUrl(params: Record<string, string>, base = POSTGRES_URL): string {
  if (!base) throw new Error('KVB_TEST_POSTGRES_URL is not set');
  // Not through URL: a libpq multi-host URL (h1:5432,h2:5433) is no WHATWG URL.
  const at = base.indexOf('?');
  const search = new URLSearchParams(at < 0 ? '' : base.slice(at + 1));
  for (const [name, value] of Object.entries(params)) search.set(name, value);
  return `${at < 0 ? base : base.slice(0, at)}?${search.toString()}`;
}

/** Runs `work` with a plain connection to the test database (outside any kvb schema). */
export async function withAdminClient<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  return withClient({ connectionString: POSTGRES_URL, application_name: 'kvb_test_admin' }, work);
}

/** Runs `work` with a plain connection made from `config`, ended afterwards. */
export async function withClient<T>(config: pg.ClientConfig, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client(config);
  client.on('error', () => {});
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

export async function dropSchema(schema: string): Promise<void> {
  await withAdminClient((client) => client.query(`drop schema if exists "${schema}" cascade`));
}

/** Ends every connection of one kvb server (identified by its application_name); returns how many. */
export async function terminateBackends(applicationName: string): Promise<number> {
  return withAdminClient(async (client) => {
    const { rows } = await client.query<{ ok: boolean }>(
      'select pg_terminate_backend(pid) as ok from pg_stat_activity where application_name = $1 and pid <> pg_backend_pid()',
      [applicationName],
    );
    return rows.filter((r) => r.ok).length;
  });
}
