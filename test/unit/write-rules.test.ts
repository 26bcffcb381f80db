import { describe, expect, it } from 'vitest';
import { KvbError } from '../../src/errors.js';
import { applyBatch } from '../../src/store/core/apply-batch.js';
import { MemoryBuckets, memoryView } from '../../src/store/core/memory-view.js';
import { checkPrefixDeletes } from '../../src/store/core/txn-resolution.js';
import { MAX_PREFIX_DELETE_KEYS } from '../../src/limits.js';
import type { CommitOp, CounterOp, OpOutcome, SetOp, WriteOp } from '../../src/store/core/write-ops.js';
import type { WriteView } from '../../src/store/core/write-view.js';
import type { Quota } from '../../src/store/quota.js';
import { SERVER_ACTOR } from '../../src/store/history-types.js';

/** The write rules (src/store/core) over buckets in memory: no server, no database. */
const NOW = 1_800_000_000_000;
const text = (data: string) => ({ type: 'text' as const, data: Buffer.from(data) });
const set = (key: string, data: string, extra: Partial<SetOp> = {}): SetOp => ({
  op: 'set',
  key,
  value: text(data),
  expiresAt: null,
  now: NOW,
  ...extra,
});
const counter = (key: string, n: number | bigint, extra: Partial<CounterOp> = {}): CounterOp => ({
  op: 'counter',
  key,
  delta: { kind: 'int64', value: BigInt(n) },
  expiresAt: null,
  keepExpiry: true,
  now: NOW,
  ...extra,
});
const commit = (ops: CommitOp['ops'], extra: Partial<CommitOp> = {}): CommitOp => ({ op: 'commit', ops, now: NOW, ...extra });

function buckets(quota?: Quota) {
  const memory = new MemoryBuckets(quota);
  memory.createBucket('b');
  return memory;
}
const value = (outcome: OpOutcome) => {
  if (!outcome.ok) throw new Error(`failed: ${'error' in outcome ? String(outcome.error) : 'stale'}`);
  return outcome.value;
};
const one = (memory: MemoryBuckets, op: WriteOp) => memory.write('b', [op])[0]!;
const errorOf = (outcome: OpOutcome) => {
  if (outcome.ok || !('error' in outcome)) throw new Error(`expected an error, got ${JSON.stringify(outcome)}`);
  return outcome.error as KvbError;
};

