// Over 500 lines: the Store interface for PostgreSQL in one class (pool, retries, leases, migrations);
// the write batches live in postgres-batch.ts, imports and snapshots in postgres-portability.ts.
import { randomUUID } from 'node:crypto';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { StoredValue } from '../../values/stored-value.js';
import { type ChangeRow, actorFields, toChange, wholeRevisions } from '../change-row.js';
import { type EntryRow, type MetaRow, isLive, toEntry, toMeta } from '../entry-row.js';
import { compileHistory } from '../history-statements.js';
import { HistoryReader, PRUNE_OVERLAP_MS } from '../history-reader.js';
import { floorWithin } from '../floor-within.js';
import { type Actor, type ActorFilter, type HistoryRecord, type PastRead, SERVER_ACTOR } from '../history-types.js';
import { listBounds } from '../list-bounds.js';
import { MAX_PREFIX_DELETE_KEYS, prefixListLimit, readsOf } from '../core/txn-resolution.js';
import type { CommitOp, CounterOp, CounterUpdate, DeleteOp, OpOutcome, ResultOf, SetOp, WriteOp } from '../core/write-ops.js';
import { appliedMigrations, kvbMigrations, refuseNewerDatabase, runMigrations } from '../migrations.js';
import { type QueuedWrite, NO_BUCKET, runBatch } from './postgres-batch.js';
import { beginPostgresImport, openPostgresSnapshot } from './postgres-portability.js';
import { type Quota, type Usage, NO_QUOTA } from '../quota.js';
import { type Database, bucketFromRow, bucketUpdate } from '../schema.js';
import {
  type CompiledStatement,
  LIST_SHAPES,
  bind,
  compileAll,
  compileStatement,
  listShapeName,
  listStatement,
  portabilityStatements,
  postgresBatchStatements,
  postgresStatements,
  queryBuilder,
  sharedStatements,
} from '../statements.js';
import { hostSelection } from './postgres-host-client.js';
import { ConnectionEpochs, checkingPrimary, isPlainRead, isStandbyRead, primaryResult } from './postgres-primary-reads.js';
import { type HostSelector, type PostgresHosts, describeHosts, needsSelection, parsePostgresHosts } from './postgres-hosts.js';
import { StorageUnavailableError, isPostgresConnectionError, mayHaveReachedServer } from '../storage-errors.js';
import {
  type BucketChanges,
  type Change,
  type ChangeLogBounds,
  type BucketRecord,
  type CommitOptions,
  type CommitOutcome,
  type Condition,
  type Deleted,
  type Entry,
  type EntrySnapshot,
  type ImportStaging,
  type ListQuery,
  type ListedEntry,
  type Refusal,
  type Store,
  type TxnRequestOp,
  type Written,
  type PoolStats,
  type StoreStats,
} from '../store.js';

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

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;
const INT8_OID = 20;
/** Serialization failures and deadlock victims: PostgreSQL rolled the whole statement or transaction back. */
const RETRYABLE = new Set(['40001', '40P01']);
/**
 * read_only_sql_transaction: the connection reached a server that no longer takes writes (a
 * primary demoted by a failover). Nothing was written; the connection is dropped and the work
 * re-run once on a fresh one, which finds the new primary (see postgres-hosts.ts).
 */
const READ_ONLY = '25006';
const READ_ONLY_ATTEMPTS = 2;
const MAX_ATTEMPTS = 8;
/**
 * Most writes in one batch: they are written by one statement of arrays, so this bounds its size
 * (about 13 MiB at the 200 KiB value limit) rather than any PostgreSQL limit.
 */
const MAX_BATCH = 64;
/** Per host of a multi-host URL without connect_timeout: how long one connection attempt may take. */
const HOST_CONNECT_TIMEOUT_MS = 2_000;
/** How long a sweep or migration lease lasts unless renewed (an instance that dies frees it after this). */
const LEASE_MS = 30_000;

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

export interface ParsedPostgresUrl {
  /** What node-postgres is given: the URL (first host only) without kvb's `schema`, with `application_name` set. */
  connectionString: string;
  schema: string;
  /** Every host of a libpq multi-host URL, and target_session_attrs (see postgres-hosts.ts). */
  hosts: PostgresHosts;
}

/**
 * Reads kvb's own URL parameter (`schema`) and libpq's host list. No `options` startup parameter
 * is sent (PgBouncer refuses it) and no search_path is relied on: every statement names its schema.
 */
