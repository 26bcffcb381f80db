/**
 * The write rules, once for every engine: conditions, quotas, revision assignment, the change
 * rows and history's operations. `applyBatch` runs a batch of writes (write-ops.ts) in order
 * against a view of their bucket (write-view.ts), each deciding everything (its condition, its
 * quota, its own errors) before it changes the batch's state; a write that throws all the same,
 * midway, has what it changed taken back (`rollback`). So a refused or failed write leaves
 * nothing behind. Pure: it reads only the view and returns what the batch did as data; the engine
 * persists that, and the caller answers and feeds caches and watchers from it.
 */
import { type EntryRow, isLive, toEntry } from '../entry-row.js';
import type { HistoryOperation } from '../history-types.js';
import { type Quota, type Usage, checkQuota, entrySize, quotaSet } from '../quota.js';
import type { CommitOutcome, Deleted, Entry, Refusal, Written } from './write-types.js';
import { conditionHolds } from './conditions.js';
import { counterEntry } from './counter.js';
import { lastWritePerKey, prefixListing, readsOf, resolveTransaction } from './txn-resolution.js';
import type { CommitOp, CounterOp, DeleteOp, OpOutcome, SetOp, SweepOp, WriteOp } from './write-ops.js';
import type { BatchResult, ChangeRecord, WriteView } from './write-view.js';
import type { ChangeKind } from '../../values/change-kind.js';
import { compareKeys } from '../../values/key-order.js';

/** Every write's answer when its bucket is gone. */
export const NO_BUCKET = { refused: 'no_bucket' } as const;

/** The batch's state: the view, and what the batch's writes so far changed over it. */
class BatchState {
  revision: number | undefined;
  readonly usage: Usage = { keys: 0, bytes: 0 };
  readonly changes: ChangeRecord[] = [];
  readonly operations: Array<{ revision: number; operation: HistoryOperation }> = [];
  /** Rows as the batch sees them: read from the view once, then as the batch wrote them (undefined: absent). */
  private readonly rows = new Map<string, EntryRow | undefined>();
  /** Keys the batch wrote. */
  private readonly written = new Set<string>();
  /** Each row change of the running write, emptied when it ends: [key, the row before, whether the batch had written the key before]. */
  private readonly undo: Array<[string, EntryRow | undefined, boolean]> = [];
  /** Whether a quota is set: without one, no usage change needs computing before a write. */
  readonly quotaOn: boolean;

  constructor(
    private readonly view: WriteView,
    private readonly quota: Quota,
  ) {
    this.revision = view.revision;
    this.quotaOn = quotaSet(quota);
  }

  row(key: string): EntryRow | undefined {
    const known = this.rows.get(key);
    if (known !== undefined || this.rows.has(key)) return known;
    const row = this.view.row(key);
    this.rows.set(key, row);
    return row;
  }

  /** Where the batch stands before a write: `rollback` returns to it if the write throws. */
  mark() {
    const { revision, usage, changes, operations } = this;
    return { revision, keys: usage.keys, bytes: usage.bytes, changes: changes.length, operations: operations.length };
  }

  /**
   * Takes back what a write that threw had changed (its rows, revision, usage, change rows and
   * operations), so a failed write leaves nothing behind whatever it threw on, midway or not.
   */
  rollback(to: ReturnType<BatchState['mark']>): void {
    this.revision = to.revision;
    this.usage.keys = to.keys;
    this.usage.bytes = to.bytes;
    this.changes.length = to.changes;
    this.operations.length = to.operations;
    while (this.undo.length > 0) {
      const [key, before, wasWritten] = this.undo.pop()!;
      this.rows.set(key, before);
      if (!wasWritten) this.written.delete(key);
    }
  }

  /** Writes a key's row in the batch (after `row(key)` has loaded it), remembered until the write ends (`rollback`). */
  private put(key: string, row: EntryRow | undefined): void {
    this.undo.push([key, this.rows.get(key), this.written.has(key)]);
    this.rows.set(key, row);
    this.written.add(key);
  }

  /** The write ended without throwing: its row changes stay. */
  settle(): void {
    this.undo.length = 0;
  }

  /** The key's entry if it is live at `now` (the write's clock). */
  live(key: string, now: number): Entry | undefined {
    const row = this.row(key);
    return row && isLive(row, now) ? toEntry(row) : undefined;
  }

  /** The bytes the key counts now (undefined: absent). */
  size(key: string): number | undefined {
    const row = this.row(key);
    return row && entrySize(key, row.value);
  }

  /** The bytes the key counts if it is live at `now` (undefined: absent or expired). */
  liveSize(key: string, now: number): number | undefined {
    const row = this.row(key);
    return row && isLive(row, now) ? entrySize(key, row.value) : undefined;
  }

