import type BetterSqlite3 from 'better-sqlite3';
import type { Kysely } from 'kysely';
import { type ChangeRow, toChange, wholeRevisions } from '../change-row.js';
import type { ResultOf, WriteOp } from '../core/write-ops.js';
import { EntryCache } from '../entry-cache.js';
import { toEntry } from '../entry-row.js';
import { HistoryReader, PRUNE_OVERLAP_MS } from '../history-reader.js';
import { NO_QUOTA, type Quota } from '../quota.js';
import { bucketFromRow } from '../bucket-columns.js';
import { type Database, bucketUpdate } from '../schema.js';
import type {
  BucketStore,
  ChangeFeed,
  ChangeLogBounds,
  CommittedChanges,
  Entry,
  EntrySnapshot,
  HistoryReads,
  ImportStaging,
  ListQuery,
  ListedEntry,
  Maintenance,
  Store,
  StoreFlags,
  StoreStats,
} from '../store.js';
import { SqlWebhookStore } from '../webhook-store.js';
import type { WebhookStore } from '../webhook-types.js';
import { Checkpointer } from './sqlite-checkpointer.js';
import { SqliteConnection } from './sqlite-connection.js';
import { stageSqliteImport } from './sqlite-import.js';
import type { HeldLock } from './sqlite-lock.js';
import { openSqlite } from './sqlite-open.js';
import type { Durability } from '../../limits.js';
import { openSqliteSnapshot } from './sqlite-snapshot.js';
import type { BatchReply, WriteRequest } from './sqlite-write-protocol.js';
import { WriterThread } from './sqlite-writer-thread.js';
import { SqliteWriter } from './sqlite-writer.js';

export { ForeignDatabaseError } from './sqlite-open.js';

export interface SqliteOptions {
  /** A file path, or ':memory:'. */
  path: string;
  durability: Durability;
  /**
   * 'own' (kvb serve, kvb db restore; the default): take the file's lock (sqlite-lock.ts), refused
   * while another process holds it. 'read' (kvb db dump, check): take it when free, else read
   * beside the process that holds it, which has already migrated the file; such a store only reads.
   */
  access?: 'own' | 'read';
  /** Per-bucket quotas (kvb serve); none when absent. */
  quota?: Quota;
  /** The writer thread failed (a bug, not a storage error): kvb serve stops. Its writes fail either way. */
  onWriterFailure?: (error: Error) => void;
}

/**
 * SQLite through better-sqlite3, on two threads. This one (the request thread) reads on its own
 * connection, keeps the entry cache and the bucket revisions it has learned; every write goes to
 * the writer (sqlite-writer-thread.ts), which owns the write connection and answers each write once
 * its batch has committed. The writer's connection commits in WAL, so a read made after a write's
 * answer sees it on this connection.
 */
export class SqliteStore implements Store {
  /** SQLite: one writer process (it holds the file's sidecar lock), WAL, group commit, an in-memory entry cache. */
  readonly flags: StoreFlags;
  readonly stats: StoreStats = { sweptKeys: 0, cacheHits: 0, cacheMisses: 0 };
  private readonly conn: SqliteConnection;
  /**
   * Reads are served from memory when possible: this process is the file's only writer, and the
   * cache learns every write after it commits. Bounded to 25k entries and 16 MiB of values: a
   * hot set fits, and with 100k entries (about 45 MB of heap) a server holding 1M keys under
   * random reads went past 150 MB RSS for a hit rate of 10% instead of 2.5%.
   */
  private readonly cache = new EntryCache(25_000, 16 * 1024 * 1024, 64_000);
  /** Bucket revisions as the writer last committed them: it is the only writer, and says so in each answer. */
  private readonly knownRevisions = new Map<string, number>();
  private readonly commitListeners: Array<(buckets: string[], committed?: readonly CommittedChanges[]) => void> = [];
  /** Watched buckets (`changes.watch`), each with how many watch it: the writer carries their changes in its answers. */
  private readonly watched = new Map<string, number>();
  /** Undefined for a store that only reads beside a running server. */
  private writer: WriterThread | undefined;
  /** Imports apply one at a time: each attaches its staging database under the one alias. */
  private importApplies: Promise<unknown> = Promise.resolve();
  /** Runs WAL checkpoints off both threads; only on the server's own file. */
  private checkpointer: Checkpointer | undefined;

