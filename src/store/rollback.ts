import type { StoredValue } from '../values/stored-value.js';
import type { Actor, PastRead } from './history-types.js';
import type { ChangeLogBounds, Entry, ListedEntry, Store, TxnOp } from './store.js';
import { timeSlicer } from './time-slicer.js';
import { compareKeys } from '../values/key-order.js';

/** Most keys one rollback may change: it commits as one transaction, whose values are held in memory while it is planned. */
export const MAX_ROLLBACK_CHANGES = 10_000;
/**
 * Rows read per page while comparing the two states. Small, because the event loop gets its turn
 * only between pages (timeSlicer): 500 rows of a past state were one block of up to ~100 ms on a
 * loaded 2-core machine, times the concurrent rollbacks.
 */
const PAGE = 100;
/** Times a rollback is planned again when the bucket moved between planning and committing. */
const ATTEMPTS = 5;

/** One key a rollback changes: its value then and now (absent: undefined). */
export interface RollbackChange {
  key: string;
  from?: Entry;
  to?: StoredValue & { expiresAt: number | null };
}

export type RollbackPlan = { from: number; to: number; changes: RollbackChange[] };

export type RollbackOutcome =
  | { outcome: 'ok'; plan: RollbackPlan; revision: number }
  | { outcome: 'too_large'; bounds: ChangeLogBounds }
  | { outcome: 'moved' }
  | Exclude<PastRead<never>, { outcome: 'ok' }>;

const sameEntry = (a: Entry, b: Entry) => a.type === b.type && a.expiresAt === b.expiresAt && a.data.equals(b.data);

/** Every live key of the bucket under `prefix` at `revision`, page by page, in key order. */
async function* stateAt(
  store: Store,
  bucket: string,
  prefix: string,
  revision: number,
  now: number,
  slice: () => Promise<void>,
): AsyncGenerator<ListedEntry, void> {
  let after: string | undefined;
  for (;;) {
    // Between pages, other requests get their turn (see timeSlicer).
    await slice();
    const page = await store.history.listAt(
      bucket,
      { prefix, reverse: false, columns: 'values', offset: 0, limit: PAGE, ...(after !== undefined && { after }) },
      revision,
    );
    if (page.outcome !== 'ok') throw new PastReadFailed(page);
    // A value that has expired by now cannot be brought back: it counts as absent.
    for (const row of page.value) if (row.entry!.expiresAt === null || row.entry!.expiresAt > now) yield row;
    if (page.value.length < PAGE) return;
    after = page.value[page.value.length - 1]!.key;
  }
}

class PastReadFailed extends Error {
  constructor(readonly read: Exclude<PastRead<never>, { outcome: 'ok' }>) {
    super(read.outcome);
  }
}

/**
 * What a rollback of `prefix` to `target` would change, against the bucket as of its current
 * revision: both states read from history (immutable once committed), merged in key order.
 */
export async function planRollback(
  store: Store,
  bucket: string,
  target: number,
  prefix: string,
  now: number,
): Promise<{ outcome: 'ok'; plan: RollbackPlan } | Exclude<RollbackOutcome, { outcome: 'ok' }>> {
  const bounds = await store.changes.bounds(bucket);
  if (!bounds) return { outcome: 'no_bucket' };
  if (target > bounds.revision) return { outcome: 'future', bounds };
  if (target < bounds.floor) return { outcome: 'below_floor', bounds };
  const current = bounds.revision;
  const changes: RollbackChange[] = [];
  try {
    const slice = timeSlicer();
    const then = stateAt(store, bucket, prefix, target, now, slice);
    const nowState = stateAt(store, bucket, prefix, current, now, slice);
    let a = await then.next();
    let b = await nowState.next();
    while (!a.done || !b.done) {
      const order = a.done ? 1 : b.done ? -1 : compareKeys(a.value.key, b.value.key);
      if (order < 0) {
        const { key, entry } = a.value as ListedEntry;
        changes.push({ key, to: { type: entry!.type, data: entry!.data, expiresAt: entry!.expiresAt } });
        a = await then.next();
      } else if (order > 0) {
        const { key, entry } = b.value as ListedEntry;
        changes.push({ key, from: entry! });
        b = await nowState.next();
      } else {
        const was = (a.value as ListedEntry).entry!;
        const is = (b.value as ListedEntry).entry!;
        if (!sameEntry(was, is))
          changes.push({ key: (a.value as ListedEntry).key, from: is, to: { type: was.type, data: was.data, expiresAt: was.expiresAt } });
        a = await then.next();
        b = await nowState.next();
      }
      if (changes.length > MAX_ROLLBACK_CHANGES) return { outcome: 'too_large', bounds };
    }
  } catch (err) {
    if (err instanceof PastReadFailed) return err.read;
    throw err;
  }
  return { outcome: 'ok', plan: { from: current, to: target, changes } };
}

/**
 * Makes the bucket (or `prefix`) equal to its state at `target` as ONE new revision, through the
 * store's transaction: all or nothing, counted against quotas, seen by watchers as the sets and
 * deletes it makes, recorded in history as a rollback. It commits only if the bucket is still at
 * the revision it was planned against, and is planned again (a few times) when it is not.
 */
export async function rollback(
  store: Store,
  bucket: string,
  target: number,
  prefix: string,
  now: number,
  actor?: Actor,
): Promise<RollbackOutcome> {
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const planned = await planRollback(store, bucket, target, prefix, now);
    if (planned.outcome !== 'ok') return planned;
    const { plan } = planned;
    // Nothing differs: no new revision.
    if (plan.changes.length === 0) return { outcome: 'ok', plan, revision: plan.from };
    const ops: TxnOp[] = plan.changes.map(({ key, to }) =>
      to ? { op: 'set', key, value: { type: to.type, data: to.data }, expiresAt: to.expiresAt } : { op: 'delete', key },
    );
    const committed = await store.write(bucket, { op: 'commit', ops, now, expectRevision: plan.from, operation: 'rollback', actor });
    if ('revision' in committed) return { outcome: 'ok', plan, revision: committed.revision };
    if (committed.refused === 'no_bucket') return { outcome: 'no_bucket' };
    if (committed.refused !== 'moved') throw new Error(`rollback refused: ${committed.refused}`);
  }
  return { outcome: 'moved' };
}