export function parsePostgresUrl(url: string): ParsedPostgresUrl {
  const kvbParams = (text: string) => {
    const parsed = new URL(text);
    parsed.searchParams.delete('schema');
    if (!parsed.searchParams.has('application_name')) parsed.searchParams.set('application_name', 'kvb');
    return parsed.toString();
  };
  const raw = parsePostgresHosts(url);
  const hosts: PostgresHosts = { ...raw, urlFor: (host) => kvbParams(raw.urlFor(host)) };
  const first = new URL(raw.urlFor(raw.hosts[0]!));
  const schema = first.searchParams.get('schema') ?? 'public';
  if (!SCHEMA_NAME.test(schema)) {
    throw new Error(`invalid schema name ${JSON.stringify(schema)} (lower-case letters, digits and _, not starting with a digit)`);
  }
  return { connectionString: hosts.urlFor(raw.hosts[0]!), schema, hosts };
}

/** The signing key column is bytea (see migrations.ts). */
const signingKeyBytes = (key: string | null) => (key === null ? null : Buffer.from(key, 'utf8'));

/** Turns a lost connection, refused connection or pool timeout into the one error the server answers with 503. */
function storageError(err: unknown): unknown {
  if (err instanceof StorageUnavailableError) return err;
  return isPostgresConnectionError(err) ? new StorageUnavailableError(err) : err;
}

const errorCode = (err: unknown) => (err as { code?: unknown } | null)?.code;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The one place that re-runs work PostgreSQL rolled back as a serialization failure (40001) or
 * deadlock victim (40P01), with jittered exponential backoff. Safe because such an error means
 * the whole statement or transaction had no effect: each operation still applies exactly once.
 * A lost connection is not retried (whether the commit happened is unknown).
 */
export async function withRetries<T>(run: () => Promise<T>, maxAttempts = MAX_ATTEMPTS): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (err) {
      const code = errorCode(err);
      const readOnly = code === READ_ONLY || (err instanceof StorageUnavailableError && errorCode(err.cause) === READ_ONLY);
      if (readOnly && attempt < READ_ONLY_ATTEMPTS) continue;
      if (typeof code !== 'string' || !RETRYABLE.has(code) || attempt >= maxAttempts) throw err;
      await sleep(Math.random() * Math.min(200, 2 ** attempt * 5));
    }
  }
}

/** Returned by a transaction's work: roll back, and answer `value`. */
class Rollback<T> {
  constructor(readonly value: T) {}
}
const rollback = <T>(value: T) => new Rollback(value);

type Client = pg.Pool | pg.PoolClient;

/** One key's change-log row, before it is written (a sweep's: one revision, many keys). */
interface LoggedChange {
  key: Buffer;
  kind: Change['kind'];
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
 * PostgreSQL through node-postgres, for several `kvb serve` instances sharing one database,
 * directly or through a transaction pooler. Every statement comes from statements.ts, compiled
 * once, schema-qualified, and run as a named prepared statement when the connection keeps them
 * (unnamed but still parameterised otherwise). No session state, no advisory locks, no ctid, no
 * SKIP LOCKED: each write first bumps its bucket row's revision, a row lock that orders the
 * bucket's writers across instances; sweeps and migrations run under a lease row. No entry
 * cache: other instances write too, so every read goes to the database.
 */
/** A prefix delete whose listing is out of date by the time its batch reads the bucket. */
const STALE_LISTING = Symbol('stale listing');
/** How often a prefix delete lists again before it gives up (503) on a bucket that never stops changing. */
const MAX_LISTING_ATTEMPTS = 20;

export class PostgresStore implements Store {
  readonly backend = 'postgres';
  readonly shared = true;
  readonly stats: StoreStats = { sweptKeys: 0, cacheHits: 0, cacheMisses: 0 };
  readonly cachesEntries = false;
  private readonly sql: Record<string, CompiledStatement>;
  /** The plain reads, each also asking whether a primary answers (see postgres-primary-reads.ts). */
  private readonly primaryReads: Record<string, CompiledStatement>;
  quota: Quota = NO_QUOTA;
  /** With a multi-host URL or target_session_attrs: which host kvb connects to (see postgres-hosts.ts). */
  private hostSelector: HostSelector | undefined;
  /** This instance, as a lease holder. */
  private readonly holder = randomUUID();
  /** Per bucket, writes waiting for a batch; the buckets with one running; how many run. */
  private readonly writeQueues = new Map<string, QueuedWrite[]>();
  private readonly writingBuckets = new Set<string>();
  private batchesRunning = 0;
  private readonly batchesInFlight: number;

