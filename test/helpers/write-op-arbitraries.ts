import fc from 'fast-check';
import { expect } from 'vitest';
import type { MemoryBuckets } from '../../src/store/core/memory-view.js';
import type { OpOutcome, WriteOp } from '../../src/store/core/write-ops.js';
import type { Quota } from '../../src/store/quota.js';
import type { Condition, Store, TxnRequestOp } from '../../src/store/store.js';

/**
 * Random writes for the model-based tests (test/store/write-rules-model.test.ts and
 * sqlite-writer-rows.test.ts): a few keys, small values, a quota that bites, conditions on
 * small revisions, expiries already past, none, or later.
 */
export const NOW = 1_800_000_000_000;
export const QUOTA: Quota = { maxKeys: 4, maxBytes: 40 };
const KEYS = ['a', 'b', 'p/1', 'p/2', 'q'];

const key = fc.constantFrom(...KEYS);
const storedValue = fc.oneof(
  fc.string({ maxLength: 6 }).map((s) => ({ type: 'text' as const, data: Buffer.from(s) })),
  fc.integer({ min: -5, max: 5 }).map((n) => ({ type: 'int64' as const, data: Buffer.from(String(n)) })),
);
// Already expired, never, or later.
const expiresAt = fc.constantFrom(null, null, NOW - 1, NOW + 60_000);
const revisions = fc.array(fc.integer({ min: 1, max: 8 }), { minLength: 1, maxLength: 2 });
const condition: fc.Arbitrary<Condition | undefined> = fc.oneof(
  fc.constant(undefined),
  fc.constant(undefined),
  fc.record({ ifMatch: fc.oneof(fc.constant('*' as const), revisions) }),
  fc.record({ ifNoneMatch: fc.oneof(fc.constant('*' as const), revisions) }),
);
const txnOp: fc.Arbitrary<TxnRequestOp> = fc.oneof(
  fc.record({ op: fc.constant('set' as const), key, value: storedValue, expiresAt }),
  fc.record({ op: fc.constant('delete' as const), key }),
  fc.record({ op: fc.constant('check' as const), key, rev: fc.integer({ min: 1, max: 8 }) }),
  fc.record({ op: fc.constant('check' as const), key, exists: fc.boolean() }),
  fc.record({ op: fc.constant('get' as const), key }),
  fc.record({ op: fc.constant('expire' as const), key, expiresAt }),
  fc.record({ op: fc.constant('delete_prefix' as const), key: fc.constantFrom('p/', 'q') }),
);
/** A SET with no condition: with no quota set, a PostgreSQL batch of only these is one statement (setsFresh). */
const setFields = { op: fc.constant('set' as const), key, value: storedValue, expiresAt, now: fc.constant(NOW) };
export const plainSet: fc.Arbitrary<WriteOp> = fc.record(setFields);
export const writeOp: fc.Arbitrary<WriteOp> = fc.oneof(
  fc.record({ ...setFields, condition }),
  fc.record({ op: fc.constant('delete' as const), key, now: fc.constant(NOW), condition }),
  fc.record({
    op: fc.constant('counter' as const),
    key,
    delta: fc.bigInt({ min: -3n, max: 3n }).map((value) => ({ kind: 'int64' as const, value })),
    expiresAt,
    keepExpiry: fc.boolean(),
    now: fc.constant(NOW),
    condition,
  }),
  fc.record({
    op: fc.constant('commit' as const),
    // At most one prefix delete: overlapping ones are refused before a store sees them.
    ops: fc.array(txnOp, { minLength: 1, maxLength: 4 }).filter((ops) => ops.filter((o) => o.op === 'delete_prefix').length <= 1),
    now: fc.constant(NOW),
  }),
);

/** One write through the store's interface, its outcome in the rules' shape (errors by kind). */
export async function storeWrite(store: Store, bucket: string, op: WriteOp): Promise<unknown> {
  try {
    return await store.write(bucket, op);
  } catch (error) {
    return { error: (error as { kind?: string }).kind ?? String(error) };
  }
}

/** A model outcome in the shape storeWrite gives. */
export const modelOutcome = (outcome: OpOutcome) =>
  outcome.ok ? outcome.value : { error: 'error' in outcome ? (outcome.error as { kind?: string }).kind : 'stale' };

/** The store's bucket is the model's: revision, usage, and every live key's value, expiry and revisions. */
export async function expectSameBucket(store: Store, model: MemoryBuckets, bucket: string): Promise<void> {
  const state = model.buckets.get(bucket)!;
  expect(await store.buckets.revision(bucket)).toBe(state.revision);
  expect(await store.buckets.usage(bucket)).toEqual(state.usage);
  const listed = await store.listEntries(bucket, { prefix: '', reverse: false, columns: 'values', offset: 0, limit: 100 }, NOW);
  const live = [...state.rows]
    .filter(([, row]) => row.expires_at === null || row.expires_at > NOW)
    .sort(([a], [b]) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  expect(
    listed.map(({ key: k, entry }) => [k, entry!.type, entry!.data.toString(), entry!.expiresAt, entry!.revision, entry!.createRevision]),
  ).toEqual(live.map(([k, row]) => [k, row.type, row.value.toString(), row.expires_at, row.revision, row.create_revision]));
}
