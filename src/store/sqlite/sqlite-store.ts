// Over 500 lines: one class whose group commit, entry cache, in-memory revisions and batch
// bookkeeping are state that nearly every method reads and changes; splitting it would pass that state around.
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';
import { mkdirSync, rmSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { prefixUpperBound } from '../../values/keys.js';
import type { StoredValue } from '../../values/stored-value.js';
import { EntryCache } from '../entry-cache.js';
import { compileHistory } from '../history-statements.js';
import { HistoryReader, PRUNE_OVERLAP_MS } from '../history-reader.js';
import { floorWithin } from '../floor-within.js';
import { type Actor, type ActorFilter, type HistoryRecord, type PastRead, SERVER_ACTOR } from '../history-types.js';
import { type ChangeRow, actorFields, toChange, wholeRevisions } from '../change-row.js';
import { type EntryRow, toEntry, toMeta } from '../entry-row.js';
import { listBounds } from '../list-bounds.js';
import { applyBatch } from '../core/apply-batch.js';
import type { CounterUpdate, ResultOf, WriteOp } from '../core/write-ops.js';
import type { BatchResult, WriteView } from '../core/write-view.js';
import { MIGRATION_TABLE, appliedMigrations, kvbMigrations, migrateToLatest, refuseNewerDatabase } from '../migrations.js';
import { type Database, bucketFromRow, bucketUpdate } from '../schema.js';
import {
  type CompiledStatement,
  CHANGE_ROW_CHUNKS,
  CHANGE_ROW_FIELDS,
  LIST_SHAPES,
  bind,
  compileAll,
  compileStatement,
  listShapeName,
  listStatement,
  portabilityStatements,
  queryBuilder,
  sharedStatements,
  sqliteStatements,
} from '../statements.js';
import { type Quota, type Usage, NO_QUOTA, checkQuota, quotaSet } from '../quota.js';
import { type HeldLock, DatabaseInUseError, lockFileOf, takeSqliteLock } from './sqlite-lock.js';
import { Checkpointer, SERVER_AUTOCHECKPOINT_PAGES } from './sqlite-checkpointer.js';
import { openSqliteSnapshot, privateTempDir } from './sqlite-snapshot.js';
import type {
  BucketChanges,
  Change,
  ChangeLogBounds,
  BucketRecord,
  CommitOptions,
  CommitOutcome,
  Condition,
  Deleted,
  Entry,
  EntrySnapshot,
  ImportStaging,
  KeyedEntry,
  ListQuery,
  ListedEntry,
  Refusal,
  Store,
  TxnRequestOp,
  Written,
  StoreStats,
} from '../store.js';

export interface SqliteOptions {
  /** A file path, or ':memory:'. */
  path: string;
  /** 'full' fsyncs every commit (power-loss safe); 'normal' is safe against process crashes. */
  durability: 'normal' | 'full';
  /**
   * 'own' (kvb serve, kvb db restore; the default): take the file's lock (sqlite-lock.ts), refused
   * while another process holds it. 'read' (kvb db dump, check): take it when free, else read
   * beside the process that holds it, which has already migrated the file; such a store only reads.
   */
  access?: 'own' | 'read';
  /** Per-bucket quotas (kvb serve); none when absent. */
  quota?: Quota;
}

/** How much of the database file is read through a memory map. */
const MMAP_BYTES = 256 * 1024 * 1024;

/** The name an import's staging database is attached under while it is applied (one at a time). */
const IMPORT_ALIAS = 'kvb_import';

/** A change-log row waiting for its batch's multi-row insert (fields as CHANGE_ROW_FIELDS, less `now`). */
type PendingChange = [
  bucket: string,
  revision: number,
  key: Buffer,
  kind: Change['kind'],
  type: string | null,
  value: Buffer | null,
  expiresAt: number | null,
  actorKind: string | null,
  actorToken: string | null,
  actorAddress: string | null,
];

/** A write waiting for the next group commit. */
interface PendingWrite {
  run: () => unknown;
  resolve: (value: never) => void;
  reject: (error: unknown) => void;
}

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
  MIGRATION_TABLE,
  'kysely_migration_lock',
]);

/** A batch's bookkeeping could not be written: the whole batch fails (its writes' answers depend on it). */
class BookkeepingFailure extends Error {
  constructor(override readonly cause: unknown) {
    super('the batch bookkeeping failed');
  }
}

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

/**
 * SQLite through better-sqlite3. Every statement comes from statements.ts, compiled once and
 * run as a cached prepared statement (Kysely runs only the migrations). better-sqlite3 is
 * synchronous, so every method runs to completion without interleaving: a read, check and
 * write inside one queued write is atomic.
 */
