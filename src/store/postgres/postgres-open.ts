import { randomUUID } from 'node:crypto';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { kvbMigrations } from '../kvb-migrations.js';
import { appliedMigrations, refuseNewerDatabase, runMigrations } from '../migration-runner.js';
import type { Quota } from '../quota.js';
import type { Database } from '../schema.js';
import { bind, compileStatement, queryBuilder } from '../statements.js';
import { isPostgresConnectionError } from '../storage-errors.js';
import { hostSelection } from './postgres-host-client.js';
import { describeHosts, needsSelection } from './postgres-hosts.js';
import { ConnectionEpochs } from './postgres-primary-reads.js';
import { errorCode, sleep, withRetries } from './postgres-retries.js';
import { postgresStatements } from './postgres-statements.js';
import { StatementRunner } from './postgres-statement-runner.js';
import { parsePostgresUrl } from './postgres-url.js';

/** Whether to use named (server-side, per-connection) prepared statements. */
export type PgPrepare = 'on' | 'off' | 'auto';

export interface PostgresOptions {
  /** `postgres://` or `postgresql://`; `?schema=NAME` picks (and creates) the schema. */
  url: string;
  poolSize: number;
  /** Default 'auto': on, unless a pooler seems to sit between kvb and PostgreSQL (see `detectPooler`). */
  prepare?: PgPrepare;
  /** Told about errors no request is waiting for (an idle connection dying). */
  onBackgroundError?: (err: unknown) => void;
  /** Run concurrent writes to one bucket as one batch (see postgres-batch.ts); default on. Off: batches of one. */
  batchWrites?: boolean;
  /** Per-bucket quotas (kvb serve); none when absent. */
  quota?: Quota;
}

/** An open, migrated database: what the store runs on. */
export interface OpenedPostgres {
  runner: StatementRunner;
  /**
   * The webhook subscriptions' statements, on a pool of their own (WEBHOOK_POOL_SIZE): a
   * delivery's lease is renewed and its outcome stored without waiting behind the requests.
   */
  webhookRunner: StatementRunner;
  db: Kysely<Database>;
  schema: string;
  /** One line for the start-up log: what the database offers and what kvb uses. */
  capabilities: string;
}

const INT8_OID = 20;
/** Per host of a multi-host URL without connect_timeout: how long one connection attempt may take. */
const HOST_CONNECT_TIMEOUT_MS = 2_000;
/**
 * Connections for the webhook subscriptions' statements (leases, positions, the delivery log).
 * On the request pool, under a load that kept every connection busy for seconds, a lease holder
 * could not renew its lease or store an acknowledged position before the lease ran out: another
 * instance took the webhook over and sent the acknowledged changes again (the robustness suite's
 * pg2-webhook-kill). Opened only when used, and closed when idle.
 */
const WEBHOOK_POOL_SIZE = 2;
/** How long a sweep or migration lease lasts unless renewed (an instance that dies frees it after this). */
export const LEASE_MS = 30_000;

/**
 * int8 arrives as text; it becomes a number only when that is exact, a bigint otherwise.
 * Installed on this pool only, so nothing else in the process changes behaviour.
 */
function parseInt8(text: string): number | bigint {
  const n = Number(text);
  return Number.isSafeInteger(n) ? n : BigInt(text);
}

const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID && format !== 'binary' ? parseInt8 : pg.types.getTypeParser(oid, format ?? 'text')) as typeof pg.types.getTypeParser,
};

/**
 * Opens the pool (kvb picks the host itself when the URL lists several or sets
 * target_session_attrs), decides on named prepared statements and migrates the schema.
 */
export async function openPostgres(options: PostgresOptions): Promise<OpenedPostgres> {
  const { connectionString, schema, hosts } = parsePostgresUrl(options.url);
  // Several hosts or target_session_attrs: kvb picks the host (node-postgres takes one).
  const selection = needsSelection(hosts) ? hostSelection(hosts, HOST_CONNECT_TIMEOUT_MS) : undefined;
  const poolOf = (max: number) => {
    const pool = new pg.Pool({
      connectionString,
      ...(selection && { Client: selection.Client }),
      max,
      // A request waits at most this long for a connection before it is answered 503 (with
      // several hosts, long enough to try each of them once).
      connectionTimeoutMillis: selection
        ? Math.max(3_000, hosts.hosts.length * (hosts.connectTimeoutMs ?? HOST_CONNECT_TIMEOUT_MS))
        : 3_000,
      idleTimeoutMillis: 30_000,
      // Client-side bound on any one query, so a vanished server cannot hold a request forever.
      query_timeout: 20_000,
      keepAlive: true,
      types,
    });
    // An idle client whose connection dies emits 'error' on the pool; unhandled, that would end the process.
    pool.on('error', (err) => options.onBackgroundError?.(err));
    return pool;
  };
  const pool = poolOf(options.poolSize);
  const webhookPool = poolOf(WEBHOOK_POOL_SIZE);
  // Before the first connect: it stamps every connection.
  const epochs = new ConnectionEpochs(pool, webhookPool);
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  try {
    const { rows } = await pool.query<{ version: string }>("select current_setting('server_version') as version");
    const mode = options.prepare ?? 'auto';
    // An engine without inet_server_port() (CockroachDB) gets the choice that always works.
    const pooler =
      mode === 'auto'
        ? await detectPooler(
            pool,
            connectionString,
            hosts.hosts.map((h) => h.port ?? 5432),
          ).catch((err: unknown) => {
            if (isPostgresConnectionError(err)) throw err;
            return 'cannot ask the server its port';
          })
        : undefined;
    const named = mode === 'on' || (mode === 'auto' && pooler === undefined);
    const why =
      mode === 'auto'
        ? pooler
          ? ` (auto: ${pooler}, so assuming a transaction pooler)`
          : ' (auto: no pooler seen)'
        : ` (--pg-prepare ${mode})`;
    await migrate(pool, db, schema);
    const capabilities =
      `PostgreSQL ${rows[0]?.version ?? '?'}; ${selection ? `hosts ${describeHosts(hosts.hosts)} (target_session_attrs=${hosts.targetSessionAttrs}); ` : ''}named prepared statements ${named ? 'used' : 'not used'}${why}; ` +
      'kvb uses row locks on bucket rows, transactional DDL and lease rows; it does not use advisory locks, ctid, SKIP LOCKED or session settings';
    const runner = new StatementRunner(pool, epochs, named);
    const webhookRunner = new StatementRunner(webhookPool, epochs, named);
    runner.hostSelector = webhookRunner.hostSelector = selection?.selector;
    return { runner, webhookRunner, db, schema, capabilities };
  } catch (err) {
    await db.destroy().catch(() => {});
    await webhookPool.end().catch(() => {});
    throw err;
  }
}

