import { applyBatch } from '../core/apply-batch.js';
import type { OpOutcome, ResultOf, WriteOp } from '../core/write-ops.js';
import type { BatchResult, WriteView } from '../core/write-view.js';
import { EntryCache } from '../entry-cache.js';
import type { EntryRow } from '../entry-row.js';
import type { Quota, Usage } from '../quota.js';
import { BatchWrites, BookkeepingFailure, type PendingRow, type WrittenKey, rowOf } from './sqlite-batch-writes.js';
import { IMPORT_ALIAS, type SqliteConnection } from './sqlite-connection.js';
import { WrittenRows } from './sqlite-written-rows.js';
import { type BatchReply, type SentOutcome, type WriteRequest, sendError } from './sqlite-write-protocol.js';

type OpRequest = Extract<WriteRequest, { kind: 'op' }>;

/**
 * The SQLite write side: runs batches of writes (sqlite-write-protocol.ts) on the one write
 * connection, each batch one transaction (one WAL append, one fsync in `full` durability). It runs
 * on the writer thread (sqlite-writer-worker.ts), or for ':memory:' on the request thread, with the
 * same messages.
 *
 * A batch's key writes to one bucket go through the write rules together (core/apply-batch.ts:
 * each write its own revision; one that throws is taken back by the rules), and what they did is
 * kept in memory (`BatchWrites`) and written at the batch's end, a few multi-row statements for
 * the whole batch. The engine's own procedures (an import, a bucket delete) put the batch's writes
 * so far in the file first and run in a savepoint, which is their undo. When a statement fails at
 * the batch's end, the batch runs again with each write's rows written as it makes them (several in
 * a savepoint), so the write whose row fails fails alone. better-sqlite3 is synchronous: a read,
 * check and write inside one write is atomic.
 */
export class SqliteWriter {
  /**
   * Bucket revisions known to be in the file, kept in memory: this thread is the file's only
   * writer. The running batch's own are in `batch` until it commits.
   */
  private readonly committedRevisions = new Map<string, number>();
  /** Buckets the request thread watches: the answers carry their changes (`BatchReply.carried`). */
  private readonly watched = new Set<string>();
  /** The running batch's writes not yet in the file. */
  private batch = new BatchWrites(0, this.watched);
  /**
   * Whether the running batch writes its keys' rows at its end (kept in `batch`), or as each write
   * makes them (a batch run again after a failure).
   */
  private deferRows = true;
  /** Rows this thread wrote, so a write to a key written before loads it without a SELECT. */
  private readonly rows = new WrittenRows();
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

  /** The running batch's commit time (ms), the change log's `committed_at`. */
  get batchNow(): number {
    return this.batch.now;
  }

  /**
   * Runs `requests` as one transaction and says what it did. An import's staging file is attached
   * first (ATTACH cannot run inside a transaction; imports come one at a time) and detached after.
   * `run` runs one request other than a key write (sqlite-write-requests.ts) inside the batch.
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
    const batch = (this.batch = new BatchWrites(Date.now(), this.watched));
    this.deferRows = deferRows;
    try {
      this.atomically(() => {
        for (let i = 0; i < requests.length; ) {
          // Consecutive key writes go through the rules together (rows deferred); anything else one by one.
          let end = i;
          while (deferRows && end < requests.length && requests[end]!.kind === 'op') end++;
          if (end > i) {
            this.applyOps(requests.slice(i, end) as OpRequest[], outcomes);
            i = end;
            continue;
          }
          const request = requests[i++]!;
          try {
            if (request.kind === 'import' && attachFailure !== undefined) throw attachFailure;
            outcomes.push({ ok: true, value: request.kind === 'op' ? this.applyWrite(request.bucket, request.op) : run(request) });
          } catch (error) {
            if (error instanceof BookkeepingFailure) throw error;
            outcomes.push({ ok: false, error: sendError(error) });
          }
        }
        batch.flush(this.conn);
      });
    } catch (error) {
      // Nothing committed; every key the batch wrote is read afresh all the same.
      this.rows.endBatch(false);
      const cause = error instanceof BookkeepingFailure ? error.cause : error;
      return { outcomes: [], failed: sendError(cause), touched: batch.touched, clearCache: batch.clearCache, revisions: [] };
    }
    this.rows.endBatch(true);
    const revisions = [...batch.revisions];
    for (const [bucket, revision] of revisions) {
      if (revision === null) this.committedRevisions.delete(bucket);
      else this.committedRevisions.set(bucket, revision);
    }
    const carried = batch.carriedChanges();
    return { outcomes, touched: batch.touched, clearCache: batch.clearCache, revisions, ...(carried && { carried }) };
  }

  /** Key writes, in order, each bucket's through one run of the rules; their outcomes pushed onto `outcomes` in order. */
  private applyOps(requests: OpRequest[], outcomes: SentOutcome[]): void {
    const bucket = requests[0]!.bucket;
    if (requests.every((r) => r.bucket === bucket)) {
      for (const outcome of this.applyRun(
        bucket,
        requests.map((r) => r.op),
      ))
        outcomes.push(sent(outcome));
      return;
    }
    // Buckets are independent (a write reads only its own): each bucket's writes run together, answered in order.
    const byBucket = new Map<string, number[]>();
    for (const [i, { bucket }] of requests.entries()) {
      const at = byBucket.get(bucket);
      if (at) at.push(i);
      else byBucket.set(bucket, [i]);
    }
    const answers: SentOutcome[] = new Array(requests.length);
    for (const [bucket, at] of byBucket) {
      const done = this.applyRun(
        bucket,
        at.map((i) => requests[i]!.op),
      );
      for (const [j, i] of at.entries()) answers[i] = sent(done[j]!);
    }
    outcomes.push(...answers);
  }