  private constructor(
    raw: BetterSqlite3.Database,
    private readonly db: Kysely<Database>,
    private readonly path: string,
    /** The sidecar lock this store holds; undefined for a store that reads beside a running server. */
    private readonly lock: HeldLock | undefined,
  ) {
    this.conn = new SqliteConnection(raw);
    const version = (raw.prepare('select sqlite_version() as v').get() as { v: string }).v;
    const capabilities = `SQLite ${version}; kvb uses a sidecar lock file, WAL, transactional DDL, savepoints and RETURNING, and writes on a thread of its own`;
    this.flags = { backend: 'sqlite', shared: false, capabilities, cachesEntries: true };
  }

  static async open(options: SqliteOptions): Promise<SqliteStore> {
    const { raw, db, lock } = await openSqlite(options);
    const store = new SqliteStore(raw, db, options.path, lock);
    const quota = options.quota ?? NO_QUOTA;
    const hooks = {
      applied: (reply: BatchReply) => store.applyCommitted(reply),
      answered: (reply: BatchReply) => store.notifyCommitted(reply),
      crashed: (error: Error) => {
        // Writes it held may have committed unanswered: nothing cached can be trusted over them.
        store.cache.clear();
        options.onWriterFailure?.(error);
      },
    };
    if (options.path === ':memory:') {
      // No file another thread could open: the same writer, called on this thread.
      store.writer = WriterThread.inThread(new SqliteWriter(store.conn, quota), hooks);
    } else if (lock) {
      // Started now for a server (it loads while the app is built); at the first write for a store opened to read.
      const eager = options.access !== 'read';
      store.writer = WriterThread.start({ path: options.path, durability: options.durability, quota }, hooks, eager);
      // The server's own file: checkpoints run beside it (see sqlite-checkpointer.ts).
      store.checkpointer = new Checkpointer(options.path);
    }
    return store;
  }

  /** The statements and the read connection (the query-plan test reads them: what a listing runs). */
  private get sql() {
    return this.conn.sql;
  }

  private get raw() {
    return this.conn.raw;
  }

  private submit<T>(request: WriteRequest): Promise<T> {
    if (!this.writer) return Promise.reject(new Error(`${this.path} is open read-only beside the kvb serve that owns it`));
    return this.writer.submit<T>(request);
  }

  /** A batch committed: before its writes are answered, reads stop seeing what it replaced. */
  private applyCommitted(reply: BatchReply): void {
    // Committed or not, every key the batch wrote is read afresh next time.
    if (reply.clearCache) this.cache.clear();
    else for (const id of reply.touched) this.cache.invalidate(id);
    for (const [bucket, revision] of reply.revisions) {
      if (revision === null) this.knownRevisions.delete(bucket);
      else this.knownRevisions.set(bucket, revision);
    }
    if (!reply.failed) this.checkpointer?.committed();
  }

  /** The watch feed learns of the batch, with its watched buckets' changes, once it is durable and answered: no polling on SQLite. */
  private notifyCommitted(reply: BatchReply): void {
    const changed = reply.revisions.filter(([, revision]) => revision !== null).map(([bucket]) => bucket);
    if (changed.length > 0) for (const listener of this.commitListeners) listener(changed, reply.carried);
  }