  /** Refuses (507) a usage change over the quota; called before anything changes. */
  checkQuota(delta: Usage): void {
    if (!this.quotaOn) return;
    const before = this.view.usage();
    checkQuota(this.quota, { keys: before.keys + this.usage.keys, bytes: before.bytes + this.usage.bytes }, delta);
  }

  /** What setting `key` to `data` changes in the usage. */
  setDelta(key: string, data: Buffer): Usage {
    const old = this.size(key);
    return { keys: old === undefined ? 1 : 0, bytes: entrySize(key, data) - (old ?? 0) };
  }

  /** The next revision: every committed write takes exactly one. */
  next(): number {
    this.revision = this.revision! + 1;
    return this.revision;
  }

  /**
   * Sets a key at `revision` (after `checkQuota`), counting its usage and logging the change. A
   * row live at `now` keeps its create revision; returns the key's create revision after the set.
   */
  set(
    op: { key: string; now: number; actor?: WriteOp['actor'] },
    value: Entry['type'],
    data: Buffer,
    expiresAt: number | null,
    revision: number,
  ): number {
    const { key, now } = op;
    const before = this.row(key);
    const delta = this.setDelta(key, data);
    const createRevision = before && isLive(before, now) ? Number(before.create_revision) : revision;
    this.usage.keys += delta.keys;
    this.usage.bytes += delta.bytes;
    this.put(key, { type: value, value: data, expires_at: expiresAt, revision, create_revision: createRevision });
    this.changes.push({ key, kind: 'set', value: { type: value, data }, expiresAt, revision, createRevision, actor: op.actor });
    return createRevision;
  }

  /** Removes a key at `revision` (logged as `kind`); false (nothing logged) when it was not there. */
  remove(op: { key: string; actor?: WriteOp['actor'] }, revision: number, kind: Exclude<ChangeKind, 'set'> = 'delete'): boolean {
    const old = this.size(op.key);
    if (old === undefined) return false;
    this.usage.keys -= 1;
    this.usage.bytes -= old;
    this.put(op.key, undefined);
    this.changes.push({ key: op.key, kind, value: undefined, expiresAt: null, revision, createRevision: null, actor: op.actor });
    return true;
  }

  /**
   * Up to `limit` keys live at `now` under `prefix`: the view's, as this batch's earlier writes
   * left them (asked for enough extra keys to make up for the ones those writes removed).
   */
  liveKeys(prefix: string, now: number, limit: number): string[] {
    const mine = [...this.written].filter((key) => key.startsWith(prefix));
    if (mine.length === 0) return this.view.liveKeys(prefix, now, limit);
    const keys = new Set(this.view.liveKeys(prefix, now, limit + mine.length));
    for (const key of mine) {
      if (this.live(key, now)) keys.add(key);
      else keys.delete(key);
    }
    return [...keys].sort(compareKeys).slice(0, limit);
  }
}

/** Runs `ops` in order against `view`; see the module comment. */
export function applyBatch(view: WriteView, ops: readonly WriteOp[], quota: Quota): BatchResult {
  const batch = new BatchState(view, quota);
  const outcomes = ops.map((op): OpOutcome => {
    if (batch.revision === undefined) return { ok: true, value: NO_BUCKET };
    const mark = batch.mark();
    try {
      const outcome = run(batch, op);
      batch.settle();
      return outcome;
    } catch (error) {
      batch.rollback(mark);
      return { ok: false, error };
    }
  });
  return { outcomes, revision: batch.revision, usage: batch.usage, changes: batch.changes, operations: batch.operations };
}

function run(batch: BatchState, op: WriteOp): OpOutcome {
  switch (op.op) {
    case 'set':
      return { ok: true, value: set(batch, op) };
    case 'delete':
      return { ok: true, value: remove(batch, op) };
    case 'counter':
      return { ok: true, value: counter(batch, op) };
    case 'sweep':
      return { ok: true, value: sweep(batch, op) };
    case 'commit': {
      const value = commit(batch, op);
      return value === STALE ? { ok: false, stale: true } : { ok: true, value };
    }
    default:
      return unknownOp(op);
  }
}

/** Unreachable while every kind of write is handled above (the type says so). */
function unknownOp(op: never): never {
  throw new Error(`no rule for the write ${JSON.stringify(op)}`);
}

function set(batch: BatchState, op: SetOp): Written | Refusal {
  if (op.condition) {
    const current = batch.live(op.key, op.now);
    if (!conditionHolds(op.condition, current)) return { refused: 'precondition', current };
  }
  if (batch.quotaOn) batch.checkQuota(batch.setDelta(op.key, op.value.data));
  const revision = batch.next();
  batch.set(op, op.value.type, op.value.data, op.expiresAt, revision);
  return { revision };
}

