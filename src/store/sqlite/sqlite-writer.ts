import { actorFields } from '../change-row.js';
import { applyBatch } from '../core/apply-batch.js';
import type { ResultOf, WriteOp } from '../core/write-ops.js';
import type { BatchResult, ChangeRecord, WriteView } from '../core/write-view.js';
import { EntryCache } from '../entry-cache.js';
import type { EntryRow } from '../entry-row.js';
import type { Actor } from '../history-types.js';
import type { Quota, Usage } from '../quota.js';
import type { Change } from '../store.js';
import { IMPORT_ALIAS, type SqliteConnection } from './sqlite-connection.js';
import { WrittenRows } from './sqlite-written-rows.js';
import { type BatchReply, type SentOutcome, type WriteRequest, sendError } from './sqlite-write-protocol.js';

/** A change-log row waiting for its batch's multi-row insert (fields as CHANGE_ROW_FIELDS). */
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
  now: number,
];

/** What made a revision, waiting for the batch's multi-row insert (fields as MULTI_ROW_FIELDS.logOperations). */
type PendingOperation = [bucket: string, revision: number, operation: string, now: number];

/** A key's row as the running batch left it, waiting for the batch's end (null: the key is removed). */
type PendingRow = [bucket: string, key: Buffer, row: EntryRow | null];

/** A batch's bookkeeping could not be written: the whole batch fails (its writes' answers depend on it). */
class BookkeepingFailure extends Error {
  constructor(override readonly cause: unknown) {
    super('the batch bookkeeping failed');
  }
}

/**
 * The SQLite write side: runs batches of writes (sqlite-write-protocol.ts) on the one write
 * connection, each batch one transaction (one WAL append, one fsync in `full` durability). It runs
 * on the writer thread (sqlite-writer-worker.ts), or for ':memory:' on the request thread, with the
 * same messages. Each write gets its own bucket revision; its rows, like its revision, usage,
 * change rows and operations, are kept in memory and written at the batch's end, a few multi-row
 * statements for the whole batch (`writeBookkeeping`). A write that throws affects only itself:
 * what it kept is taken back. When a statement fails at the batch's end, the batch runs again with
 * each write's rows written as it makes them (multi-statement writes in their own savepoint), so
 * the write whose row fails fails alone. better-sqlite3 is synchronous: a read, check and write
 * inside one write is atomic.
 */
export class SqliteWriter {
  /**
   * Bucket revisions, kept in memory: this thread is the file's only writer. A write bumps the
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
  private batchOperations: PendingOperation[] = [];
  private operationsMark = 0;
  /**
   * Whether the running batch writes its keys' rows at its end (`pendingRows`, by cache id: each
   * key's last row in the batch), or as each write makes them (a batch run again after a failure).
   */
  private deferRows = true;
  private pendingRows = new Map<string, PendingRow>();
  /** What the running write replaced in `pendingRows`: [id, the row before (undefined: none)], taken back if it throws. */
  private pendingUndo: Array<[string, PendingRow | undefined]> = [];
  /** Cache ids of the keys the running batch writes: the request thread forgets them once it has committed. */
  private touched: string[] = [];
  private clearCache = false;
  /** Rows this thread wrote, so a write to a key written before loads it without a SELECT. */
  private readonly rows = new WrittenRows();
  /** The running batch's commit time (ms), the change log's `committed_at`. */
  batchNow = 0;
  /**
   * One better-sqlite3 transaction function, made once: making one builds four wrappers (about 5%
   * of a SET's server CPU when it was made per write). Inside a transaction it takes a savepoint.
   */
  private readonly inTransaction: (run: () => unknown) => unknown;

  constructor(
    readonly conn: SqliteConnection,
    readonly quota: Quota,
  ) {
    this.inTransaction = conn.raw.transaction((run: () => unknown) => run());
  }