  /**
   * One write inside the running batch, answered or thrown: a sweep's, an import's, or any key
   * write of a batch run again after a failure (its rows written now, in `persist`).
   */
  applyWrite<O extends WriteOp>(bucket: string, op: O): ResultOf<O> {
    const outcome = this.applyRun(bucket, [op])[0]!;
    if (!outcome.ok) throw 'error' in outcome ? outcome.error : new Error('a stale prefix listing');
    return outcome.value as ResultOf<O>;
  }

  /**
   * Writes over one bucket: the bucket as the batch has left it (the file's rows and usage, the
   * batch's revisions and pending usage) read on demand as a WriteView, the write rules run over
   * it (core/apply-batch.ts), and what they did persisted. Reads and writes run back to back:
   * nothing can interleave.
   */
  private applyRun(bucket: string, ops: WriteOp[]): OpOutcome[] {
    const view: WriteView = {
      revision: this.currentRevision(bucket),
      usage: () => this.usageOf(bucket)!,
      row: (key) => this.row(bucket, key),
      liveKeys: (prefix, now, limit) => {
        // The listing reads the file: the batch's rows so far go in first.
        this.batch.writeRows(this.conn);
        return this.conn.list(bucket, { prefix, reverse: false, columns: 'keys', offset: 0, limit }, now).map((e) => e.key);
      },
    };
    const result = applyBatch(view, ops, this.quota);
    // A write whose rows could not be written: the batch fails (a stale view of them was read).
    for (const outcome of result.outcomes)
      if (!outcome.ok && 'error' in outcome && outcome.error instanceof BookkeepingFailure) throw outcome.error;
    if (result.revision !== view.revision) this.persist(bucket, view.revision!, result, ops[0]!.now);
    return result.outcomes;
  }

  /**
   * Keeps what the rules did for the batch's end; or, when the batch writes rows as it goes,
   * writes the rows first (several in a savepoint) and keeps the rest once they are in: a row that
   * fails leaves nothing kept.
   */
  private persist(bucket: string, from: number, result: BatchResult, now: number): void {
    const written = result.changes.map((change): WrittenKey => [EntryCache.id(bucket, change.key), Buffer.from(change.key), rowOf(change)]);
    if (!this.deferRows) {
      const rows = written.map(([, key, row]): PendingRow => [bucket, key, row]);
      if (rows.length > 1) this.atomically(() => writeRowsNow(this.conn, rows, now));
      else writeRowsNow(this.conn, rows, now);
    }
    for (const [id, , row] of written) this.rows.wrote(id, row);
    this.batch.add(bucket, from, result, written, !this.deferRows);
  }

  /** The key's row as the running batch sees it: from rows this thread wrote, else the file. */
  private row(bucket: string, key: string): EntryRow | undefined {
    const known = this.rows.get(EntryCache.id(bucket, key));
    if (known !== undefined) return known ?? undefined;
    return this.conn.readEntry(bucket, Buffer.from(key));
  }