function remove(batch: BatchState, op: DeleteOp): Deleted | Refusal {
  const current = batch.live(op.key, op.now);
  if (op.condition && !conditionHolds(op.condition, current)) return { refused: 'precondition', current };
  // An expired key is absent, as to every read: its delete is refused and writes nothing (its
  // expiry is the sweeper's to record, as the server's `expire`).
  if (current === undefined) return { deleted: false };
  const revision = batch.next();
  batch.remove(op, revision);
  return { deleted: current !== undefined, revision };
}

function counter(batch: BatchState, op: CounterOp): Entry | Refusal {
  const current = batch.live(op.key, op.now);
  if (op.condition && !conditionHolds(op.condition, current)) return { refused: 'precondition', current };
  const next = counterEntry(op, current);
  if (batch.quotaOn) batch.checkQuota(batch.setDelta(op.key, next.data));
  const revision = batch.next();
  const createRevision = batch.set(op, next.type, next.data, next.expiresAt, revision);
  batch.operations.push({ revision, operation: 'counter' });
  return { ...next, revision, createRevision };
}

/** The expiry sweep: every key of `op` still expired at `op.now` goes, at one revision; none, no revision. */
function sweep(batch: BatchState, op: SweepOp): { swept: number } {
  const expired = [...new Set(op.keys)].filter((key) => {
    const row = batch.row(key);
    return row !== undefined && !isLive(row, op.now);
  });
  if (expired.length === 0) return { swept: 0 };
  const revision = batch.next();
  for (const key of expired) batch.remove({ key, actor: op.actor }, revision, 'expire');
  return { swept: expired.length };
}

const STALE = Symbol('stale listing');

/** The keys under each prefix a transaction deletes, listed from the batch (bounded by prefixListing). */
function listPrefixes(batch: BatchState, prefixes: string[], now: number): Map<string, string[]> {
  if (prefixes.length === 0) return new Map();
  const listing = prefixListing(prefixes);
  for (let step = listing.next(); ; ) {
    if (step.done) return step.value;
    step = listing.next(batch.liveKeys(step.value.prefix, now, step.value.limit));
  }
}

function commit(batch: BatchState, op: CommitOp): CommitOutcome | typeof STALE {
  const { ops, now } = op;
  // A rollback commits only at the revision it was planned against.
  if (op.expectRevision !== undefined && batch.revision !== op.expectRevision) return { refused: 'moved' };
  // An engine's listing is exact only while nothing was written since it was made.
  if (op.listed && op.listed.at !== batch.revision) return STALE;
  const reads = readsOf(ops);
  const entries = new Map<string, Entry>();
  for (const key of reads.keys) {
    const entry = batch.live(key, now);
    if (entry) entries.set(key, entry);
  }
  const under = op.listed?.under ?? listPrefixes(batch, reads.prefixes, now);
  const resolved = resolveTransaction(ops, entries, under);
  if (resolved.failed.length > 0) return { refused: 'checks', failed: resolved.failed };
  const answer = (revision: number): CommitOutcome => (resolved.reports ? { revision, results: resolved.results } : { revision });
  // Checks and reads alone change nothing: no new revision.
  if (resolved.writes.length === 0) return answer(batch.revision!);
  // Writes are blind, so the outcome is the last write on each key; the quota counts the
  // transaction as a whole, from each final key's size before it (a set that a delete in the
  // same transaction makes room for passes).
  const final = lastWritePerKey(resolved.writes);
  if (batch.quotaOn) {
    const delta = { keys: 0, bytes: 0 };
    for (const write of final) {
      const change = write.op === 'set' ? batch.setDelta(write.key, write.value.data) : removeDelta(batch.liveSize(write.key, now));
      delta.keys += change.keys;
      delta.bytes += change.bytes;
    }
    batch.checkQuota(delta);
  }
  const revision = batch.next();
  for (const write of final) {
    const target = { key: write.key, now, actor: op.actor };
    if (write.op === 'set') batch.set(target, write.value.type, write.value.data, write.expiresAt, revision);
    // An expired key is absent: deleting it changes nothing (the sweeper records its expiry).
    else if (batch.live(write.key, now)) batch.remove(target, revision);
  }
  batch.operations.push({ revision, operation: op.operation ?? 'transaction' });
  return answer(revision);
}

const removeDelta = (old: number | undefined): Usage => (old === undefined ? { keys: 0, bytes: 0 } : { keys: -1, bytes: -old });