export class SqliteStore implements Store {
  readonly backend = 'sqlite';
  readonly stats: StoreStats = { sweptKeys: 0, cacheHits: 0, cacheMisses: 0 };
  readonly cachesEntries = true;
  readonly shared = false;
  /** SQLite: one writer process (it holds the file's sidecar lock), WAL, group commit, an in-memory entry cache. */
  readonly capabilities: string;
  private readonly prepared = new Map<string, BetterSqlite3.Statement>();
  private readonly sql: Record<string, CompiledStatement>;
  private pendingWrites: PendingWrite[] = [];
  /**
   * Reads are served from memory when possible: this process is the file's only writer, and the
   * cache learns every write after it commits. Bounded to 25k entries and 16 MiB of values: a
   * hot set fits, and with 100k entries (about 45 MB of heap) a server holding 1M keys under
   * random reads went past 150 MB RSS for a hit rate of 10% instead of 2.5%.
   */
  private readonly cache = new EntryCache(25_000, 16 * 1024 * 1024, 64_000);
  /**
   * Cache ids of the keys the running batch writes, forgotten once it has committed (or failed).
   * Invalidating instead of writing the new row through measured 5 µs less per SET: rows cached
   * on write lived long enough to be promoted to V8's old generation, and churned it.
   */
  private touched: string[] = [];
  private clearCacheAfterCommit = false;
  /**
   * Bucket revisions, kept in memory: this process is the file's only writer. A write bumps the
   * revision here; the batch writes each touched bucket's final value once, in its transaction
   * (one UPDATE per bucket per batch instead of one per write). `committed` holds values known to
   * be in the file; `batch` the running batch's (null: the bucket was deleted in it).
   */
  private readonly committedRevisions = new Map<string, number>();
  private batchRevisions = new Map<string, number | null>();
  /** The running write's bumps, undone if it throws: [bucket, value before]. */
  private bumps: Array<[string, number | null | undefined]> = [];
  /**
   * The running batch's bookkeeping, written once per batch (`writeBookkeeping`): each bucket's
   * usage change, and the change-log rows in as few multi-row inserts as CHANGE_ROW_CHUNKS allow.
   * A write that throws takes its own back (`usageUndo`, `changesMark`).
   */
  private batchUsage = new Map<string, Usage>();
  private batchChanges: PendingChange[] = [];
  private usageUndo: Array<[string, number, number]> = [];
  private changesMark = 0;
  /** What made a revision (counter, transaction, rollback), written with the batch's change rows; plain SET/DELETE record none. */
  private batchOperations: Array<{ bucket: string; revision: number; operation: string }> = [];
  private operationsMark = 0;
  /** Imports apply one at a time: each attaches its staging database under IMPORT_ALIAS. */
  private importApplies: Promise<unknown> = Promise.resolve();
  /** The running batch's commit time (ms), the change log's `committed_at`. */
  private batchNow = 0;
  private readonly commitListeners: Array<(buckets: string[]) => void> = [];
  private quota: Quota = NO_QUOTA;

  /** Runs WAL checkpoints off this thread; only on the server's own file. */
  private checkpointer: Checkpointer | undefined;

  private constructor(
    private readonly raw: BetterSqlite3.Database,
    private readonly db: Kysely<Database>,
    private readonly path: string,
    /** The sidecar lock this store holds; undefined for a store that reads beside a running server. */
    private readonly lock: HeldLock | undefined,
  ) {
    this.inTransaction = raw.transaction((run: () => unknown) => run());
    const version = (raw.prepare('select sqlite_version() as v').get() as { v: string }).v;
    this.capabilities = `SQLite ${version}; kvb uses a sidecar lock file, WAL, transactional DDL, savepoints and RETURNING`;
    const builder = queryBuilder('sqlite');
    this.sql = {
      ...compileAll(sharedStatements(builder)),
      ...compileAll(sqliteStatements(builder)),
      ...compileAll(portabilityStatements(builder, `${IMPORT_ALIAS}.staged`)),
      ...compileHistory(builder, `${IMPORT_ALIAS}.staged`),
      ...Object.fromEntries(LIST_SHAPES.map((s) => [listShapeName(s), compileStatement(listShapeName(s), listStatement(builder, s))])),
    };
    // writeBookkeeping binds the change rows positionally, row by row in CHANGE_ROW_FIELDS order.
    for (const n of CHANGE_ROW_CHUNKS) {
      const expected = Array.from({ length: n }, (_, i) => CHANGE_ROW_FIELDS.map((f) => `r${i}_${f}`)).flat();
      if (this.sql[`logChanges${n}`]!.params.join() !== expected.join()) throw new Error(`logChanges${n}: parameters out of order`);
    }
  }