  /**
   * Runs `requests` as one transaction and says what it did. An import's staging file is attached
   * first (ATTACH cannot run inside a transaction; imports come one at a time) and detached after.
   * `run` runs one request (sqlite-write-requests.ts) inside the batch.
   */
  runBatch(requests: WriteRequest[], run: (request: WriteRequest) => unknown): Omit<BatchReply, 'messages'> {
    const staged = requests.find((r) => r.kind === 'import');
    let attachFailure: unknown;
    if (staged) {
      try {
        this.conn.raw.prepare(`attach database ? as ${IMPORT_ALIAS}`).run(staged.file);
      } catch (err) {
        attachFailure = err;
      }
    }
    try {
      const done = this.commitBatch(requests, run, attachFailure, true);
      // Nothing of it committed: run again writing each write's rows as it goes, so that a row that
      // cannot be written fails only its own write (or, if the failure is the batch's, all again).
      return done.failed ? this.commitBatch(requests, run, attachFailure, false) : done;
    } finally {
      if (staged && attachFailure === undefined) this.conn.raw.prepare(`detach database ${IMPORT_ALIAS}`).run();
    }
  }

  private commitBatch(
    requests: WriteRequest[],
    run: (request: WriteRequest) => unknown,
    attachFailure: unknown,
    deferRows: boolean,
  ): Omit<BatchReply, 'messages'> {
    const outcomes: SentOutcome[] = [];
    this.deferRows = deferRows;
    this.batchRevisions = new Map();
    this.batchNow = Date.now();
    this.clearCache = false;
    const touched = this.touched;
    try {
      this.atomically(() => {
        for (const request of requests) {
          this.bumps = [];
          this.usageUndo = [];
          this.rows.startWrite();
          this.pendingUndo = [];
          this.changesMark = this.batchChanges.length;
          this.operationsMark = this.batchOperations.length;
          try {
            if (request.kind === 'import' && attachFailure !== undefined) throw attachFailure;
            // A single-statement write needs no savepoint (it validates before it writes); multi-statement ones take their own (atomically).
            outcomes.push({ ok: true, value: run(request) });
          } catch (error) {
            if (error instanceof BookkeepingFailure) throw error.cause;
            outcomes.push({ ok: false, error: sendError(error) });
            this.undoWrite();
          }
        }
        this.writeBookkeeping();
        for (const [bucket, revision] of this.batchRevisions) {
          if (revision !== null) this.conn.run('setRevision', { bucket, revision });
        }
      });
    } catch (error) {
      // Nothing committed; every key the batch wrote is read afresh all the same.
      this.rows.endBatch(false);
      return { outcomes: [], failed: sendError(error), touched, clearCache: this.clearCache, revisions: [] };
    } finally {
      this.touched = [];
      this.bumps = [];
      this.batchUsage = new Map();
      this.batchChanges = [];
      this.batchOperations = [];
      this.pendingRows = new Map();
      this.pendingUndo = [];
    }
    this.rows.endBatch(true);
    const revisions: Array<[string, number | null]> = [];
    for (const [bucket, revision] of this.batchRevisions) {
      if (revision === null) this.committedRevisions.delete(bucket);
      else this.committedRevisions.set(bucket, revision);
      revisions.push([bucket, revision]);
    }
    this.batchRevisions = new Map();
    return { outcomes, touched, clearCache: this.clearCache, revisions };
  }

  /** The key's row as the running batch sees it: from rows this thread wrote, else the file. */
  private row(bucket: string, key: string): EntryRow | undefined {
    const known = this.rows.get(EntryCache.id(bucket, key));
    if (known !== undefined) return known ?? undefined;
    return this.conn.readEntry(bucket, Buffer.from(key));
  }

  /**
   * One write inside the running batch: the bucket as the batch has left it (the file's rows and
   * usage, the batch's revisions and pending usage) read on demand as a WriteView, the write
   * rules run over it (core/apply-batch.ts), and what they did persisted: its rows now, its
   * revision, usage, change rows and operations as the batch's bookkeeping, taken back if a
   * statement throws. Reads and writes run back to back: nothing can interleave.
   */
  applyWrite<O extends WriteOp>(bucket: string, op: O): ResultOf<O> {
    const view: WriteView = {
      revision: this.currentRevision(bucket),
      usage: () => this.usageOf(bucket)!,
      row: (key) => this.row(bucket, key),
      liveKeys: (prefix, now, limit) => {
        // The listing reads the file: the batch's rows so far go in first.
        this.writeRows();
        return this.conn.list(bucket, { prefix, reverse: false, columns: 'keys', offset: 0, limit }, now).map((e) => e.key);
      },
    };
    const result = applyBatch(view, [op], this.quota);
    const outcome = result.outcomes[0]!;
    // Only an engine's own prefix listing goes stale, and this one lists inside the write.
    if (!outcome.ok) throw 'error' in outcome ? outcome.error : new Error('a stale prefix listing');
    if (result.revision !== view.revision) this.persist(bucket, result, op.now);
    return outcome.value as ResultOf<O>;
  }