/**
 * Whether something other than PostgreSQL answers on the URL's host and port: the server reports
 * the port it listens on, which differs from ours behind PgBouncer (6432), Supavisor (6543) or a
 * port-forward. Neon's pooler keeps 5432 but names its host `*-pooler.*`. A pooler on the server's
 * own port, or a Unix socket, goes unseen: set --pg-prepare off there.
 */
async function detectPooler(pool: pg.Pool, connectionString: string, ports: number[]): Promise<string | undefined> {
  const url = new URL(connectionString);
  if (/-pooler\./i.test(url.hostname)) return `host ${url.hostname} names a pooler`;
  const { rows } = await pool.query<{ port: number | null }>('select inet_server_port() as port');
  const serverPort = rows[0]?.port;
  // With several hosts, any of their ports (a failover moves kvb between them).
  if (serverPort !== null && serverPort !== undefined && !ports.includes(serverPort)) {
    return `PostgreSQL listens on port ${serverPort} but kvb connects to ${ports.join(' or ')}`;
  }
  return undefined;
}

/**
 * Ignores the error a concurrent `CREATE … IF NOT EXISTS` can still raise when another instance
 * created it first: a unique violation on the catalog (23505), or, for a table's row type, 42710
 * "type already exists" (seen about once in fifteen races of six creators), besides the schema
 * (42P06) and relation (42P07) duplicates.
 */
async function createConcurrently(run: () => Promise<unknown>): Promise<void> {
  try {
    await run();
  } catch (err) {
    if (!['23505', '42710', '42P06', '42P07'].includes(String(errorCode(err)))) throw err;
  }
}

/**
 * Creates the schema and the lease table, then runs the migrations under the `migrate` lease
 * (a conditional upsert of one row, not an advisory lock): instances starting together migrate
 * one at a time, and the rest wait until nothing is left to do. Each migration commits on its own.
 */
async function migrate(pool: pg.Pool, db: Kysely<Database>, schema: string): Promise<void> {
  // Checked first: CREATE SCHEMA IF NOT EXISTS still needs the CREATE privilege, which a role
  // that only owns its tables in an existing schema may lack.
  const { rowCount } = await pool.query('select 1 from pg_namespace where nspname = $1', [schema]);
  if (rowCount === 0) await createConcurrently(() => pool.query(`create schema if not exists "${schema}"`));
  await createConcurrently(() =>
    pool.query(
      `create table if not exists "${schema}".kvb_leases (name text primary key, holder text not null, expires_at bigint not null)`,
    ),
  );
  const builder = queryBuilder('postgres', schema);
  const take = compileStatement('takeLease', postgresStatements(builder).takeLease);
  const release = compileStatement('releaseLease', postgresStatements(builder).releaseLease);
  const holder = randomUUID();
  const steps = kvbMigrations('postgres');
  const deadline = Date.now() + 2 * LEASE_MS;
  for (;;) {
    const now = Date.now();
    const taken = await withRetries(() => pool.query(take.sql, bind(take, { name: 'migrate', holder, until: now + LEASE_MS, now })));
    if ((taken.rowCount ?? 0) > 0) {
      try {
        await runMigrations(db, steps, schema);
      } finally {
        await pool.query(release.sql, bind(release, { name: 'migrate', holder })).catch(() => {});
      }
      return;
    }
    const applied = await appliedMigrations(db, schema).catch(() => new Set<string>());
    if (steps.every((s) => applied.has(s.name))) return refuseNewerDatabase(db, steps, schema);
    if (now > deadline) throw new Error('another instance has been migrating this schema for over a minute');
    await sleep(100 + Math.random() * 200);
  }
}
