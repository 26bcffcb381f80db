import type pg from 'pg';
import type { Kysely } from 'kysely';
import { type ChangeRow, toChange, wholeRevisions } from '../change-row.js';
import { type EntryRow, type MetaRow, isLive, toEntry, toMeta } from '../entry-row.js';
import { HistoryReader } from '../history-reader.js';
import { listBounds } from '../list-bounds.js';
import { checkPrefixDeleteBound, prefixListing, readsOf } from '../core/txn-resolution.js';
import type { CommitOp, ResultOf, WriteOp } from '../core/write-ops.js';
import { NO_BUCKET, runLocked } from './postgres-batch.js';
import { beginPostgresImport, openPostgresSnapshot } from './postgres-portability.js';
import { type Quota, NO_QUOTA } from '../quota.js';
import type { Database } from '../schema.js';
import { listShapeName } from '../statements.js';
import { SqlWebhookStore } from '../webhook-store.js';
import type { WebhookStore } from '../webhook-types.js';
import { PostgresBuckets } from './postgres-buckets.js';
import { PostgresMaintenance } from './postgres-maintenance.js';
import { type OpenedPostgres, type PostgresOptions, openPostgres } from './postgres-open.js';
import { PointReads } from './postgres-point-reads.js';
import { MAX_ATTEMPTS, storageError, withRetries } from './postgres-retries.js';
import { type PostgresStatementName, type PostgresStatements, compilePostgresStatements } from './postgres-statements.js';
import type { Rollback, StatementRunner } from './postgres-statement-runner.js';
import { STALE_LISTING, WriteQueue } from './postgres-write-queue.js';
import type {
  BucketStore,
  ChangeFeed,
  ChangeLogBounds,
  CommitOutcome,
  Entry,
  EntrySnapshot,
  HistoryReads,
  ImportStaging,
  ListQuery,
  ListedEntry,
  Maintenance,
  PoolStats,
  Store,
  StoreFlags,
  StoreStats,
} from '../store.js';

/**
 * Most writes in one batch (over all its buckets): they are written by one statement of arrays,
 * so this bounds its size (about 13 MiB at the 200 KiB value limit) rather than any PostgreSQL limit.
 */
const MAX_BATCH = 64;
/**
 * How often a prefix delete lists its keys without a lock before it runs alone under its bucket
 * row's lock instead (a bucket that never stops changing would otherwise starve it).
 */
const OPTIMISTIC_LISTINGS = 3;
/** Coalesced point-read statements running at once (see postgres-point-reads.ts). */
const POINT_READS_IN_FLIGHT = 2;

/**
 * PostgreSQL through node-postgres, for several `kvb serve` instances sharing one database,
 * directly or through a transaction pooler. Every statement comes from statements.ts and
 * postgres-statements.ts, compiled once, schema-qualified, and run by the statement runner
 * (postgres-statement-runner.ts: named prepared statements when the connection keeps them, each
 * plain read checked to come from a primary). No session state, no advisory locks, no ctid, no
 * SKIP LOCKED: each write first bumps its bucket row's revision, a row lock that orders the
 * bucket's writers across instances; sweeps and migrations run under a lease row. No entry
 * cache: other instances write too, so every read goes to the database; point reads of one turn
 * share one statement (postgres-point-reads.ts).
 */
export class PostgresStore implements Store {
  readonly flags: StoreFlags;
  readonly stats: StoreStats = { sweptKeys: 0, cacheHits: 0, cacheMisses: 0 };
  readonly buckets: BucketStore;
  readonly webhooks: WebhookStore;
  quota: Quota = NO_QUOTA;
  private readonly sql: PostgresStatements;
  private readonly runner: StatementRunner;
  private readonly webhookRunner: StatementRunner;
  private readonly db: Kysely<Database>;
  private readonly schema: string;
  private readonly writes: WriteQueue;
  private readonly background: PostgresMaintenance;
  /** GET's reads, coalesced per turn of the event loop. */
  readonly pointReads: PointReads;