  /**
   * Keeps a batch result's rows for the batch's end (or, replaying, writes them now, several in a
   * savepoint) and queues its bookkeeping (`writeBookkeeping`).
   */
  private persist(bucket: string, result: BatchResult, now: number): void {
    const { changes } = result;
    const keys = changes.map((change) => Buffer.from(change.key));
    const rows = changes.map((change, i): PendingRow => {
      const row = change.kind === 'set' ? rowOf(change) : null;
      const id = EntryCache.id(bucket, change.key);
      this.touched.push(id);
      this.rows.wrote(id, row);
      if (this.deferRows) {
        this.pendingUndo.push([id, this.pendingRows.get(id)]);
        this.pendingRows.set(id, [bucket, keys[i]!, row]);
      }
      return [bucket, keys[i]!, row];
    });
    if (!this.deferRows) {
      if (rows.length > 1) this.atomically(() => this.writeRowsNow(rows, now));
      else this.writeRowsNow(rows, now);
    }
    this.setRevision(bucket, result.revision!);
    this.addUsage(bucket, result.usage.keys, result.usage.bytes);
    for (let i = 0; i < changes.length; i++) {
      const change = changes[i]!;
      this.logChange(
        bucket,
        change.revision,
        keys[i]!,
        change.kind,
        change.value?.type ?? null,
        change.value?.data ?? null,
        change.expiresAt,
        change.actor,
      );
    }
    for (const { revision, operation } of result.operations) this.batchOperations.push([bucket, revision, operation, this.batchNow]);
  }

  /** Writes rows one statement each (a replayed batch); a key it creates is created at the row's revision. */
  private writeRowsNow(rows: PendingRow[], now: number): void {
    for (const [bucket, key, row] of rows) {
      if (row)
        this.conn.run('putEntry', {
          bucket,
          key,
          type: row.type,
          value: row.value,
          expiresAt: row.expires_at,
          revision: row.revision,
          now,
        });
      else this.conn.get('removeEntry', { bucket, key });
    }
  }

  /**
   * Writes the rows the batch has kept so far: every key's last row, the upserts in multi-row
   * statements. Before anything reads entries from the file in the batch (a listing, the sweep,
   * an import, a bucket delete), outside any savepoint, and at the batch's end.
   */
  writeRows(): void {
    if (this.pendingRows.size === 0) return;
    try {
      const puts: unknown[][] = [];
      for (const [bucket, key, row] of this.pendingRows.values()) {
        if (row === null) this.conn.get('removeEntry', { bucket, key });
        else puts.push([bucket, key, row.type, row.value, row.expires_at, row.revision, row.create_revision]);
      }
      this.conn.insertRows('putEntries', puts);
    } catch (err) {
      // Earlier writes' rows: the batch cannot commit without them.
      throw new BookkeepingFailure(err);
    }
    this.pendingRows = new Map();
    this.pendingUndo = [];
  }

  /** Deletes a bucket with its entries, change log and operations. */
  deleteBucket(id: string): boolean {
    // The batch's change rows and usage for this bucket go in first, and out with the bucket.
    this.writeBookkeeping();
    return this.atomically(() => {
      this.clearCache = true;
      this.rows.forgetAll();
      // The bucket row goes first: a write later in the batch finds no bucket to bump and writes nothing.
      const deleted = this.conn.run('deleteBucket', { bucket: id }).changes > 0;
      this.conn.run('deleteBucketEntries', { bucket: id });
      this.conn.run('deleteBucketChanges', { bucket: id });
      this.conn.run('deleteBucketOperations', { bucket: id });
      this.bumps.push([id, this.batchRevisions.get(id)]);
      this.batchRevisions.set(id, null);
      return deleted;
    });
  }