  /** Puts the batch's writes so far in the file (`BatchWrites.flush`): before a write that recounts or drops a bucket's rows. */
  flush(): void {
    this.batch.flush(this.conn);
  }

  /** Puts the batch's rows so far in the file: before anything reads entries from the file inside the batch. */
  writeRows(): void {
    this.batch.writeRows(this.conn);
  }

  /** Deletes a bucket with its entries, change log and operations. */
  deleteBucket(id: string): boolean {
    // The batch's writes so far go in first (and out with the bucket).
    this.flush();
    const deleted = this.atomically(() => {
      // The bucket row goes first: a write later in the batch finds no bucket to bump and writes nothing.
      const deleted = this.conn.run('deleteBucket', { bucket: id }).changes > 0;
      this.conn.run('deleteBucketEntries', { bucket: id });
      this.conn.run('deleteBucketChanges', { bucket: id });
      this.conn.run('deleteBucketOperations', { bucket: id });
      return deleted;
    });
    this.dropCache();
    this.batch.setRevision(id, null);
    return deleted;
  }

  /** A bucket made in the running batch: revision 0, in the file already (one made after a delete in the same batch is there). */
  createdBucket(id: string): void {
    this.batch.setRevision(id, 0, true);
  }

  /** The request thread watches the bucket, or no longer does. */
  watch(bucket: string, watched: boolean): void {
    if (watched) this.watched.add(bucket);
    else this.watched.delete(bucket);
    this.batch.watchChanged(bucket);
  }

  /** Runs several statements as one unit: a transaction, or a savepoint inside the running batch. */
  atomically<T>(run: () => T): T {
    return this.inTransaction(run) as T;
  }

  /** The whole entry cache is stale after this batch (an import or a bucket delete rewrote keys it cannot name one by one). */
  dropCache(): void {
    this.batch.clearCache = true;
    this.rows.forgetAll();
  }

  /** A bucket's revision as the running batch sees it; undefined when the bucket is gone. */
  currentRevision(bucket: string): number | undefined {
    const inBatch = this.batch.revision(bucket);
    if (inBatch !== undefined) return inBatch ?? undefined;
    return this.committedRevisions.get(bucket) ?? this.conn.get<{ revision: number }>('bucketRevision', { bucket })?.revision;
  }

  /** A write the engine ran itself (an import) left the bucket at `revision`; its statements are in the file. */
  setRevision(bucket: string, revision: number): void {
    this.batch.setRevision(bucket, revision);
  }

  /** The bucket's usage as the running batch sees it (the file's, plus the batch's changes not yet written). */
  usageOf(bucket: string): Usage | undefined {
    const row = this.conn.get<{ usage_keys: number; usage_bytes: number }>('bucketUsage', { bucket });
    const pending = this.batch.pendingUsage(bucket);
    return row && { keys: Number(row.usage_keys) + (pending?.keys ?? 0), bytes: Number(row.usage_bytes) + (pending?.bytes ?? 0) };
  }

  /** Raises the bucket's floor to `revision` and compacts its log up to it, in the running write. */
  compactTo(bucket: string, revision: number, floor?: number): void {
    const previous = floor ?? Number(this.conn.get<{ changes_floor: number }>('changesFloor', { bucket })?.changes_floor ?? 0);
    this.conn.run('raiseFloor', { bucket, revision });
    this.conn.run('compactChanges', { bucket, revision, floor: previous });
    this.conn.run('pruneOperations', { bucket, revision });
  }
}

/** A write's outcome as it crosses threads (a stale prefix listing cannot happen here: this engine lists inside the write). */
function sent(outcome: OpOutcome): SentOutcome {
  if (outcome.ok) return outcome;
  return { ok: false, error: sendError('error' in outcome ? outcome.error : new Error('a stale prefix listing')) };
}

/** Writes rows one statement each (a batch run again); a key it creates is created at the row's revision. */
function writeRowsNow(conn: SqliteConnection, rows: PendingRow[], now: number): void {
  for (const [bucket, key, row] of rows) {
    if (row)
      conn.run('putEntry', {
        bucket,
        key,
        type: row.type,
        value: row.value,
        expiresAt: row.expires_at,
        revision: row.revision,
        now,
      });
    else conn.get('removeEntry', { bucket, key });
  }
}