describe('write rules: revisions and change rows', () => {
  it('gives each committed write the next revision and one change row per changed key, in order, with its actor', () => {
    const memory = buckets();
    const actor = { kind: 'write' as const, address: '10.0.0.1' };
    const outcomes = memory.write('b', [set('a', '1', { actor }), set('b', '2'), { op: 'delete', key: 'a', now: NOW }, counter('n', 5)]);
    expect(outcomes.map(value)).toEqual([
      { revision: 1 },
      { revision: 2 },
      { deleted: true, revision: 3 },
      expect.objectContaining({ revision: 4, createRevision: 4 }),
    ]);
    const bucket = memory.buckets.get('b')!;
    expect(bucket.revision).toBe(4);
    expect(bucket.changes.map((c) => [c.revision, c.key, c.kind])).toEqual([
      [1, 'a', 'set'],
      [2, 'b', 'set'],
      [3, 'a', 'delete'],
      [4, 'n', 'set'],
    ]);
    expect(bucket.changes[0]!.actor).toEqual(actor);
    expect(bucket.usage).toEqual({ keys: 2, bytes: 'b2'.length + 'n5'.length });
  });

  it('records what made a revision that is not a plain set or delete', () => {
    const memory = buckets();
    const view = memoryView(memory.buckets.get('b'));
    const result = applyBatch(
      view,
      [
        set('a', '1'),
        counter('n', 1),
        commit([{ op: 'set', key: 'x', value: text('y'), expiresAt: null }]),
        commit([{ op: 'delete', key: 'x' }], { operation: 'rollback' }),
      ],
      { maxKeys: 0, maxBytes: 0 },
    );
    expect(result.operations).toEqual([
      { revision: 2, operation: 'counter' },
      { revision: 3, operation: 'transaction' },
      { revision: 4, operation: 'rollback' },
    ]);
    // Pure: the view's bucket is untouched until the result is persisted.
    expect(memory.buckets.get('b')!.revision).toBe(0);
  });

  it("keeps a live key's create revision; a key that expired is created afresh; an expired key's delete answers not deleted and writes nothing", () => {
    const memory = buckets();
    value(one(memory, set('k', '1')));
    value(one(memory, set('k', '2')));
    expect(memory.buckets.get('b')!.rows.get('k')!.create_revision).toBe(1);
    value(one(memory, set('gone', 'x', { expiresAt: NOW - 1, now: NOW - 10 })));
    expect(value(one(memory, counter('gone', 1)))).toMatchObject({ revision: 4, createRevision: 4, data: Buffer.from('1') });
    value(one(memory, set('old', 'x', { expiresAt: NOW - 1, now: NOW - 10 })));
    const bucket = memory.buckets.get('b')!;
    const before = { changes: [...bucket.changes], usage: { ...bucket.usage }, row: bucket.rows.get('old') };
    expect(value(one(memory, { op: 'delete', key: 'old', now: NOW }))).toEqual({ deleted: false });
    expect(value(one(memory, { op: 'delete', key: 'old', now: NOW, condition: { ifNoneMatch: '*' } }))).toEqual({
      deleted: false,
    });
    expect(value(one(memory, { op: 'delete', key: 'never', now: NOW }))).toEqual({ deleted: false });
    // A transaction's delete of it changes nothing but the transaction's own revision.
    expect(value(one(memory, commit([{ op: 'delete', key: 'old' }])))).toEqual({ revision: 6 });
    expect(bucket.changes).toEqual(before.changes);
    expect(bucket.usage).toEqual(before.usage);
    expect(bucket.rows.get('old')).toBe(before.row);
    // The sweep then records the expiry, as the server's.
    expect(value(one(memory, { op: 'sweep', keys: ['old'], now: NOW, actor: SERVER_ACTOR }))).toEqual({ swept: 1 });
    expect(bucket.changes.at(-1)).toMatchObject({ key: 'old', kind: 'expire', revision: 7, actor: SERVER_ACTOR });
  });

  it("a counter keeps a live key's expiry unless told otherwise; a key it creates gets the given one", () => {
    const memory = buckets();
    expect(value(one(memory, counter('n', 1, { expiresAt: NOW + 5 })))).toMatchObject({ expiresAt: NOW + 5 });
    expect(value(one(memory, counter('n', 1, { expiresAt: NOW + 9 })))).toMatchObject({ expiresAt: NOW + 5, data: Buffer.from('2') });
    expect(value(one(memory, counter('n', 1, { expiresAt: null, keepExpiry: false })))).toMatchObject({
      expiresAt: null,
      data: Buffer.from('3'),
    });
  });

  it('the sweep removes the keys still expired at one revision, as expire rows by the server; keys written meanwhile stay', () => {
    const memory = buckets();
    value(one(memory, set('e1', 'x', { expiresAt: NOW - 1, now: NOW - 10 })));
    value(one(memory, set('e2', 'xy', { expiresAt: NOW, now: NOW - 10 })));
    value(one(memory, set('live', 'x', { expiresAt: NOW + 1 })));
    // Found expired by the sweeper, then written again before its write ran.
    value(one(memory, set('renewed', 'x', { expiresAt: NOW + 60_000 })));
    const swept = one(memory, { op: 'sweep', keys: ['e1', 'e2', 'e1', 'live', 'renewed', 'absent'], now: NOW, actor: SERVER_ACTOR });
    expect(value(swept)).toEqual({ swept: 2 });
    const bucket = memory.buckets.get('b')!;
    expect(bucket.revision).toBe(5);
    expect(bucket.changes.slice(-2).map((c) => [c.revision, c.key, c.kind, c.actor])).toEqual([
      [5, 'e1', 'expire', SERVER_ACTOR],
      [5, 'e2', 'expire', SERVER_ACTOR],
    ]);
    expect([...bucket.rows.keys()].sort()).toEqual(['live', 'renewed']);
    expect(bucket.usage).toEqual({ keys: 2, bytes: 'livex'.length + 'renewedx'.length });
    // Nothing left to sweep: no revision.
    expect(value(one(memory, { op: 'sweep', keys: ['e1', 'live'], now: NOW }))).toEqual({ swept: 0 });
    expect(bucket.revision).toBe(5);
  });

  it("a transaction's prefix delete sees the batch's earlier writes", () => {
    const memory = buckets();
    memory.write('b', [set('p/1', 'x'), set('p/2', 'x')]);
    const outcomes = memory.write('b', [
      set('p/3', 'x'),
      { op: 'delete', key: 'p/1', now: NOW },
      commit([{ op: 'delete_prefix', key: 'p/' }]),
    ]);
    expect(value(outcomes[2]!)).toEqual({ revision: 5, results: [{ op: 'delete_prefix', deleted: 2 }] });
    expect([...memory.buckets.get('b')!.rows.keys()]).toEqual([]);
  });
});

