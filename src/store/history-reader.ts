import { isValueType } from '../values/value-type.js';
import { listBounds } from './list-bounds.js';
import { type HistoryStatementName, bucketLogName, keyHistoryName, listAtShapeName } from './history-statements.js';
import { actorFromRow } from './change-row.js';
import type { ChangeLogBounds, Entry, HistoryReads, ListQuery, ListedEntry } from './store.js';
import type { ActorFilter, BucketLogQuery, HistoryOperation, HistoryRecord, LoggedKeyChange, PastRead } from './history-types.js';
import type { ChangeKind } from '../values/change-kind.js';

/**
 * Each prune looks again at changes committed this long before its previous pass's cut-off: a
 * change's time is taken when its write starts (PostgreSQL), so one that commits late would
 * otherwise never be looked at (the floor would then wait for the bucket's next change).
 */
export const PRUNE_OVERLAP_MS = 30_000;

/** Runs one compiled history statement by name and returns its rows (each store supplies its own). */
export type RunHistoryStatement = (name: HistoryStatementName, args: Record<string, unknown>) => Promise<Array<Record<string, unknown>>>;

const num = (v: unknown) => (v === null || v === undefined ? null : Number(v));

function toEntry(row: Record<string, unknown>): Entry {
  const type = String(row.type);
  if (!isValueType(type)) throw new Error(`corrupt change row: unknown value type ${type}`);
  return { type, data: row.value as Buffer, expiresAt: num(row.expires_at), revision: Number(row.revision) };
}

/**
 * Reads of the past, the same on both backends: `run` executes a statement of
 * history-statements.ts, `bounds` reads the bucket's floor and revision. A read is answered only
 * when the revision is inside [floor, revision] both before and after the rows are read, so a
 * compaction that commits meanwhile cannot pass off a partly compacted state as the past.
 */
export class HistoryReader implements HistoryReads {
  constructor(
    private readonly run: RunHistoryStatement,
    private readonly bounds: (bucket: string) => Promise<ChangeLogBounds | undefined>,
  ) {}

  /**
   * When `revision` committed: the time of the newest row at or below it, change or operation (a
   * revision that logged no change has an operation row with its own time); expiry at that
   * revision is judged by it.
   */
  private async timeAt(bucket: string, revision: number): Promise<number> {
    const [[change], [operation]] = await Promise.all([
      this.run('timeAt', { bucket, revision }),
      this.run('operationTimeAt', { bucket, revision }),
    ]);
    const newest = !change ? operation : !operation ? change : Number(operation.revision) > Number(change.revision) ? operation : change;
    return newest ? Number(newest.committed_at) : 0;
  }

  private async within<T>(bucket: string, revision: number, read: () => Promise<T>): Promise<PastRead<T>> {
    const before = await this.bounds(bucket);
    if (!before) return { outcome: 'no_bucket' };
    if (revision > before.revision) return { outcome: 'future', bounds: before };
    if (revision < before.floor) return { outcome: 'below_floor', bounds: before };
    const value = await read();
    const after = await this.bounds(bucket);
    if (!after) return { outcome: 'no_bucket' };
    if (revision < after.floor) return { outcome: 'below_floor', bounds: after };
    return { outcome: 'ok', value, bounds: before };
  }

  /** The key as it was at `revision`: undefined when it was absent, deleted or expired then. */
  readAt(bucket: string, key: string, revision: number): Promise<PastRead<Entry | undefined>> {
    return this.within(bucket, revision, async () => {
      const [row] = await this.run('readAt', { bucket, key: Buffer.from(key), revision });
      if (row?.kind !== 'set') return undefined;
      const entry = toEntry(row);
      if (entry.expiresAt !== null && entry.expiresAt <= (await this.timeAt(bucket, revision))) return undefined;
      return entry;
    });
  }

  /** One page of the keys live at `revision`, like a listing of the present (values always read). */
  listAt(bucket: string, q: ListQuery, revision: number): Promise<PastRead<ListedEntry[]>> {
    return this.within(bucket, revision, async () => {
      const { lower, lowerOp, upper } = listBounds(q);
      const name = listAtShapeName({ reverse: q.reverse, upper: upper !== undefined, after: lowerOp === '>' });
      const at = await this.timeAt(bucket, revision);
      const rows = await this.run(name, { bucket, lower, upper, revision, at, limit: q.limit, offset: q.offset });
      return rows.map((row) => {
        const entry = toEntry(row);
        const key = (row.key as Buffer).toString('utf8');
        if (q.columns === 'values') return { key, entry };
        if (q.columns === 'meta')
          return { key, meta: { type: entry.type, size: entry.data.length, expiresAt: entry.expiresAt, revision: entry.revision } };
        return { key };
      });
    });
  }

  /** Up to `limit` of a key's recorded changes before revision `before`, newest first (only `actor`'s, when given). */
  async keyHistory(bucket: string, key: string, before: number, limit: number, actor?: ActorFilter): Promise<HistoryRecord[]> {
    // Bucket ids never contain NUL, which PostgreSQL text cannot even carry: no such bucket, no history.
    if (bucket.includes('\u0000')) return [];
    const name = keyHistoryName(filterOf(actor));
    const rows = await this.run(name, { bucket, key: Buffer.from(key), before, limit, actorKind: actor?.kind, actorToken: actor?.tokenId });
    return rows.map(historyRecord);
  }

  /** Up to `q.limit` changes of the bucket (or a prefix), in revision order and each revision's keys in byte order. */
  async bucketLog(bucket: string, q: BucketLogQuery): Promise<LoggedKeyChange[]> {
    if (bucket.includes('\u0000')) return [];
    const { lower, upper } = listBounds({ prefix: q.prefix, reverse: false });
    // No valid key reaches 0xFF (UTF-8 never holds that byte): "above every key" as a bound.
    const pastEveryKey = Buffer.from([0xff]);
    const after = q.after ?? { revision: q.sinceRevision - 1, key: undefined };
    const rows = await this.run(bucketLogName(filterOf(q.actor)), {
      bucket,
      afterRevision: after.revision,
      afterKey: after.key === undefined ? pastEveryKey : Buffer.from(after.key),
      untilRevision: q.untilRevision,
      sinceTime: q.sinceTime,
      untilTime: q.untilTime,
      lower,
      upper: upper ?? pastEveryKey,
      actorKind: q.actor?.kind,
      actorToken: q.actor?.tokenId,
      limit: q.limit,
    });
    return rows.map((row) => ({ key: (row.key as Buffer).toString('utf8'), ...historyRecord(row) }));
  }
}

const filterOf = (actor: ActorFilter | undefined) => (actor === undefined ? 'all' : actor.tokenId === undefined ? 'kind' : 'token');

/** A change row (with its revision's operation, when one was logged) as a history record. */
function historyRecord(row: Record<string, unknown>): HistoryRecord {
  const kind = String(row.kind) as ChangeKind;
  const operation = (
    row.operation === null || row.operation === undefined || kind === 'expire' ? kind : String(row.operation)
  ) as HistoryOperation;
  const value = kind === 'set' ? toEntry(row) : undefined;
  return {
    revision: Number(row.revision),
    operation,
    kind,
    time: Number(row.committed_at),
    actor: actorFromRow(row),
    ...(value && { value: { type: value.type, data: value.data }, expiresAt: value.expiresAt }),
  };
}