  private constructor(
    private readonly pool: pg.Pool,
    private readonly epochs: ConnectionEpochs,
    private readonly db: Kysely<Database>,
    private readonly schema: string,
    private readonly named: boolean,
    /** One line for the start-up log: what the database offers and what kvb uses. */
    readonly capabilities: string,
    private readonly batchSize: number,
    poolSize: number,
  ) {
    // One batch per bucket at a time (its writes would only wait on its row); a few buckets'
    // batches at once, leaving part of the pool to reads.
    this.batchesInFlight = Math.max(1, Math.min(8, poolSize - 2));
    const builder = queryBuilder('postgres', schema);
    this.sql = {
      ...compileAll(sharedStatements(builder)),
      ...compileAll(postgresStatements(builder)),
      ...compileAll(postgresBatchStatements(schema)),
      // An import stages in a temporary table of its own transaction (see postgres-portability.ts).
      ...compileAll(portabilityStatements(builder, 'pg_temp.kvb_import')),
      ...compileHistory(builder, 'pg_temp.kvb_import'),
      ...Object.fromEntries(LIST_SHAPES.map((s) => [listShapeName(s), compileStatement(listShapeName(s), listStatement(builder, s))])),
    };
    this.primaryReads = Object.fromEntries(
      Object.entries(this.sql).flatMap(([name, s]) => (isPlainRead(s.sql) ? [[name, checkingPrimary(s)]] : [])),
    );
  }