  static async open(options: SqliteOptions): Promise<SqliteStore> {
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
        raw.pragma(`synchronous = ${options.durability === 'full' ? 'FULL' : 'NORMAL'}`);
        await migrateToLatest(db, 'sqlite');
      } else {
        // Reading beside the server that owns the file: it migrated it; a newer kvb's file is left alone.
        await refuseNewerDatabase(db, kvbMigrations('sqlite'));
        const applied = await appliedMigrations(db);
        const missing = kvbMigrations('sqlite').filter((m) => !applied.has(m.name));
        if (missing.length > 0) throw new Error(`the kvb serve that holds ${options.path} has not upgraded it to this kvb's schema`);
      }
      // Reads through a memory map instead of pread into SQLite's 2 MB page cache: at 1M keys that
      // cache missed on most reads, about 10 µs of system time each. Mapped pages are the OS page
      // cache (file-backed, counted in RSS but not in anonymous memory).
      if (!memory) raw.pragma(`mmap_size = ${MMAP_BYTES}`);
      raw.pragma('busy_timeout = 5000');
      const store = new SqliteStore(raw, db, options.path, lock);
      // The server's own file: checkpoints run beside it (see sqlite-checkpointer.ts).
      if (lock && !memory) {
        raw.pragma(`wal_autocheckpoint = ${SERVER_AUTOCHECKPOINT_PAGES}`);
        store.checkpointer = new Checkpointer(options.path);
      }
      store.quota = options.quota ?? NO_QUOTA;
      return store;
    } catch (err) {
      raw?.close();
      if (fresh) for (const suffix of ['', '-wal', '-shm', '-journal']) rmSync(`${options.path}${suffix}`, { force: true });
      lock?.release();
      // Another application's file: leave nothing of kvb's beside it either.
      if ((fresh || err instanceof ForeignDatabaseError) && lock?.created) rmSync(lockFileOf(options.path), { force: true });
      throw err;
    }
  }

  /** Runs a compiled statement by name, with named arguments. */
  private statement(name: string): BetterSqlite3.Statement {
    let statement = this.prepared.get(name);
    if (!statement) {
      const compiled = this.sql[name];
      if (!compiled) throw new Error(`no statement ${name}`);
      statement = this.raw.prepare(compiled.sql);
      this.prepared.set(name, statement);
    }
    return statement;
  }

  private args(name: string, args: Record<string, unknown>): unknown[] {
    return bind(this.sql[name]!, args);
  }

  private run(name: string, args: Record<string, unknown> = {}): BetterSqlite3.RunResult {
    return this.statement(name).run(this.args(name, args));
  }

  private get<T>(name: string, args: Record<string, unknown> = {}): T | undefined {
    return this.statement(name).get(this.args(name, args)) as T | undefined;
  }

  /**
   * Group commit: writes that arrive while the event loop is busy are queued and committed
   * together in one transaction (one WAL append, one fsync in `full` durability) on the next
   * turn of the loop. Each caller is answered only after its batch has committed. A write that
   * throws affects only itself (multi-statement writes run inside their own savepoint, and its
   * revision bumps are undone); each write gets its own bucket revision.
   */
  private write<T>(run: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.pendingWrites.push({ run, resolve: resolve as (value: never) => void, reject });
      if (this.pendingWrites.length === 1) setImmediate(() => this.flushWrites());
    });
  }

  private flushWrites(): void {
    const batch = this.pendingWrites;
    this.pendingWrites = [];
    const outcomes: Array<{ ok: true; value: unknown } | { ok: false; error: unknown }> = [];
    this.batchRevisions = new Map();
    this.batchNow = Date.now();
    try {
      this.atomically(() => {
        for (const { run } of batch) {
          this.bumps = [];
          this.usageUndo = [];
          this.changesMark = this.batchChanges.length;
          this.operationsMark = this.batchOperations.length;
          try {
            // A single-statement write needs no savepoint (it validates before it writes); multi-statement ones take their own (atomically).
            outcomes.push({ ok: true, value: run() });
          } catch (error) {
            if (error instanceof BookkeepingFailure) throw error.cause;
            outcomes.push({ ok: false, error });
            this.undoWrite();
          }
        }
        this.writeBookkeeping();
        for (const [bucket, revision] of this.batchRevisions) {
          if (revision !== null) this.run('setRevision', { bucket, revision });
        }
      });
    } catch (error) {
      for (const { reject } of batch) reject(error);
      return;
    } finally {
      // Committed or not, every key the batch wrote is read afresh next time.
      for (const id of this.touched) this.cache.invalidate(id);
      this.touched = [];
      this.bumps = [];
      this.batchUsage = new Map();
      this.batchChanges = [];
      this.batchOperations = [];
    }
    const changed: string[] = [];
    for (const [bucket, revision] of this.batchRevisions) {
      if (revision === null) this.committedRevisions.delete(bucket);
      else {
        this.committedRevisions.set(bucket, revision);
        changed.push(bucket);
      }
    }
    this.batchRevisions = new Map();
    this.checkpointer?.committed();
    if (this.clearCacheAfterCommit) {
      this.cache.clear();
      this.clearCacheAfterCommit = false;
    }
    batch.forEach(({ resolve, reject }, i) => {
      const outcome = outcomes[i]!;
      if (outcome.ok) resolve(outcome.value as never);
      else reject(outcome.error);
    });
    // The watch feed learns of the batch once it is durable: no polling on SQLite.
    if (changed.length > 0) for (const listener of this.commitListeners) listener(changed);
  }

  /** Takes back a failed write's revision bumps, usage changes and change-log rows. */
  private undoWrite(): void {
    for (const [bucket, before] of this.bumps.reverse()) {
      if (before === undefined) this.batchRevisions.delete(bucket);
      else this.batchRevisions.set(bucket, before);
    }
    for (const [bucket, keys, bytes] of this.usageUndo) {
      const usage = this.batchUsage.get(bucket)!;
      usage.keys -= keys;
      usage.bytes -= bytes;
    }
    this.batchChanges.length = Math.min(this.batchChanges.length, this.changesMark);
    this.batchOperations.length = Math.min(this.batchOperations.length, this.operationsMark);
  }

  /**
   * Writes the batch's bookkeeping so far: one usage update per bucket, the change-log rows in
   * multi-row inserts. At the batch's end, and before a write that recounts or drops a bucket's
   * bookkeeping (an import, a bucket delete), at the top of that write, outside its savepoint.
   */
  private writeBookkeeping(): void {
    try {
      for (const [bucket, { keys, bytes }] of this.batchUsage) if (keys !== 0 || bytes !== 0) this.run('addUsage', { bucket, keys, bytes });
      const rows = this.batchChanges;
      let at = 0;
      for (const n of CHANGE_ROW_CHUNKS) {
        for (; rows.length - at >= n; at += n) {
          const args: unknown[] = [];
          for (let i = at; i < at + n; i++) args.push(...rows[i]!, this.batchNow);
          this.statement(`logChanges${n}`).run(args);
        }
      }
      for (const op of this.batchOperations) this.run('logOperation', { ...op, now: this.batchNow });
    } catch (err) {
      // Earlier writes' bookkeeping: the batch cannot commit without it.
      throw new BookkeepingFailure(err);
    }
    this.batchUsage = new Map();
    this.batchChanges = [];
    this.batchOperations = [];
    this.usageUndo = [];
    this.changesMark = 0;
    this.operationsMark = 0;
  }

  onCommit(listener: (buckets: string[]) => void): void {
    this.commitListeners.push(listener);
  }

  /** Records a change-log row for the batch's insert. */
  private logChange(
    bucket: string,
    revision: number,
    key: Buffer,
    kind: Change['kind'],
    type: string | null,
    value: Buffer | null,
    expiresAt: number | null,
    actor: Actor | undefined,
  ): void {
    const { actorKind, actorToken, actorAddress } = actorFields(actor);
    this.batchChanges.push([bucket, revision, key, kind, type, value, expiresAt, actorKind, actorToken, actorAddress]);
  }

  /** Records what made a revision, for the batch's bookkeeping (`writeBookkeeping`). */
  private logOperation(bucket: string, revision: number, operation: string): void {
    this.batchOperations.push({ bucket, revision, operation });
  }

  async readChanges(bucket: string, after: number, upTo: number, limit: number): Promise<Change[]> {
    const rows = (this.statement('changesAfter').all(this.args('changesAfter', { bucket, after, upTo, limit })) as ChangeRow[]).map(
      toChange,
    );
    return wholeRevisions(rows, limit, async (revision) =>
      (this.statement('changesAt').all(this.args('changesAt', { bucket, revision })) as ChangeRow[]).map(toChange),
    );
  }

  async changeLogBounds(bucket: string): Promise<ChangeLogBounds | undefined> {
    const row = this.get<{ changes_floor: number; watch_floor: number; revision: number }>('changesFloor', { bucket });
    if (!row) return undefined;
    return {
      floor: row.changes_floor,
      watchFloor: Math.max(row.changes_floor, row.watch_floor),
      revision: this.committedRevisions.get(bucket) ?? row.revision,
    };
  }

  /** Changes committed before this were all looked at by an earlier prune (see `prunable`). */
  private prunedBefore = 0;

  async pruneChanges(before: number, batch: number): Promise<number> {
    const since = Math.max(0, this.prunedBefore - PRUNE_OVERLAP_MS);
    const pruned = await this.write(() =>
      this.atomically(() => {
        const rows = this.statement('prunable').all(this.args('prunable', { before, since, batch })) as Array<{
          bucket_id: string;
          revision: number;
        }>;
        for (const { bucket_id: bucket, revision } of rows) this.compactTo(bucket, revision);
        return rows.length;
      }),
    );
    if (pruned < batch) this.prunedBefore = Math.max(this.prunedBefore, before);
    return pruned;
  }

  /** Changes committed before this were all looked at by an earlier history bound (see `historyGrew`). */
  private boundedBefore = 0;

  async boundHistory(maxBytes: number, now: number): Promise<number> {
    if (maxBytes <= 0) return 0;
    const since = Math.max(0, this.boundedBefore - PRUNE_OVERLAP_MS);
    const raised = await this.write(() =>
      this.atomically(() => {
        let count = 0;
        const grown = this.statement('historyGrew').all(this.args('historyGrew', { since, batch: Number.MAX_SAFE_INTEGER })) as Array<{
          bucket_id: string;
        }>;
        for (const { bucket_id: bucket } of grown) {
          const sizes = this.statement('historyBytes').all(this.args('historyBytes', { bucket })) as Array<{
            revision: number;
            bytes: number;
          }>;
          const floor = floorWithin(
            sizes.map((r) => ({ revision: Number(r.revision), bytes: Number(r.bytes) })),
            maxBytes,
          );
          if (floor === undefined) continue;
          this.compactTo(bucket, floor);
          count++;
        }
        return count;
      }),
    );
    this.boundedBefore = Math.max(this.boundedBefore, now);
    return raised;
  }

  /** Raises the bucket's floor to `revision` and compacts its log up to it, in the running write. */
  private compactTo(bucket: string, revision: number, floor?: number): void {
    const previous = floor ?? Number(this.get<{ changes_floor: number }>('changesFloor', { bucket })?.changes_floor ?? 0);
    this.run('raiseFloor', { bucket, revision });
    this.run('compactChanges', { bucket, revision, floor: previous });
    this.run('pruneOperations', { bucket, revision });
  }

  private readonly history = new HistoryReader(
    async (name, args) => this.statement(name).all(this.args(name, args)) as Array<Record<string, unknown>>,
    (bucket) => this.changeLogBounds(bucket),
  );

  readAt(bucket: string, key: string, revision: number): Promise<PastRead<Entry | undefined>> {
    return this.history.readAt(bucket, key, revision);
  }

  listAt(bucket: string, query: ListQuery, revision: number): Promise<PastRead<ListedEntry[]>> {
    return this.history.listAt(bucket, query, revision);
  }

  keyHistory(bucket: string, key: string, before: number, limit: number, actor?: ActorFilter): Promise<HistoryRecord[]> {
    return this.history.keyHistory(bucket, key, before, limit, actor);
  }

  /**
   * One better-sqlite3 transaction function, made once: making one builds four wrappers (about 5%
   * of a SET's server CPU when it was made per write). Inside a transaction it takes a savepoint.
   */
  private readonly inTransaction: (run: () => unknown) => unknown;

  /** Runs several statements as one unit: a transaction, or a savepoint inside the running batch. */
  private atomically<T>(run: () => T): T {
    return this.inTransaction(run) as T;
  }

  async createBucket(b: BucketRecord): Promise<void> {
    await this.write(() => this.run('createBucket', { ...b, createdAt: Date.now() }));
  }

  async getBucket(id: string): Promise<BucketRecord | undefined> {
    const row = this.get<Database['buckets']>('getBucket', { id });
    return row && bucketFromRow(row);
  }

  async bucketRevision(bucket: string): Promise<number | undefined> {
    return this.committedRevisions.get(bucket) ?? this.get<{ revision: number }>('bucketRevision', { bucket })?.revision;
  }

  async updateBucket(id: string, changes: BucketChanges): Promise<boolean> {
    // Rare and shaped by the request, so compiled per call rather than cached.
    const query = this.db
      .updateTable('buckets')
      .set(bucketUpdate(changes, (key) => key))
      .where('id', '=', id)
      .compile();
    return this.write(() => this.raw.prepare(query.sql).run(...(query.parameters as unknown[])).changes > 0);
  }

  async deleteBucket(id: string): Promise<boolean> {
    // The bucket row goes first: a write queued behind this one finds no bucket to bump and writes nothing.
    return this.write(() => {
      // The batch's change rows and usage for this bucket go in first, and out with the bucket.
      this.writeBookkeeping();
      return this.atomically(() => {
        this.clearCacheAfterCommit = true;
        const deleted = this.run('deleteBucket', { bucket: id }).changes > 0;
        this.run('deleteBucketEntries', { bucket: id });
        this.run('deleteBucketChanges', { bucket: id });
        this.run('deleteBucketOperations', { bucket: id });
        this.bumps.push([id, this.batchRevisions.get(id)]);
        this.batchRevisions.set(id, null);
        return deleted;
      });
    });
  }

  /** A bucket's revision as the running batch sees it; undefined when the bucket is gone. */
  private currentRevision(bucket: string): number | undefined {
    const inBatch = this.batchRevisions.get(bucket);
    if (inBatch !== undefined) return inBatch ?? undefined;
    return this.committedRevisions.get(bucket) ?? this.get<{ revision: number }>('bucketRevision', { bucket })?.revision;
  }

  /** The next revision of a bucket, inside the running write; undefined when the bucket is gone. */
  private bump(bucket: string): number | undefined {
    const before = this.batchRevisions.get(bucket);
    const current = this.currentRevision(bucket);
    if (current === undefined) return undefined;
    this.bumps.push([bucket, before]);
    this.batchRevisions.set(bucket, current + 1);
    return current + 1;
  }

  /** The bucket's usage as the running batch sees it (the file's, plus the batch's changes not yet written). */
  private usageOf(bucket: string): Usage | undefined {
    const row = this.get<{ usage_keys: number; usage_bytes: number }>('bucketUsage', { bucket });
    const pending = this.batchUsage.get(bucket);
    return row && { keys: Number(row.usage_keys) + (pending?.keys ?? 0), bytes: Number(row.usage_bytes) + (pending?.bytes ?? 0) };
  }

  /**
   * An import: refused (507, nothing written) when it takes the bucket over its quota. Counted as
   * a whole, usage before and after (the import recounts it), inside a savepoint that a refusal
   * rolls back. Without a quota it only runs the import.
   */
  private withinQuota<T>(bucket: string, run: () => T): T {
    if (!quotaSet(this.quota)) return run();
    return this.atomically(() => {
      const before = this.usageOf(bucket);
      const result = run();
      const after = before && this.usageOf(bucket);
      if (before && after) checkQuota(this.quota, before, { keys: after.keys - before.keys, bytes: after.bytes - before.bytes });
      return result;
    });
  }

  /** Counts a write's change of its bucket's usage, written with the batch (`writeBookkeeping`). */
  private addUsage(bucket: string, keys: number, bytes: number): void {
    if (keys === 0 && bytes === 0) return;
    let usage = this.batchUsage.get(bucket);
    if (!usage) this.batchUsage.set(bucket, (usage = { keys: 0, bytes: 0 }));
    usage.keys += keys;
    usage.bytes += bytes;
    this.usageUndo.push([bucket, keys, bytes]);
  }

  private readEntry(bucket: string, key: Buffer): EntryRow | undefined {
    return this.get<EntryRow>('getEntry', { bucket, key });
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
      const row = this.readEntry(bucket, Buffer.from(key));
      entry = row ? toEntry(row) : null;
      this.cache.admit(id, entry);
    } else {
      this.stats.cacheHits++;
    }
    return entry && (entry.expiresAt === null || entry.expiresAt > now) ? entry : undefined;
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
    return this.keyWrite(bucket, { op: 'set', key, value, expiresAt, now, condition, actor });
  }

  async deleteEntry(bucket: string, key: string, now: number, condition?: Condition, actor?: Actor): Promise<Deleted | Refusal> {
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
    return this.keyWrite(bucket, { ...update, key, now, condition, actor });
  }

  /** Queues a write for the next group commit, where it runs as `applyWrite`. */
  private keyWrite<O extends WriteOp>(bucket: string, op: O): Promise<ResultOf<O>> {
    return this.write(() => this.applyWrite(bucket, op));
  }

  /**
   * One write inside the running batch: the bucket as the batch has left it (the file's rows and
   * usage, the batch's revisions and pending usage) read on demand as a WriteView, the write
   * rules run over it (core/apply-batch.ts), and what they did persisted: its rows now, its
   * revision, usage, change rows and operations as the batch's bookkeeping, taken back if a
   * statement throws. Reads and writes run back to back: nothing can interleave.
   */
  private applyWrite<O extends WriteOp>(bucket: string, op: O): ResultOf<O> {
    const view: WriteView = {
      revision: this.currentRevision(bucket),
      usage: () => this.usageOf(bucket)!,
      row: (key) => this.readEntry(bucket, Buffer.from(key)),
      liveKeys: (prefix, now, limit) =>
        this.listNow(bucket, { prefix, reverse: false, columns: 'keys', offset: 0, limit }, now).map((e) => e.key),
    };
    const result = applyBatch(view, [op], this.quota);
    const outcome = result.outcomes[0]!;
    // Only an engine's own prefix listing goes stale, and this one lists inside the write.
    if (!outcome.ok) throw 'error' in outcome ? outcome.error : new Error('a stale prefix listing');
    if (result.revision !== view.revision) this.persist(bucket, result, op.now);
    return outcome.value as ResultOf<O>;
  }

  /** Writes a batch result's rows (several in a savepoint) and queues its bookkeeping (`writeBookkeeping`). */
  private persist(bucket: string, result: BatchResult, now: number): void {
    const rows = () => {
      for (const change of result.changes) {
        const key = Buffer.from(change.key);
        this.touched.push(EntryCache.id(bucket, change.key));
        if (change.kind === 'set') {
          const { type, data } = change.value!;
          this.run('putEntry', { bucket, key, type, value: data, expiresAt: change.expiresAt, revision: change.revision, now });
        } else this.get('removeEntry', { bucket, key });
      }
    };
    if (result.changes.length > 1) this.atomically(rows);
    else rows();
    this.bumps.push([bucket, this.batchRevisions.get(bucket)]);
    this.batchRevisions.set(bucket, result.revision!);
    this.addUsage(bucket, result.usage.keys, result.usage.bytes);
    for (const change of result.changes) {
      this.logChange(
        bucket,
        change.revision,
        Buffer.from(change.key),
        change.kind,
        change.value?.type ?? null,
        change.value?.data ?? null,
        change.expiresAt,
        change.actor,
      );
    }
    for (const { revision, operation } of result.operations) this.logOperation(bucket, revision, operation);
  }

  async listEntries(bucket: string, q: ListQuery, now: number): Promise<ListedEntry[]> {
    return this.listNow(bucket, q, now);
  }

  private listNow(bucket: string, q: ListQuery, now: number): ListedEntry[] {
    const { lower, lowerOp, upper } = listBounds(q);
    const name = listShapeName({ reverse: q.reverse, columns: q.columns, upper: upper !== undefined, after: lowerOp === '>' });
    // Rows as arrays: building an object per row was a visible share of a listing's cost.
    const rows = this.statement(name)
      .raw(true)
      .all(this.args(name, { bucket, lower, now, limit: q.limit, offset: q.offset, upper })) as Array<
      // The third column is the value (columns 'values') or its byte length (columns 'meta'); the sixth, the create revision, comes with values only.
      [Buffer, string, Buffer | number, number | null, number, number?]
    >;
    return rows.map(([key, type, third, expires_at, revision, create_revision]) => ({
      key: key.toString('utf8'),
      ...(q.columns === 'values' && {
        entry: toEntry({ type, value: third as Buffer, expires_at, revision, create_revision: create_revision! }),
      }),
      ...(q.columns === 'meta' && { meta: toMeta({ type, size: third as number, expires_at, revision }) }),
    }));
  }

  async commit(bucket: string, ops: TxnRequestOp[], now: number, options: CommitOptions = {}): Promise<CommitOutcome> {
    const { expectRevision, operation, actor } = options;
    return this.keyWrite(bucket, { op: 'commit', ops, now, expectRevision, operation, actor });
  }

  async listBuckets(after: string | undefined, limit: number): Promise<BucketRecord[]> {
    const rows = this.statement('listBuckets').all(this.args('listBuckets', { after: after ?? '', limit })) as Array<Database['buckets']>;
    return rows.map(bucketFromRow);
  }

  async checkIntegrity(): Promise<string[]> {
    const problems = (this.raw.pragma('integrity_check') as Array<{ integrity_check: string }>)
      .map((r) => r.integrity_check)
      .filter((r) => r !== 'ok');
    const n = this.get<{ n: number }>('orphanEntries')?.n ?? 0;
    if (n > 0) problems.push(`${n} entries belong to no bucket`);
    return problems;
  }

  async openSnapshot(bucket: string, prefix: string, now: number): Promise<EntrySnapshot | undefined> {
    return openSqliteSnapshot(
      this.path === ':memory:' ? { memory: this.raw } : { path: this.path },
      {
        bucketRevision: this.sql.bucketRevision!,
        snapshotEntries: this.sql.snapshotEntries!,
        snapshotEntriesUpper: this.sql.snapshotEntriesUpper!,
      },
      bucket,
      prefix,
      now,
    );
  }

  /**
   * Stages into a private temp database (no journal, no fsync: it is thrown away on failure), then
   * applies it with one statement inside one write batch: the database is attached to the
   * server's connection just for that, so 1M staged rows never pass through JavaScript again.
   * The apply is one write like any other: one revision of the bucket, checked and bumped inside the batch.
   */
  async beginImport(bucket: string): Promise<ImportStaging> {
    const temp = privateTempDir('import');
    const staging = new BetterSqlite3(temp.file);
    let finished = false;
    try {
      staging.pragma('journal_mode = OFF');
      staging.pragma('synchronous = OFF');
      // A private file of this import's own: not kvb's schema, so not in statements.ts.
      staging.exec(
        'create table staged (key blob primary key, type text not null, value blob not null, expires_at integer, revision integer not null, create_revision integer) without rowid',
      );
    } catch (err) {
      staging.close();
      temp.remove();
      throw err;
    }
    const insert = staging.prepare(
      'insert or replace into staged (key, type, value, expires_at, revision, create_revision) values (?, ?, ?, ?, ?, ?)',
    );
    const addAll = staging.transaction((entries: KeyedEntry[]) => {
      for (const { key, entry } of entries)
        insert.run(Buffer.from(key), entry.type, entry.data, entry.expiresAt, entry.revision ?? 0, entry.createRevision ?? null);
    });
    const finish = () => {
      finished = true;
      if (staging.open) staging.close();
      temp.remove();
    };
    const apply = async ({
      replace,
      prefix,
      restoreRevision,
      actor,
    }: {
      replace: boolean;
      prefix: string;
      restoreRevision?: number;
      actor?: Actor;
    }) => {
      if (finished) throw new Error('import already finished');
      staging.close();
      // ATTACH cannot run inside a transaction; nothing is open between two turns of the loop.
      this.raw.prepare(`attach database ? as ${IMPORT_ALIAS}`).run(temp.file);
      try {
        const prefixBytes = Buffer.from(prefix);
        const upper = prefix ? prefixUpperBound(prefixBytes) : undefined;
        return await this.write(() => {
          // The import recounts the bucket's usage: the batch's usage changes so far go in first.
          this.writeBookkeeping();
          return this.atomically((): Written | { refused: 'no_bucket' } => {
            let revision: number | undefined;
            if (restoreRevision === undefined) revision = this.bump(bucket);
            else if (this.currentRevision(bucket) !== undefined) {
              this.bumps.push([bucket, this.batchRevisions.get(bucket)]);
              this.batchRevisions.set(bucket, restoreRevision);
              revision = restoreRevision;
            }
            if (revision === undefined) return { refused: 'no_bucket' };
            this.clearCacheAfterCommit = true;
            this.withinQuota(bucket, () => {
              // History: the import's keys and the keys it removes, as of its revision (statements on the attached database, prepared afresh).
              const logged = restoreRevision === undefined ? 'logStaged' : 'logStagedKeepRevisions';
              const who = actorFields(actor);
              this.raw.prepare(this.sql[logged]!.sql).run(this.args(logged, { bucket, revision, now: this.batchNow, ...who }));
              if (replace) {
                const cleared = upper ? 'logClearedUpper' : 'logCleared';
                this.raw
                  .prepare(this.sql[cleared]!.sql)
                  .run(this.args(cleared, { bucket, revision, now: this.batchNow, prefix: prefixBytes, upper, ...who }));
              }
              if (replace) this.run(upper ? 'clearRangeUpper' : 'clearRange', { bucket, prefix: prefixBytes, upper });
              // Prepared afresh: it names the attached database, which is detached again right after.
              const copy = restoreRevision === undefined ? 'copyStaged' : 'copyStagedKeepRevisions';
              this.raw.prepare(this.sql[copy]!.sql).run(this.args(copy, { bucket, revision, now: this.batchNow }));
              // Millions of rows in one statement: the usage is counted again rather than tracked per row.
              this.run('recountUsage', { bucket });
            });
            // Watchers behind an import (one revision of up to millions of keys) get `reset`. History
            // keeps what the import did not touch: only a restore (the whole bucket, the operator's
            // `kvb db restore`) starts history at its revision; an import's keys are logged above.
            if (restoreRevision === undefined) this.run('raiseWatchFloor', { bucket, revision });
            else this.compactTo(bucket, revision, -1);
            this.run('logOperation', { bucket, revision, operation: 'import', now: this.batchNow });
            return { revision };
          });
        });
      } finally {
        this.raw.prepare(`detach database ${IMPORT_ALIAS}`).run();
        finish();
      }
    };
    return {
      add: async (entries) => {
        addAll(entries);
      },
      abort: async () => {
        if (!finished) finish();
      },
      apply: (options) => {
        const applied = this.importApplies.then(() => apply(options));
        this.importApplies = applied.catch(() => {});
        return applied;
      },
    };
  }

  async sweepExpired(now: number, batch: number): Promise<number> {
    return this.write(() =>
      this.atomically(() => {
        const expired = this.statement('expiredEntries').all(this.args('expiredEntries', { now, batch })) as Array<{
          bucket_id: string;
          key: Buffer;
        }>;
        const byBucket = new Map<string, Array<{ key: Buffer }>>();
        for (const row of expired) byBucket.set(row.bucket_id, [...(byBucket.get(row.bucket_id) ?? []), row]);
        let deleted = 0;
        for (const [bucket, rows] of byBucket) {
          // One revision per bucket per batch; a bucket row that is gone leaves nothing to number.
          const revision = this.bump(bucket);
          for (const { key } of rows) {
            const removed = this.get<{ size: number }>('removeExpired', { bucket, key, now });
            if (removed === undefined) continue;
            this.addUsage(bucket, -1, -Number(removed.size));
            if (revision !== undefined) this.logChange(bucket, revision, key, 'expire', null, null, null, SERVER_ACTOR);
            deleted += 1;
          }
        }
        this.stats.sweptKeys += deleted;
        return deleted;
      }),
    );
  }

  async countEntries(): Promise<number> {
    return this.get<{ n: number }>('countEntries')!.n;
  }

  async countBuckets(): Promise<number> {
    return this.get<{ n: number }>('countBuckets')!.n;
  }

  async bucketUsage(bucket: string): Promise<Usage | undefined> {
    return this.usageOf(bucket);
  }

  async ping(): Promise<void> {
    this.raw.prepare('select 1').get();
  }

  async close(): Promise<void> {
    if (this.pendingWrites.length > 0) this.flushWrites();
    await this.checkpointer?.close();
    if (this.raw.open) {
      try {
        // A store reading beside a running server leaves the checkpoint to it.
        if (this.lock) this.raw.pragma('wal_checkpoint(TRUNCATE)');
      } catch {
        // A full disk or a read-only file: every commit is already in the WAL, which the next
        // open replays, so a checkpoint that cannot run is no reason for an unclean exit.
      }
      this.raw.close();
    }
    this.lock?.release();
  }
}
