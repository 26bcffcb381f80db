import { actorFields } from '../change-row.js';
import type { BatchResult, ChangeRecord } from '../core/write-view.js';
import type { EntryRow } from '../entry-row.js';
import type { Usage } from '../quota.js';
import type { Change, CommittedChanges } from '../store.js';
import type { ChangeKind } from '../../values/change-kind.js';
import { compareKeys } from '../../values/key-order.js';
import type { SqliteConnection } from './sqlite-connection.js';

/** A key's row as the running batch left it, waiting for the batch's end (null: the key is removed). */
export type PendingRow = [bucket: string, key: Buffer, row: EntryRow | null];

/** A key a change wrote: its entry-cache id, its bytes and the row it left (null: removed). */
export type WrittenKey = [id: string, key: Buffer, row: EntryRow | null];

/** A change-log row waiting for its batch's multi-row insert (fields as CHANGE_ROW_FIELDS). */
type PendingChange = [
  bucket: string,
  revision: number,
  key: Buffer,
  kind: ChangeKind,
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

/** A batch's writes could not be put in the file: the whole batch fails (its writes' answers depend on them). */
export class BookkeepingFailure extends Error {
  constructor(override readonly cause: unknown) {
    super('the batch bookkeeping failed');
  }
}

/**
 * One SQLite batch's writes that are not in the file yet, put there in a few multi-row statements
 * (`flush`): each bucket's final revision, its usage change, the change-log and operation rows,
 * and (unless the batch writes them as it goes) each key's last row. A write's part is added only
 * once it has succeeded: the write rules took back a write that threw (core/apply-batch.ts), and
 * a write's own statements, if it ran any, ran first, in a savepoint that took them back. So
 * nothing here is ever taken back: a batch that fails drops the whole of it, as its transaction
 * rolled back.
 */
export class BatchWrites {
  /** Each bucket's revision after the batch's writes so far (null: deleted in it). */
  readonly revisions = new Map<string, number | null>();
  /** Buckets whose revision in `revisions` is not in the file yet. */
  private readonly unwritten = new Set<string>();
  private usage = new Map<string, Usage>();
  private changes: PendingChange[] = [];
  private operations: PendingOperation[] = [];
  /** Each key's last row, by cache id (deferred rows only). */
  private rows = new Map<string, PendingRow>();
  /** Cache ids of the keys the batch writes: the request thread forgets them once it has committed. */
  readonly touched: string[] = [];
  /** The whole entry cache is stale after the batch (an import or a bucket delete rewrote keys it cannot name). */
  clearCache = false;
  /** The changes to watched buckets, for the request thread's watchers: each bucket's revision before them, and them. */
  private readonly carried = new Map<string, { from: number; changes: Change[] }>();
  /** Buckets whose watch began or ended after the batch changed them: it carries none of their changes. */
  private readonly uncarried = new Set<string>();

  /**
   * `now`: the batch's commit time (ms), the change log's `committed_at`. `watched`: the buckets
   * whose changes the answer carries (`carriedChanges`).
   */
  constructor(
    readonly now: number,
    private readonly watched: ReadonlySet<string>,
  ) {}

  /** The bucket's revision after the batch's writes; undefined: they did not change it. */
  revision(bucket: string): number | null | undefined {
    return this.revisions.get(bucket);
  }

  /**
   * A write without change records (an import, a bucket delete or creation) left the bucket at
   * `revision` (null: deleted); `written`: its statement already ran. Its watchers read the log.
   */
  setRevision(bucket: string, revision: number | null, written = false): void {
    this.carried.delete(bucket);
    this.revisionIs(bucket, revision, written);
  }

  private revisionIs(bucket: string, revision: number | null, written: boolean): void {
    this.revisions.set(bucket, revision);
    if (revision === null || written) this.unwritten.delete(bucket);
    else this.unwritten.add(bucket);
  }

  /** The batch's change of the bucket's usage not yet in the file. */
  pendingUsage(bucket: string): Usage | undefined {
    return this.usage.get(bucket);
  }

  /**
   * Adds writes' result over `bucket`, whose revision was `from` before them: their keys' rows
   * (kept for the batch's end, unless `rowsWritten`), revision, usage, change rows and operations.
   */
  add(bucket: string, from: number, result: BatchResult, written: WrittenKey[], rowsWritten: boolean): void {
    const { changes } = result;
    if (this.watched.size > 0 && this.watched.has(bucket) && !this.uncarried.has(bucket)) this.carry(bucket, from, changes);
    for (let i = 0; i < changes.length; i++) {
      const [id, key, row] = written[i]!;
      this.touched.push(id);
      if (!rowsWritten) this.rows.set(id, [bucket, key, row]);
      this.logChange(bucket, changes[i]!, key);
    }
    this.revisionIs(bucket, result.revision!, false);
    this.addUsage(bucket, result.usage);
    for (const { revision, operation } of result.operations) this.operations.push([bucket, revision, operation, this.now]);
  }

  /**
   * The bucket's watch began or ended while the batch runs. If the batch changed it already, it
   * carries none of its changes: carried in part, the commit would claim the whole batch's
   * revisions, and the watch feed would skip those it left out. Its watchers read the log.
   */
  watchChanged(bucket: string): void {
    if (!this.revisions.has(bucket)) return;
    this.carried.delete(bucket);
    this.uncarried.add(bucket);
  }

  private carry(bucket: string, from: number, changes: ChangeRecord[]): void {
    let carried = this.carried.get(bucket);
    if (!carried) this.carried.set(bucket, (carried = { from, changes: [] }));
    for (const { revision, key, kind, value, expiresAt } of changes)
      carried.changes.push(value ? { revision, key, kind, value, expiresAt } : { revision, key, kind, expiresAt });
  }

  /** The batch's changes to watched buckets, each revision's in key order as the log reads them; undefined: none. */
  carriedChanges(): CommittedChanges[] | undefined {
    if (this.carried.size === 0) return undefined;
    return [...this.carried].map(([bucket, { from, changes }]) => ({
      bucket,
      from,
      revision: this.revisions.get(bucket)!,
      changes: changes.sort((a, b) => a.revision - b.revision || compareKeys(a.key, b.key)),
    }));
  }

  private logChange(bucket: string, change: ChangeRecord, key: Buffer): void {
    const { actorKind, actorToken, actorAddress } = actorFields(change.actor);
    const { value } = change;
    this.changes.push([
      bucket,
      change.revision,
      key,
      change.kind,
      value?.type ?? null,
      value?.data ?? null,
      change.expiresAt,
      actorKind,
      actorToken,
      actorAddress,
      this.now,
    ]);
  }

  private addUsage(bucket: string, { keys, bytes }: Usage): void {
    if (keys === 0 && bytes === 0) return;
    let usage = this.usage.get(bucket);
    if (!usage) this.usage.set(bucket, (usage = { keys: 0, bytes: 0 }));
    usage.keys += keys;
    usage.bytes += bytes;
  }

  /**
   * Writes the rows kept so far: every key's last row, the upserts in multi-row statements. Before
   * anything reads entries from the file in the batch (a listing, the sweep, an import, a bucket
   * delete), outside any savepoint, and at the batch's end.
   */
  writeRows(conn: SqliteConnection): void {
    if (this.rows.size === 0) return;
    try {
      const puts: unknown[][] = [];
      for (const [bucket, key, row] of this.rows.values()) {
        if (row === null) conn.get('removeEntry', { bucket, key });
        else puts.push([bucket, key, row.type, row.value, row.expires_at, row.revision, row.create_revision]);
      }
      conn.insertRows('putEntries', puts);
    } catch (err) {
      // Earlier writes' rows: the batch cannot commit without them.
      throw new BookkeepingFailure(err);
    }
    this.rows = new Map();
  }

  /**
   * Writes everything kept so far: the rows (`writeRows`), one usage update and one revision
   * update per bucket, the change-log and operation rows in multi-row inserts. At the batch's end,
   * and at the top of a write that recounts or drops a bucket's rows (an import, a bucket delete),
   * outside its savepoint.
   */
  flush(conn: SqliteConnection): void {
    this.writeRows(conn);
    try {
      for (const [bucket, { keys, bytes }] of this.usage) if (keys !== 0 || bytes !== 0) conn.run('addUsage', { bucket, keys, bytes });
      conn.insertRows('logChanges', this.changes);
      conn.insertRows('logOperations', this.operations);
      for (const bucket of this.unwritten) conn.run('setRevision', { bucket, revision: this.revisions.get(bucket) });
    } catch (err) {
      // Earlier writes' bookkeeping: the batch cannot commit without it.
      throw new BookkeepingFailure(err);
    }
    this.usage = new Map();
    this.changes = [];
    this.operations = [];
    this.unwritten.clear();
  }
}

/** The row a change leaves, as the write rules made it (its create revision included); null: removed. */
export function rowOf(change: ChangeRecord): EntryRow | null {
  if (change.kind !== 'set') return null;
  return {
    type: change.value!.type,
    value: change.value!.data,
    expires_at: change.expiresAt,
    revision: change.revision,
    create_revision: change.createRevision!,
  };
}