  /** Takes back a failed write's rows, revision bumps, usage changes and change-log rows. */
  private undoWrite(): void {
    this.rows.undoWrite();
    for (const [id, before] of this.pendingUndo.reverse()) {
      if (before === undefined) this.pendingRows.delete(id);
      else this.pendingRows.set(id, before);
    }
    this.pendingUndo = [];
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
   * Writes the batch's rows and bookkeeping so far: its keys' rows (`writeRows`), one usage update
   * per bucket, the change-log and operation rows in multi-row inserts. At the batch's end, and
   * before a write that recounts or drops a bucket's rows (an import, a bucket delete), at the top
   * of that write, outside its savepoint.
   */
  writeBookkeeping(): void {
    this.writeRows();
    try {
      for (const [bucket, { keys, bytes }] of this.batchUsage)
        if (keys !== 0 || bytes !== 0) this.conn.run('addUsage', { bucket, keys, bytes });
      this.conn.insertRows('logChanges', this.batchChanges);
      this.conn.insertRows('logOperations', this.batchOperations);
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

  /** Records a change-log row for the batch's insert. */
  logChange(
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
    this.batchChanges.push([bucket, revision, key, kind, type, value, expiresAt, actorKind, actorToken, actorAddress, this.batchNow]);
  }

  /** Runs several statements as one unit: a transaction, or a savepoint inside the running batch. */
  atomically<T>(run: () => T): T {
    return this.inTransaction(run) as T;
  }

  /** The whole entry cache is stale after this batch (an import rewrote keys it cannot name one by one). */
  dropCache(): void {
    this.clearCache = true;
    this.rows.forgetAll();
  }

  /** A bucket's revision as the running batch sees it; undefined when the bucket is gone. */
  currentRevision(bucket: string): number | undefined {
    const inBatch = this.batchRevisions.get(bucket);
    if (inBatch !== undefined) return inBatch ?? undefined;
    return this.committedRevisions.get(bucket) ?? this.conn.get<{ revision: number }>('bucketRevision', { bucket })?.revision;
  }

  /** Sets the bucket's revision in the running write (taken back if it throws). */
  setRevision(bucket: string, revision: number): void {
    this.bumps.push([bucket, this.batchRevisions.get(bucket)]);
    this.batchRevisions.set(bucket, revision);
  }

  /** The next revision of a bucket, inside the running write; undefined when the bucket is gone. */
  bump(bucket: string): number | undefined {
    const current = this.currentRevision(bucket);
    if (current === undefined) return undefined;
    this.setRevision(bucket, current + 1);
    return current + 1;
  }

  /** The bucket's usage as the running batch sees it (the file's, plus the batch's changes not yet written). */
  usageOf(bucket: string): Usage | undefined {
    const row = this.conn.get<{ usage_keys: number; usage_bytes: number }>('bucketUsage', { bucket });
    const pending = this.batchUsage.get(bucket);
    return row && { keys: Number(row.usage_keys) + (pending?.keys ?? 0), bytes: Number(row.usage_bytes) + (pending?.bytes ?? 0) };
  }

  /** Counts a write's change of its bucket's usage, written with the batch (`writeBookkeeping`). */
  addUsage(bucket: string, keys: number, bytes: number): void {
    if (keys === 0 && bytes === 0) return;
    let usage = this.batchUsage.get(bucket);
    if (!usage) this.batchUsage.set(bucket, (usage = { keys: 0, bytes: 0 }));
    usage.keys += keys;
    usage.bytes += bytes;
    this.usageUndo.push([bucket, keys, bytes]);
  }

  /** Raises the bucket's floor to `revision` and compacts its log up to it, in the running write. */
  compactTo(bucket: string, revision: number, floor?: number): void {
    const previous = floor ?? Number(this.conn.get<{ changes_floor: number }>('changesFloor', { bucket })?.changes_floor ?? 0);
    this.conn.run('raiseFloor', { bucket, revision });
    this.conn.run('compactChanges', { bucket, revision, floor: previous });
    this.conn.run('pruneOperations', { bucket, revision });
  }
}

/** The row a set leaves, as the write rules made it (its create revision included). */
function rowOf(change: ChangeRecord): EntryRow {
  return {
    type: change.value!.type,
    value: change.value!.data,
    expires_at: change.expiresAt,
    revision: change.revision,
    create_revision: change.createRevision!,
  };
}