  private constructor(opened: OpenedPostgres, batchWrites: boolean, poolSize: number) {
    ({ runner: this.runner, webhookRunner: this.webhookRunner, db: this.db, schema: this.schema } = opened);
    const capabilities =
      opened.capabilities +
      (batchWrites
        ? '; concurrent writes to a bucket share one statement (--pg-batch-writes on)'
        : '; writes one at a time per bucket (--pg-batch-writes off)') +
      '; point reads of one turn share one statement';
    this.flags = { backend: 'postgres', shared: true, capabilities, cachesEntries: false };
    this.sql = compilePostgresStatements(this.schema);
    // A bucket in one batch at a time (its writes would only wait on its row); a few batches,
    // each over many buckets, at once, leaving part of the pool to reads.
    this.writes = new WriteQueue(this, batchWrites ? MAX_BATCH : 1, Math.max(1, Math.min(8, poolSize - 2)));
    this.buckets = new PostgresBuckets((name, args, client) => this.query(name, args, client), this.runner, this.schema);
    this.webhooks = new SqlWebhookStore('postgres', this.schema, {
      read: async ({ statement, values }) => {
        try {
          return (await withRetries(() => this.webhookRunner.pool.query(statement.sql, values))).rows;
        } catch (err) {
          throw storageError(err);
        }
      },
      write: (statements) =>
        this.webhookRunner.transaction(async (client) => {
          const changed: number[] = [];
          for (const s of statements) changed.push((await client.query(s.statement.sql, s.values)).rowCount ?? 0);
          return changed;
        }),
    });
    this.background = new PostgresMaintenance(this.runner, this.sql, (bucket, op) => this.write(bucket, op));
    // Two statements at once: one gathers reads while the other runs (measured: see docs/performance.md).
    this.pointReads = new PointReads(
      async (buckets, keys) => (await this.query<EntryRow & { i: number }>('readEntries', { buckets, keys })).rows,
      Math.max(1, Math.min(POINT_READS_IN_FLIGHT, poolSize - 1)),
    );
  }

  static async open(options: PostgresOptions): Promise<PostgresStore> {
    const store = new PostgresStore(await openPostgres(options), options.batchWrites !== false, options.poolSize);
    store.quota = options.quota ?? NO_QUOTA;
    return store;
  }

  /** Runs the named statement (see StatementRunner.run). */
  query<R extends pg.QueryResultRow>(
    name: PostgresStatementName,
    args: Record<string, unknown>,
    client?: pg.PoolClient,
  ): Promise<pg.QueryResult<R>> {
    return this.runner.run<R>(this.sql[name], args, client);
  }

  /** A batch's retries: it carries up to MAX_BATCH writes, each of which alone would have had MAX_ATTEMPTS. */
  retrying<T>(run: () => Promise<T>): Promise<T> {
    return withRetries(run, MAX_ATTEMPTS * 4);
  }

  /** Runs `work` in a transaction on one connection (see StatementRunner.transaction). */
  transaction<T, R = never>(work: (client: pg.PoolClient) => Promise<T | Rollback<R>>): Promise<T | R> {
    return this.runner.transaction(work);
  }

  async getEntry(bucket: string, key: string, now: number): Promise<Entry | undefined> {
    if (bucket.includes('\u0000')) return undefined;
    const row = await this.pointReads.read(bucket, Buffer.from(key));
    return row && isLive(row, now) ? toEntry(row) : undefined;
  }

  async write<O extends WriteOp>(bucket: string, op: O): Promise<ResultOf<O>> {
    if (bucket.includes('\u0000')) return NO_BUCKET as ResultOf<O>;
    const w: WriteOp = op;
    if (w.op === 'commit') return (await this.commit(bucket, w)) as ResultOf<O>;
    // Never a stale listing: only a transaction's prefix deletes list.
    return (await this.writes.write(bucket, w, w.op === 'sweep' ? w.keys : [w.key])) as ResultOf<O>;
  }

  listEntries(bucket: string, q: ListQuery, now: number): Promise<ListedEntry[]> {
    return this.listOn(bucket, q, now);
  }

  /** A listing, on `client` when given (inside its transaction). */
  private async listOn(bucket: string, q: ListQuery, now: number, client?: pg.PoolClient): Promise<ListedEntry[]> {
    const { lower, lowerOp, upper } = listBounds(q);
    const name = listShapeName({ reverse: q.reverse, columns: q.columns, upper: upper !== undefined, after: lowerOp === '>' });
    const { rows } = await this.query<EntryRow & MetaRow & { key: Buffer }>(
      name,
      {
        bucket,
        lower,
        now,
        limit: q.limit,
        offset: q.offset,
        upper,
      },
      client,
    );
    return rows.map((row) => ({
      key: row.key.toString('utf8'),
      ...(q.columns === 'values' && { entry: toEntry(row) }),
      ...(q.columns === 'meta' && { meta: toMeta(row) }),
    }));
  }