  /** The writer learns that a bucket is watched, or no longer, in its next batch (answers before that carry none of its changes). */
  private watch(bucket: string): () => void {
    const count = this.watched.get(bucket) ?? 0;
    this.watched.set(bucket, count + 1);
    // A writer that cannot be told fails every write, and so carries nothing either.
    if (count === 0) this.submit({ kind: 'watch', bucket, watched: true }).catch(() => {});
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const left = this.watched.get(bucket)! - 1;
      if (left > 0) this.watched.set(bucket, left);
      else {
        this.watched.delete(bucket);
        this.submit({ kind: 'watch', bucket, watched: false }).catch(() => {});
      }
    };
  }

  async getEntry(bucket: string, key: string, now: number): Promise<Entry | undefined> {
    return this.getEntryNow(bucket, key, now);
  }

  /** better-sqlite3 reads synchronously: the key route answers without a promise in the way. */
  getEntryNow(bucket: string, key: string, now: number): Entry | undefined {
    const id = EntryCache.id(bucket, key);
    let entry = this.cache.get(id);
    if (entry === undefined) {
      this.stats.cacheMisses++;
      const row = this.conn.readEntry(bucket, Buffer.from(key));
      entry = row ? toEntry(row) : null;
      this.cache.admit(id, entry);
    } else {
      this.stats.cacheHits++;
    }
    return entry && (entry.expiresAt === null || entry.expiresAt > now) ? entry : undefined;
  }

  /** A key write or transaction, run by the writer with the shared rules (core/apply-batch.ts) in its next batch. */
  write<O extends WriteOp>(bucket: string, op: O): Promise<ResultOf<O>> {
    return this.submit({ kind: 'op', bucket, op });
  }

  async listEntries(bucket: string, q: ListQuery, now: number): Promise<ListedEntry[]> {
    return this.conn.list(bucket, q, now);
  }

  readonly buckets: BucketStore = {
    create: async (b) => {
      await this.submit({ kind: 'createBucket', bucket: b, createdAt: Date.now() });
    },
    get: async (id) => {
      const row = this.conn.get<Database['buckets']>('getBucket', { id });
      return row && bucketFromRow(row);
    },
    update: async (id, changes) => {
      // Rare and shaped by the request, so compiled per call rather than cached.
      const query = this.db
        .updateTable('buckets')
        .set(bucketUpdate(changes, (key) => key))
        .where('id', '=', id)
        .compile();
      return this.submit({ kind: 'updateBucket', sql: query.sql, parameters: [...query.parameters] });
    },
    delete: async (id) => this.submit({ kind: 'deleteBucket', bucket: id }),
    list: async (after, limit) => this.conn.all<Database['buckets']>('listBuckets', { after: after ?? '', limit }).map(bucketFromRow),
    count: async () => this.conn.get<{ n: number }>('countBuckets')!.n,
    revision: async (bucket) =>
      this.knownRevisions.get(bucket) ?? this.conn.get<{ revision: number }>('bucketRevision', { bucket })?.revision,
    usage: async (bucket) => {
      const row = this.conn.get<{ usage_keys: number; usage_bytes: number }>('bucketUsage', { bucket });
      return row && { keys: Number(row.usage_keys), bytes: Number(row.usage_bytes) };
    },
  };

  async openSnapshot(bucket: string, prefix: string, now: number): Promise<EntrySnapshot | undefined> {
    const { sql } = this.conn;
    return openSqliteSnapshot(
      this.path === ':memory:' ? { memory: this.conn.raw } : { path: this.path },
      { bucketRevision: sql.bucketRevision, snapshotEntries: sql.snapshotEntries, snapshotEntriesUpper: sql.snapshotEntriesUpper },
      bucket,
      prefix,
      now,
    );
  }

  async beginImport(bucket: string): Promise<ImportStaging> {
    return stageSqliteImport(
      bucket,
      (request) => this.submit(request),
      (run) => {
        const applied = this.importApplies.then(run);
        this.importApplies = applied.catch(() => {});
        return applied;
      },
    );
  }

  readonly maintenance: Maintenance = {
    sweepExpired: async (now, batch) => {
      const deleted = await this.submit<number>({ kind: 'sweep', now, batch });
      this.stats.sweptKeys += deleted;
      return deleted;
    },
    checkIntegrity: async () => {
      const problems = (this.conn.raw.pragma('integrity_check') as Array<{ integrity_check: string }>)
        .map((r) => r.integrity_check)
        .filter((r) => r !== 'ok');
      const n = this.conn.get<{ n: number }>('orphanEntries')?.n ?? 0;
      if (n > 0) problems.push(`${n} entries belong to no bucket`);
      return problems;
    },
    countEntries: async () => this.conn.get<{ n: number }>('countEntries')!.n,
  };

  async ping(): Promise<void> {
    this.conn.raw.prepare('select 1').get();
  }

  /** Changes committed before this were all looked at by an earlier prune (see `prunable`). */
  private prunedBefore = 0;
  /** Changes committed before this were all looked at by an earlier history bound (see `historyGrew`). */
  private boundedBefore = 0;

  readonly changes: ChangeFeed = {
    read: async (bucket, after, upTo, limit) => {
      const rows = this.conn.all<ChangeRow>('changesAfter', { bucket, after, upTo, limit }).map(toChange);
      return wholeRevisions(rows, limit, async (revision) => this.conn.all<ChangeRow>('changesAt', { bucket, revision }).map(toChange));
    },
    bounds: async (bucket) => this.changeLogBounds(bucket),
    prune: async (before, batch) => {
      const since = Math.max(0, this.prunedBefore - PRUNE_OVERLAP_MS);
      const pruned = await this.submit<number>({ kind: 'prune', before, since, batch });
      if (pruned < batch) this.prunedBefore = Math.max(this.prunedBefore, before);
      return pruned;
    },
    bound: async (maxBytes, now) => {
      if (maxBytes <= 0) return 0;
      const since = Math.max(0, this.boundedBefore - PRUNE_OVERLAP_MS);
      const raised = await this.submit<number>({ kind: 'boundHistory', maxBytes, since });
      this.boundedBefore = Math.max(this.boundedBefore, now);
      return raised;
    },
    onCommit: (listener) => {
      this.commitListeners.push(listener);
    },
    watch: (bucket) => this.watch(bucket),
  };

  private async changeLogBounds(bucket: string): Promise<ChangeLogBounds | undefined> {
    const row = this.conn.get<{ changes_floor: number; watch_floor: number; revision: number }>('changesFloor', { bucket });
    if (!row) return undefined;
    return {
      floor: row.changes_floor,
      watchFloor: Math.max(row.changes_floor, row.watch_floor),
      revision: this.knownRevisions.get(bucket) ?? row.revision,
    };
  }

  private readonly webhookReads = new Map<string, BetterSqlite3.Statement>();
  /** Webhook rows: read on this thread's connection, written by the writer like any write. */
  readonly webhooks: WebhookStore = new SqlWebhookStore('sqlite', undefined, {
    read: async <R>({ statement, values }: { statement: { sql: string }; values: unknown[] }) => {
      let prepared = this.webhookReads.get(statement.sql);
      if (!prepared) this.webhookReads.set(statement.sql, (prepared = this.conn.raw.prepare(statement.sql)));
      return prepared.all(...values) as R[];
    },
    write: (statements) =>
      this.submit({ kind: 'statements', statements: statements.map((s) => ({ sql: s.statement.sql, values: s.values })) }),
  });

  readonly history: HistoryReads = new HistoryReader(
    async (name, args) => this.conn.all<Record<string, unknown>>(name, args),
    (bucket) => this.changeLogBounds(bucket),
  );

  async close(): Promise<void> {
    // Every write already made is answered first; then the writer's connection closes.
    await this.writer?.close();
    await this.checkpointer?.close();
    const { raw } = this.conn;
    if (raw.open) {
      try {
        // A store reading beside a running server leaves the checkpoint to it.
        if (this.lock) raw.pragma('wal_checkpoint(TRUNCATE)');
      } catch {
        // A full disk or a read-only file: every commit is already in the WAL, which the next
        // open replays, so a checkpoint that cannot run is no reason for an unclean exit.
      }
      raw.close();
    }
    this.lock?.release();
  }
}