describe('write rules: every refusal and error', () => {
  it('no bucket: every write is refused and nothing is made', () => {
    const memory = buckets();
    const ops: WriteOp[] = [set('a', '1'), { op: 'delete', key: 'a', now: NOW }, counter('n', 1), commit([{ op: 'get', key: 'a' }])];
    expect(memory.write('gone', ops).map(value)).toEqual(ops.map(() => ({ refused: 'no_bucket' })));
  });

  it("a failed precondition refuses with the key's live entry and changes nothing", () => {
    const memory = buckets();
    value(one(memory, set('k', 'v')));
    expect(value(one(memory, set('k', 'w', { condition: { ifNoneMatch: '*' } })))).toMatchObject({
      refused: 'precondition',
      current: { revision: 1 },
    });
    expect(value(one(memory, set('k', 'w', { condition: { ifMatch: [7] } })))).toMatchObject({
      refused: 'precondition',
      current: { revision: 1 },
    });
    expect(value(one(memory, { op: 'delete', key: 'k', now: NOW, condition: { ifNoneMatch: [1] } }))).toMatchObject({
      refused: 'precondition',
    });
    expect(value(one(memory, counter('absent', 1, { condition: { ifMatch: '*' } })))).toEqual({
      refused: 'precondition',
      current: undefined,
    });
    expect(value(one(memory, set('k', 'w', { condition: { ifMatch: [1], ifNoneMatch: [2] } })))).toEqual({ revision: 2 });
    expect(memory.buckets.get('b')!.changes).toHaveLength(2);
  });

  it('refuses (507) growth over the key or byte quota, in a set, a counter and a transaction as a whole; shrinking always passes', () => {
    const memory = buckets({ maxKeys: 2, maxBytes: 10 });
    value(one(memory, set('a', '1')));
    value(one(memory, set('b', '1')));
    for (const op of [set('c', '1'), counter('c', 1), commit([{ op: 'set', key: 'c', value: text('1'), expiresAt: null }])]) {
      const error = errorOf(one(memory, op));
      expect(error).toBeInstanceOf(KvbError);
      expect([error.kind, error.status]).toEqual(['insufficient_storage', 507]);
      expect(error.detail).toContain('quota of 2 keys');
    }
    expect(errorOf(one(memory, set('a', '123456789'))).detail).toContain('quota of 10 bytes');
    // A delete in the same transaction makes room.
    expect(
      value(
        one(
          memory,
          commit([
            { op: 'delete', key: 'a' },
            { op: 'set', key: 'c', value: text('1'), expiresAt: null },
          ]),
        ),
      ),
    ).toEqual({ revision: 3 });
    const lowered = new MemoryBuckets({ maxKeys: 1, maxBytes: 1 });
    lowered.buckets.set('b', memory.buckets.get('b')!);
    expect(value(lowered.write('b', [set('b', '')])[0]!)).toEqual({ revision: 4 });
    expect(memory.buckets.get('b')!.usage).toEqual({ keys: 2, bytes: 3 });
  });

  it('a counter that cannot add is a 400 and writes nothing', () => {
    const memory = buckets();
    value(one(memory, set('t', 'x')));
    value(
      one(memory, { op: 'set', key: 'max', value: { type: 'int64', data: Buffer.from('9223372036854775807') }, expiresAt: null, now: NOW }),
    );
    value(one(memory, { op: 'set', key: 'f', value: { type: 'float64', data: Buffer.from('1.7e308') }, expiresAt: null, now: NOW }));
    expect(errorOf(one(memory, counter('t', 1))).detail).toBe('stored value is text, not a number');
    expect(errorOf(one(memory, counter('max', 1))).detail).toBe('counter overflows Int64');
    expect(errorOf(one(memory, counter('f', 1, { delta: { kind: 'float64', value: 1.7e308 } }))).detail).toBe(
      'counter result is not a finite number',
    );
    expect(memory.buckets.get('b')!.revision).toBe(3);
  });

  it("a transaction's failed checks and expires are named; a moved rollback and a stale listing are refused; nothing is written", () => {
    const memory = buckets();
    value(one(memory, set('k', 'v')));
    const checks = commit([
      { op: 'check', key: 'k', rev: 1 },
      { op: 'check', key: 'k', rev: 2 },
      { op: 'check', key: 'absent', exists: true },
      { op: 'check', key: 'k', created: 9 },
      { op: 'expire', key: 'absent', expiresAt: null },
      { op: 'set', key: 'x', value: text('1'), expiresAt: null },
    ]);
    expect(value(one(memory, checks))).toEqual({ refused: 'checks', failed: [1, 2, 3, 4] });
    expect(value(one(memory, commit([{ op: 'delete', key: 'k' }], { expectRevision: 0 })))).toEqual({ refused: 'moved' });
    expect(one(memory, commit([{ op: 'delete_prefix', key: '' }], { listed: { at: 0, under: new Map([['', ['k']]]) } }))).toEqual({
      ok: false,
      stale: true,
    });
    expect(memory.buckets.get('b')!.revision).toBe(1);
  });

  it('refuses (400) prefix deletes of more keys than one transaction may delete, and overlapping prefixes', () => {
    const many = Array.from({ length: MAX_PREFIX_DELETE_KEYS + 1 }, (_, i) => `p/${i}`);
    const view: WriteView = {
      revision: 1,
      usage: () => ({ keys: 0, bytes: 0 }),
      row: () => undefined,
      liveKeys: (_prefix, _now, limit) => many.slice(0, limit),
    };
    const [outcome] = applyBatch(view, [commit([{ op: 'delete_prefix', key: 'p/' }])], { maxKeys: 0, maxBytes: 0 }).outcomes;
    expect([errorOf(outcome!).kind, errorOf(outcome!).status]).toEqual(['bad_request', 400]);
    expect(errorOf(outcome!).detail).toContain(`more than ${MAX_PREFIX_DELETE_KEYS} keys`);
    expect(() =>
      checkPrefixDeletes([
        { op: 'delete_prefix', key: 'a/' },
        { op: 'delete_prefix', key: 'a/b' },
      ]),
    ).toThrow(/overlaps/);
  });

  it('a write that fails leaves the batch as it was: the next write sees nothing of it', () => {
    const memory = buckets({ maxKeys: 1, maxBytes: 0 });
    const outcomes = memory.write('b', [set('a', '1'), set('b', '1'), counter('a', 1), set('a', '2', { condition: { ifMatch: [1] } })]);
    expect(outcomes.map((o) => (o.ok ? o.value : 'failed'))).toEqual([{ revision: 1 }, 'failed', 'failed', { revision: 2 }]);
    expect(memory.buckets.get('b')!.changes.map((c) => c.revision)).toEqual([1, 2]);
  });

  it('a write that throws midway (a transaction whose last set cannot be sized), with no quota to check first, leaves nothing behind', () => {
    const memory = buckets();
    one(memory, set('keep', 'before'));
    const broken = { op: 'set' as const, key: 'bad', value: { type: 'text' as const, data: null as unknown as Buffer }, expiresAt: null };
    const txn = commit([
      { op: 'set', key: 'keep', value: text('after'), expiresAt: null },
      { op: 'set', key: 'new', value: text('x'), expiresAt: null },
      broken,
    ]);
    const outcomes = memory.write('b', [
      set('a', '1'),
      txn,
      set('new', 'y', { condition: { ifNoneMatch: '*' } }),
      commit([{ op: 'delete_prefix', key: 'n' }]),
    ]);
    expect(outcomes.map((o) => (o.ok ? o.value : 'failed'))).toEqual([
      { revision: 2 },
      'failed',
      { revision: 3 },
      { revision: 4, results: [{ op: 'delete_prefix', deleted: 1 }] },
    ]);
    const state = memory.buckets.get('b')!;
    expect(state.changes.map((c) => [c.revision, c.key, c.kind])).toEqual([
      [1, 'keep', 'set'],
      [2, 'a', 'set'],
      [3, 'new', 'set'],
      [4, 'new', 'delete'],
    ]);
    expect(state.rows.get('keep')!.value.toString()).toBe('before');
    expect(state.usage).toEqual({ keys: 2, bytes: 'keep'.length + 'before'.length + 'a'.length + 1 });
  });
});
