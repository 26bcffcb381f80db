/**
 * The store's writes as the tests call them, one line each: each builds its write op
 * (src/store/core/write-ops.ts) and hands it to `Store.write`, the one write entry point.
 */
import type { CommitOp, CounterUpdate } from '../../src/store/core/write-ops.js';
import type { Actor } from '../../src/store/history-types.js';
import type { Condition, Store, TxnRequestOp } from '../../src/store/store.js';
import type { StoredValue } from '../../src/values/stored-value.js';

export function setEntry(
  store: Store,
  bucket: string,
  key: string,
  value: StoredValue,
  expiresAt: number | null,
  now: number,
  condition?: Condition,
  actor?: Actor,
) {
  return store.write(bucket, { op: 'set', key, value, expiresAt, now, condition, actor });
}

export function deleteEntry(store: Store, bucket: string, key: string, now: number, condition?: Condition, actor?: Actor) {
  return store.write(bucket, { op: 'delete', key, now, condition, actor });
}

/** A counter write: `update` says what it adds and how it sets the expiry. */
export function updateEntry(
  store: Store,
  bucket: string,
  key: string,
  now: number,
  update: CounterUpdate,
  condition?: Condition,
  actor?: Actor,
) {
  return store.write(bucket, { ...update, key, now, condition, actor });
}

/** A transaction (or, with `operation: 'rollback'`, a rollback) of `ops` at one revision. */
export function commit(
  store: Store,
  bucket: string,
  ops: TxnRequestOp[],
  now: number,
  options: Pick<CommitOp, 'expectRevision' | 'operation' | 'actor'> = {},
) {
  return store.write(bucket, { op: 'commit', ops, now, ...options });
}