  static async open(options: PostgresOptions): Promise<PostgresStore> {
    const { connectionString, schema, hosts } = parsePostgresUrl(options.url);
    // Several hosts or target_session_attrs: kvb picks the host (node-postgres takes one).
    const selection = needsSelection(hosts) ? hostSelection(hosts, HOST_CONNECT_TIMEOUT_MS) : undefined;
    const pool = new pg.Pool({
      connectionString,
      ...(selection && { Client: selection.Client }),
      max: options.poolSize,
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
    // Before the first connect: it stamps every connection.
    const epochs = new ConnectionEpochs(pool);
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
      const batching =
        options.batchWrites === false
          ? '; writes one at a time per bucket (--pg-batch-writes off)'
          : '; concurrent writes to a bucket share one statement (--pg-batch-writes on)';
      const store = new PostgresStore(
        pool,
        epochs,
        db,
        schema,
        named,
        capabilities + batching,
        options.batchWrites === false ? 1 : MAX_BATCH,
        options.poolSize,
      );
      store.quota = options.quota ?? NO_QUOTA;
      store.hostSelector = selection?.selector;
      return store;
    } catch (err) {
      await db.destroy().catch(() => {});
      throw err;
    }
  }

  async query<R extends pg.QueryResultRow>(
    name: string,
    args: Record<string, unknown>,
    client: Client = this.pool,
  ): Promise<pg.QueryResult<R>> {
    const statement = this.sql[name];
    if (!statement) throw new Error(`no statement ${name}`);
    const values = bind(statement, args);
    const read = this.primaryReads[name];
    if (read) {
      // A standby's answer is discarded; on the pool the read runs once more, on a connection opened after it.
      if (client === this.pool) return withRetries(() => this.readOnPrimary<R>(read, values));
      let result: pg.QueryResult;
      try {
        result = await this.send(client, read, values);
      } catch (err) {
        throw this.failure(err);
      }
      return this.fromPrimary<R>(result, client as pg.PoolClient);
    }
    try {
      return await this.send<R>(client, statement, values);
    } catch (err) {
      // Outside a transaction a write commits by itself: its answer lost, whether it happened is unknown.
      if (client === this.pool && !/^\s*select\b/i.test(statement.sql) && mayHaveReachedServer(err)) {
        throw new StorageUnavailableError(err, { outcomeUnknown: true });
      }
      throw this.failure(err);
    }
  }

  private send<R extends pg.QueryResultRow>(client: Client, statement: CompiledStatement, values: unknown[]): Promise<pg.QueryResult<R>> {
    return client.query<R>(this.named ? { name: `kvb_${statement.name}`, text: statement.sql, values } : { text: statement.sql, values });
  }

  /** One try of a read on a connection of its own, which is closed if it failed or reached a standby. */
  private async readOnPrimary<R extends pg.QueryResultRow>(read: CompiledStatement, values: unknown[]): Promise<pg.QueryResult<R>> {
    let broken: unknown;
    const onError = (err: unknown) => {
      broken = err;
    };
    const client = await this.checkout(onError);
    try {
      return this.fromPrimary<R>(await this.send(client, read, values), client);
    } catch (err) {
      broken ??= err;
      throw this.failure(err);
    } finally {
      client.off('error', onError);
      client.release(broken === undefined ? undefined : true);
    }
  }

  /**
   * A checked read's own rows. When a standby answered: the connections to its host open now are
   * retired, and the host is forgotten if it was the chosen one (only then: the others may already
   * have moved to the new primary, which a search from the first host could only delay).
   */
  private fromPrimary<R extends pg.QueryResultRow>(result: pg.QueryResult<pg.QueryResultRow>, client: pg.PoolClient): pg.QueryResult<R> {
    try {
      return primaryResult<R>(result);
    } catch (err) {
      if (isStandbyRead(err)) {
        this.epochs.standbySeen(client);
        // A listed host without a port is connected to on the default one.
        const chosen = this.hostSelector?.current;
        if (chosen && chosen.host === client.host && (chosen.port ?? client.port) === client.port) this.hostSelector?.forget(chosen);
      }
      throw err;
    }
  }

  /**
   * A pooled connection opened since the last standby answer (older ones are closed on the way
   * out, see ConnectionEpochs), with `onError` listening: a checked-out client whose connection
   * dies emits 'error' on itself, not on the pool; unhandled, that would end the process. The
   * listener goes on in the connect callback: a promise would leave a gap in which a termination
   * notice arriving in the same network read finds no listener.
   */
  private async checkout(onError: (err: unknown) => void): Promise<pg.PoolClient> {
    for (;;) {
      let client: pg.PoolClient;
      try {
        client = await new Promise<pg.PoolClient>((resolve, reject) =>
          this.pool.connect((err, connected) => {
            if (err || !connected) return reject(err ?? new Error('no client'));
            connected.on('error', onError);
            resolve(connected);
          }),
        );
      } catch (err) {
        throw this.failure(err);
      }
      if (!this.epochs.retired(client)) return client;
      client.off('error', onError);
      client.release(true);
    }
  }

  /**
   * storageError, and: a read-only server reached through a multi-host URL is a failover in
   * progress, so the next connect searches for the primary again and the caller gets 503, not 507.
   */
  private failure(err: unknown): unknown {
    if (errorCode(err) === READ_ONLY && this.hostSelector) {
      this.hostSelector.forget();
      return new StorageUnavailableError(err);
    }
    return storageError(err);
  }

  /** A batch's retries: it carries up to MAX_BATCH writes, each of which alone would have had MAX_ATTEMPTS. */
  retrying<T>(run: () => Promise<T>): Promise<T> {
    return withRetries(run, MAX_ATTEMPTS * 4);
  }

  /** Runs `work` in a transaction on one connection, retried (see `withRetries`) when PostgreSQL rolls it back. */
  async transaction<T, R = never>(work: (client: pg.PoolClient) => Promise<T | Rollback<R>>): Promise<T | R> {
    return withRetries(async () => {
      let broken: unknown;
      const onError = (err: unknown) => {
        broken = err;
      };
      const client = await this.checkout(onError);
      let committing = false;
      try {
        await client.query('begin');
        const result = await work(client);
        if (result instanceof Rollback) {
          await client.query('rollback');
          return result.value;
        }
        committing = true;
        await client.query('commit');
        return result;
      } catch (err) {
        if (isPostgresConnectionError(err) || err instanceof StorageUnavailableError || errorCode(err) === READ_ONLY) broken = err;
        else await client.query('rollback').catch((e: unknown) => (broken = e));
        // The COMMIT was sent and its answer lost: it may or may not have happened. Never "done".
        if (committing && mayHaveReachedServer(err)) throw new StorageUnavailableError(err, { outcomeUnknown: true });
        throw this.failure(err);
      } finally {
        client.off('error', onError);
        // A connection that failed is destroyed rather than returned to the pool.
        client.release(broken instanceof Error ? broken : broken === undefined ? undefined : true);
      }
    });
  }

  /**
   * Queues one key write for its bucket's next batch (postgres-batch.ts). A bucket has one batch
   * running at a time on this instance: the writes that arrive meanwhile (up to MAX_BATCH) form
   * the next, which is read, run in memory and written in one statement, each write with its own
   * revision, so revisions and the change log are exactly those of one transaction per write.
   * Across instances the bucket row's version (and, when it changed, its lock) orders batches.
   */
  private write<O extends WriteOp>(bucket: string, op: O, keys: string[]): Promise<ResultOf<O> | typeof STALE_LISTING> {
    return new Promise<OpOutcome>((resolve, reject) => {
      const write: QueuedWrite = { op, keys, resolve, reject };
      const queue = this.writeQueues.get(bucket);
      if (queue) queue.push(write);
      else this.writeQueues.set(bucket, [write]);
      this.startBatches();
    }).then((outcome) => {
      if (outcome.ok) return outcome.value as ResultOf<O>;
      if ('stale' in outcome) return STALE_LISTING;
      throw outcome.error;
    });
  }

  private startBatches(): void {
    for (const [bucket, queue] of this.writeQueues) {
      if (this.batchesRunning >= this.batchesInFlight) return;
      if (this.writingBuckets.has(bucket)) continue;
      const batch = queue.splice(0, this.batchSize);
      // An emptied queue goes; the bucket's next write queues at the back, behind other buckets.
      if (queue.length === 0) this.writeQueues.delete(bucket);
      this.writingBuckets.add(bucket);
      this.batchesRunning++;
      void runBatch(this, bucket, batch).finally(() => {
        this.writingBuckets.delete(bucket);
        this.batchesRunning--;
        this.startBatches();
      });
    }
  }

  async createBucket(b: BucketRecord): Promise<void> {
    await this.query('createBucket', { ...b, signingKey: signingKeyBytes(b.signingKey), createdAt: Date.now() });
  }

  async getBucket(id: string): Promise<BucketRecord | undefined> {
    // Ids are generated and never contain NUL, which PostgreSQL text cannot even carry.
    if (id.includes('\u0000')) return undefined;
    const { rows } = await this.query<Omit<Database['buckets'], 'signing_key'> & { signing_key: Buffer | null }>('getBucket', { id });
    const row = rows[0];
    return row && bucketFromRow({ ...row, signing_key: row.signing_key && row.signing_key.toString('utf8') });
  }

  async bucketRevision(bucket: string): Promise<number | undefined> {
    if (bucket.includes('\u0000')) return undefined;
    const { rows } = await this.query<{ revision: number }>('bucketRevision', { bucket });
    return rows[0] === undefined ? undefined : Number(rows[0].revision);
  }

  async updateBucket(id: string, changes: BucketChanges): Promise<boolean> {
    if (id.includes('\u0000')) return false;
    // Rare and shaped by the request, so compiled per call and not prepared.
    const query = queryBuilder('postgres', this.schema)
      .updateTable('buckets')
      .set(bucketUpdate(changes, signingKeyBytes))
      .where('id', '=', id)
      .compile();
    try {
      const result = await withRetries(() => this.pool.query(query.sql, query.parameters as unknown[]));
      return (result.rowCount ?? 0) > 0;
    } catch (err) {
      throw storageError(err);
    }
  }

  async deleteBucket(id: string): Promise<boolean> {
    if (id.includes('\u0000')) return false;
    // The bucket row first (it waits for the bucket's running writers), then, in a statement with
    // a fresh snapshot, every key: a writer queued behind the row lock finds no bucket and writes nothing.
    return this.transaction(async (client) => {
      const { rowCount } = await this.query('deleteBucket', { bucket: id }, client);
      await this.query('deleteBucketEntries', { bucket: id }, client);
      await this.query('deleteBucketChanges', { bucket: id }, client);
      await this.query('deleteBucketOperations', { bucket: id }, client);
      return (rowCount ?? 0) > 0;
    });
  }

  /** Bumps the bucket's revision inside `client`'s transaction (locking its row); undefined when it is gone. */
  private async bump(client: pg.PoolClient, bucket: string): Promise<number | undefined> {
    const { rows } = await this.query<{ revision: number }>('bumpBucket', { bucket }, client);
    return rows[0] === undefined ? undefined : Number(rows[0].revision);
  }

  private async liveEntry(client: Client, bucket: string, key: Buffer, now: number): Promise<{ row?: EntryRow; live?: Entry }> {
    const { rows } = await this.query<EntryRow>('getEntry', { bucket, key }, client);
    const row = rows[0];
    return { row, live: row && isLive(row, now) ? toEntry(row) : undefined };
  }

  async getEntry(bucket: string, key: string, now: number): Promise<Entry | undefined> {
    if (bucket.includes('\u0000')) return undefined;
    return (await this.liveEntry(this.pool, bucket, Buffer.from(key), now)).live;
  }

  async setEntry(
    bucket: string,
    key: string,
    value: StoredValue,
    expiresAt: number | null,
    now: number,
    condition?: Condition,
    actor?: Actor,
  ): Promise<Written | Refusal> {
    if (bucket.includes('\u0000')) return NO_BUCKET;
    return this.keyWrite(bucket, { op: 'set', key, value, expiresAt, now, condition, actor });
  }

  async deleteEntry(bucket: string, key: string, now: number, condition?: Condition, actor?: Actor): Promise<Deleted | Refusal> {
    if (bucket.includes('\u0000')) return NO_BUCKET;
    return this.keyWrite(bucket, { op: 'delete', key, now, condition, actor });
  }

  async updateEntry(
    bucket: string,
    key: string,
    now: number,
    update: CounterUpdate,
    condition?: Condition,
    actor?: Actor,
  ): Promise<Entry | Refusal> {
    if (bucket.includes('\u0000')) return NO_BUCKET;
    return this.keyWrite(bucket, { ...update, key, now, condition, actor });
  }

  /** A write of one key (never a stale listing: only a transaction's prefix deletes list). */
  private async keyWrite<O extends SetOp | DeleteOp | CounterOp>(bucket: string, op: O): Promise<ResultOf<O>> {
    return (await this.write(bucket, op, [op.key])) as ResultOf<O>;
  }

  async listEntries(bucket: string, q: ListQuery, now: number): Promise<ListedEntry[]> {
    return this.listWith(bucket, q, now);
  }

  private async listWith(bucket: string, q: ListQuery, now: number, client?: pg.PoolClient): Promise<ListedEntry[]> {
    const { lower, lowerOp, upper } = listBounds(q);
    const name = listShapeName({ reverse: q.reverse, columns: q.columns, upper: upper !== undefined, after: lowerOp === '>' });
    const { rows } = await this.query<EntryRow & MetaRow & { key: Buffer }>(
      name,
      { bucket, lower, now, limit: q.limit, offset: q.offset, upper },
      client,
    );
    return rows.map((row) => ({
      key: row.key.toString('utf8'),
      ...(q.columns === 'values' && { entry: toEntry(row) }),
      ...(q.columns === 'meta' && { meta: toMeta(row) }),
    }));
  }

  async commit(bucket: string, ops: TxnRequestOp[], now: number, options: CommitOptions = {}): Promise<CommitOutcome> {
    if (bucket.includes('\u0000')) return NO_BUCKET;
    const reads = readsOf(ops);
    const opKeys = ops.filter((op) => op.op !== 'delete_prefix').map((op) => op.key);
    for (let attempt = 1; ; attempt++) {
      // A prefix delete lists its keys first, at revision `at`; the batch then goes ahead only if
      // the bucket is still at `at` when it reads (else it lists again): the listing is exact.
      let at: number | undefined;
      const under = new Map<string, string[]>();
      if (reads.prefixes.length > 0) {
        at = await this.bucketRevision(bucket);
        if (at === undefined) return NO_BUCKET;
        let listed = 0;
        for (const prefix of reads.prefixes) {
          if (listed > MAX_PREFIX_DELETE_KEYS) break;
          const query = { prefix, reverse: false, columns: 'keys' as const, offset: 0, limit: prefixListLimit(listed) };
          const keys = (await this.listWith(bucket, query, now)).map((e) => e.key);
          under.set(prefix, keys);
          listed += keys.length;
        }
      }
      const keys = [...new Set([...opKeys, ...[...under.values()].flat()])];
      const listed = at === undefined ? undefined : { at, under };
      const op: CommitOp = {
        op: 'commit',
        ops,
        now,
        expectRevision: options.expectRevision,
        operation: options.operation,
        actor: options.actor,
        listed,
      };
      const outcome = await this.write(bucket, op, keys);
      if (outcome !== STALE_LISTING) return outcome;
      // Writers kept changing the bucket between the listing and the batch: say so rather than spin.
      if (attempt >= MAX_LISTING_ATTEMPTS)
        throw new StorageUnavailableError(new Error(`the bucket changed under a prefix delete ${MAX_LISTING_ATTEMPTS} times in a row`));
    }
  }

  /** Writes one revision's change-log rows (distinct keys) in the caller's transaction: one round trip. */
  private async logChanges(client: pg.PoolClient, bucket: string, revision: number, changes: LoggedChange[], now: number): Promise<void> {
    if (changes.length === 0) return;
    await this.query(
      'logChanges',
      {
        bucket,
        revision,
        keys: changes.map((c) => c.key),
        kinds: changes.map((c) => c.kind),
        types: changes.map(() => null),
        values: changes.map(() => null),
        expiresAts: changes.map(() => null),
        // Only the sweeper logs rows this way: its expiries are the server's own.
        ...actorFields(SERVER_ACTOR),
        now,
      },
      client,
    );
  }

  async readChanges(bucket: string, after: number, upTo: number, limit: number): Promise<Change[]> {
    if (bucket.includes('\u0000')) return [];
    const { rows } = await this.query<ChangeRow>('changesAfter', { bucket, after, upTo, limit });
    return wholeRevisions(rows.map(toChange), limit, async (revision) =>
      (await this.query<ChangeRow>('changesAt', { bucket, revision })).rows.map(toChange),
    );
  }

  async changeLogBounds(bucket: string): Promise<ChangeLogBounds | undefined> {
    if (bucket.includes('\u0000')) return undefined;
    const { rows } = await this.query<{ changes_floor: number; watch_floor: number; revision: number }>('changesFloor', { bucket });
    const row = rows[0];
    return (
      row && {
        floor: Number(row.changes_floor),
        watchFloor: Math.max(Number(row.changes_floor), Number(row.watch_floor)),
        revision: Number(row.revision),
      }
    );
  }

  /** Changes committed before this were all looked at by an earlier prune of this instance (see `prunable`). */
  private prunedBefore = 0;

  async pruneChanges(before: number, batch: number): Promise<number> {
    // Under the sweep lease, like the sweep: one instance prunes at a time.
    if (!(await this.takeLease('sweep'))) return 0;
    const { rows } = await this.query<{ bucket_id: string; revision: number }>('prunable', {
      before,
      since: Math.max(0, this.prunedBefore - PRUNE_OVERLAP_MS),
      batch,
    });
    for (const { bucket_id: bucket, revision } of rows) await this.compactTo(bucket, revision);
    if (rows.length < batch) this.prunedBefore = Math.max(this.prunedBefore, before);
    return rows.length;
  }

  /** Raises the bucket's floor to `revision` and compacts its log up to it, in one transaction. */
  private async compactTo(bucket: string, revision: number): Promise<void> {
    // The floor is raised first, in the same transaction: a reader never finds a hole without a floor above it.
    await this.transaction(async (client) => {
      const floor = await this.query<{ changes_floor: number }>('changesFloor', { bucket }, client);
      await this.query('raiseFloor', { bucket, revision }, client);
      await this.query('compactChanges', { bucket, revision, floor: Number(floor.rows[0]?.changes_floor ?? 0) }, client);
      await this.query('pruneOperations', { bucket, revision }, client);
    });
  }

  /** Changes committed before this were all looked at by an earlier history bound of this instance (see `historyGrew`). */
  private boundedBefore = 0;

  async boundHistory(maxBytes: number, now: number): Promise<number> {
    if (maxBytes <= 0) return 0;
    // Under the sweep lease, like the prune: one instance compacts at a time.
    if (!(await this.takeLease('sweep'))) return 0;
    const since = Math.max(0, this.boundedBefore - PRUNE_OVERLAP_MS);
    const { rows: grown } = await this.query<{ bucket_id: string }>('historyGrew', { since, batch: Number.MAX_SAFE_INTEGER });
    let count = 0;
    for (const { bucket_id: bucket } of grown) {
      const { rows: sizes } = await this.query<{ revision: number; bytes: number }>('historyBytes', { bucket });
      const floor = floorWithin(
        sizes.map((r) => ({ revision: Number(r.revision), bytes: Number(r.bytes) })),
        maxBytes,
      );
      if (floor === undefined) continue;
      await this.compactTo(bucket, floor);
      count++;
    }
    this.boundedBefore = Math.max(this.boundedBefore, now);
    return count;
  }

  private readonly history = new HistoryReader(
    async (name, args) => (await this.query<Record<string, unknown>>(name, args)).rows,
    (bucket) => this.changeLogBounds(bucket),
  );

  readAt(bucket: string, key: string, revision: number): Promise<PastRead<Entry | undefined>> {
    return this.history.readAt(bucket, key, revision);
  }

  listAt(bucket: string, query: ListQuery, revision: number): Promise<PastRead<ListedEntry[]>> {
    return this.history.listAt(bucket, query, revision);
  }

  async keyHistory(bucket: string, key: string, before: number, limit: number, actor?: ActorFilter): Promise<HistoryRecord[]> {
    if (bucket.includes('\u0000')) return [];
    return this.history.keyHistory(bucket, key, before, limit, actor);
  }

  /** Takes or renews a named lease for this instance; false while another live instance holds it. */
  private async takeLease(name: string, now = Date.now()): Promise<boolean> {
    const { rows } = await withRetries(() => this.query('takeLease', { name, holder: this.holder, until: now + LEASE_MS, now }));
    return rows.length > 0;
  }

  async listBuckets(after: string | undefined, limit: number): Promise<BucketRecord[]> {
    const { rows } = await this.query<Omit<Database['buckets'], 'signing_key'> & { signing_key: Buffer | null }>('listBuckets', {
      after: after ?? '',
      limit,
    });
    return rows.map((row) => bucketFromRow({ ...row, signing_key: row.signing_key && row.signing_key.toString('utf8') }));
  }

  async checkIntegrity(): Promise<string[]> {
    const { rows } = await this.query<{ n: number }>('orphanEntries', {});
    const n = Number(rows[0]?.n ?? 0);
    return n > 0 ? [`${n} entries belong to no bucket`] : [];
  }

  async openSnapshot(bucket: string, prefix: string, now: number): Promise<EntrySnapshot | undefined> {
    if (bucket.includes('\u0000')) return undefined;
    return openPostgresSnapshot(this.pool, this.sql, bucket, prefix, now);
  }

  async beginImport(bucket: string): Promise<ImportStaging> {
    return beginPostgresImport(this.pool, this.sql, bucket, this.quota);
  }

  async sweepExpired(now: number, batch: number): Promise<number> {
    // One instance sweeps at a time (the others would only wait on the same rows).
    if (!(await this.takeLease('sweep'))) return 0;
    const { rows } = await this.query<{ bucket_id: string; key: Buffer }>('expiredEntries', { now, batch });
    const byBucket = new Map<string, Buffer[]>();
    for (const row of rows) byBucket.set(row.bucket_id, [...(byBucket.get(row.bucket_id) ?? []), row.key]);
    let deleted = 0;
    for (const [bucket, keys] of byBucket) {
      // Like any write: bucket row first, then the keys still expired; one revision per bucket, none if nothing went.
      deleted += await this.transaction<number, number>(async (client) => {
        const revision = await this.bump(client, bucket);
        const { rows: removed } = await this.query<{ key: Buffer; size: number }>('removeExpired', { bucket, keys, now }, client);
        if (revision === undefined) return 0;
        if (removed.length === 0) return rollback(0);
        const bytes = removed.reduce((sum, { size }) => sum + Number(size), 0);
        await this.query('addUsage', { bucket, keys: -removed.length, bytes: -bytes }, client);
        await this.logChanges(
          client,
          bucket,
          revision,
          removed.map(({ key }) => ({ key, kind: 'expire' as const })),
          now,
        );
        return removed.length;
      });
    }
    this.stats.sweptKeys += deleted;
    return deleted;
  }

  poolStats(): PoolStats {
    return { total: this.pool.totalCount, idle: this.pool.idleCount, waiting: this.pool.waitingCount };
  }

  async countEntries(): Promise<number> {
    const { rows } = await this.query<{ n: number }>('countEntries', {});
    return Number(rows[0]?.n ?? 0);
  }

  async countBuckets(): Promise<number> {
    const { rows } = await this.query<{ n: number }>('countBuckets', {});
    return Number(rows[0]?.n ?? 0);
  }

  async bucketUsage(bucket: string): Promise<Usage | undefined> {
    if (bucket.includes('\u0000')) return undefined;
    const { rows } = await this.query<{ usage_keys: number; usage_bytes: number }>('bucketUsage', { bucket });
    const row = rows[0];
    return row && { keys: Number(row.usage_keys), bytes: Number(row.usage_bytes) };
  }

  async ping(): Promise<void> {
    try {
      if (!this.hostSelector || this.hostSelector.attrs === 'any') {
        await this.pool.query('select 1');
        return;
      }
      // Ready means writable: a connection to a server demoted since it was opened does not count.
      const { rows } = await this.pool.query<{ transaction_read_only: string }>('show transaction_read_only');
      if (rows[0]?.transaction_read_only === 'on')
        throw Object.assign(new Error('the server is read-only (a standby?)'), { code: READ_ONLY });
    } catch (err) {
      throw this.failure(err);
    }
  }

  async close(): Promise<void> {
    await this.query('releaseLease', { name: 'sweep', holder: this.holder }).catch(() => {});
    await this.db.destroy();
    // Kysely ends the pool only if it ever used it itself; the hot path queries the pool directly,
    // so without this the idle connections kept a process (kvb db …) alive for idleTimeoutMillis.
    if (!this.pool.ended) await this.pool.end();
  }
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