  private async commit(bucket: string, request: CommitOp): Promise<CommitOutcome> {
    const { ops, now } = request;
    const reads = readsOf(ops);
    const opKeys = ops.filter((op) => op.op !== 'delete_prefix').map((op) => op.key);
    const withListing = (listed: CommitOp['listed']) => {
      // A listing past the bound is refused here, before its keys are read and written: a
      // request that can never succeed is answered 400, not sent to the database to time out.
      if (listed) checkPrefixDeleteBound(ops, listed.under);
      return {
        op: { ...request, listed } satisfies CommitOp,
        keys: [...new Set([...opKeys, ...[...(listed?.under.values() ?? [])].flat()])],
      };
    };
    if (reads.prefixes.length === 0) return this.writes.write(bucket, withListing(undefined).op, opKeys) as Promise<CommitOutcome>;
    // A prefix delete lists its keys first, at revision `at`; the batch then goes ahead only if
    // the bucket is still at `at` when it reads (else it lists again): the listing is exact.
    for (let attempt = 1; attempt <= OPTIMISTIC_LISTINGS; attempt++) {
      const at = await this.buckets.revision(bucket);
      if (at === undefined) return NO_BUCKET;
      const { op, keys } = withListing({ at, under: await this.listPrefixes(bucket, reads.prefixes, now) });
      const outcome = await this.writes.write(bucket, op, keys);
      if (outcome !== STALE_LISTING) return outcome;
    }
    // Writers kept changing the bucket between the listing and the batch: list and write holding its row.
    const outcome = await runLocked(this, bucket, async (client) => {
      const at = (await this.query<{ revision: number }>('bucketRevision', { bucket }, client)).rows[0]?.revision;
      if (at === undefined) return undefined;
      return withListing({ at: Number(at), under: await this.listPrefixes(bucket, reads.prefixes, now, client) });
    });
    if (outcome.ok) return outcome.value as CommitOutcome;
    throw 'stale' in outcome ? new Error('a prefix listing went stale under its bucket row lock') : outcome.error;
  }

  /** The live keys under each prefix a transaction deletes, bounded as every engine bounds them (prefixListing). */
  private async listPrefixes(bucket: string, prefixes: string[], now: number, client?: pg.PoolClient): Promise<Map<string, string[]>> {
    const listing = prefixListing(prefixes);
    for (let step = listing.next(); ; ) {
      if (step.done) return step.value;
      const { prefix, limit } = step.value;
      const keys = await this.listOn(bucket, { prefix, reverse: false, columns: 'keys', offset: 0, limit }, now, client);
      step = listing.next(keys.map((e) => e.key));
    }
  }

  readonly changes: ChangeFeed = {
    read: async (bucket, after, upTo, limit) => {
      if (bucket.includes('\u0000')) return [];
      const { rows } = await this.query<ChangeRow>('changesAfter', { bucket, after, upTo, limit });
      return wholeRevisions(rows.map(toChange), limit, async (revision) =>
        (await this.query<ChangeRow>('changesAt', { bucket, revision })).rows.map(toChange),
      );
    },
    bounds: (bucket) => this.changeLogBounds(bucket),
    prune: (before, batch) => this.background.pruneChanges(before, batch),
    bound: (maxBytes, now) => this.background.boundHistory(maxBytes, now),
  };

  private async changeLogBounds(bucket: string): Promise<ChangeLogBounds | undefined> {
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

  readonly maintenance: Maintenance = {
    sweepExpired: async (now, batch) => {
      const deleted = await this.background.sweepExpired(now, batch);
      this.stats.sweptKeys += deleted;
      return deleted;
    },
    checkIntegrity: async () => {
      const { rows } = await this.query<{ n: number }>('orphanEntries', {});
      const n = Number(rows[0]?.n ?? 0);
      return n > 0 ? [`${n} entries belong to no bucket`] : [];
    },
    countEntries: async () => {
      const { rows } = await this.query<{ n: number }>('countEntries', {});
      return Number(rows[0]?.n ?? 0);
    },
  };

  readonly history: HistoryReads = new HistoryReader(
    async (name, args) => (await this.query<Record<string, unknown>>(name, args)).rows,
    (bucket) => this.changeLogBounds(bucket),
  );

  async openSnapshot(bucket: string, prefix: string, now: number): Promise<EntrySnapshot | undefined> {
    if (bucket.includes('\u0000')) return undefined;
    return openPostgresSnapshot(this.runner, this.sql, bucket, prefix, now);
  }

  async beginImport(bucket: string): Promise<ImportStaging> {
    return beginPostgresImport(this.runner, this.sql, bucket, this.quota);
  }

  poolStats(): PoolStats {
    return { total: this.runner.pool.totalCount, idle: this.runner.pool.idleCount, waiting: this.runner.pool.waitingCount };
  }

  ping(): Promise<void> {
    return this.runner.ping();
  }

  async close(): Promise<void> {
    await this.background.releaseLeases();
    await this.db.destroy();
    // Kysely ends the pool only if it ever used it itself; the hot path queries the pool directly,
    // so without this the idle connections kept a process (kvb db …) alive for idleTimeoutMillis.
    for (const { pool } of [this.runner, this.webhookRunner]) if (!pool.ended) await pool.end();
  }
}
