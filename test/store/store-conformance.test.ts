import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BucketRecord, type Entry, type Refusal, type Store, type TxnOp, isRefusal } from '../../src/store/store.js';
import type { StoredValue } from '../../src/values/stored-value.js';
import type { ValueType } from '../../src/values/value-type.js';
import { type StoreBackend, addCounter, describeEachBackend, openTestStore } from '../helpers/store-backends.js';
import { createRevisionCases } from './create-revision-cases.js';
import { setEntry, deleteEntry, updateEntry, commit } from '../helpers/store-writes.js';

const NOW = 1_800_000_000_000;
/** The entry a counter update answered (failing the test if it was refused). */
function entryOf(outcome: Entry | Refusal): Entry {
  if (isRefusal(outcome)) throw new Error(`refused: ${JSON.stringify(outcome)}`);
  return outcome;
}
const value = (type: ValueType, data: string | Buffer): StoredValue => ({ type, data: Buffer.isBuffer(data) ? data : Buffer.from(data) });
const bytewise = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));
const listAll = (store: Store, bucket: string, prefix = '', extra: Partial<Parameters<Store['listEntries']>[1]> = {}) =>
  store
    .listEntries(bucket, { prefix, reverse: false, columns: 'keys', offset: 0, limit: 1000, ...extra }, NOW)
    .then((rows) => rows.map((r) => r.key));

function bucketRecord(id: string): BucketRecord {
  return {
    id,
    email: 'store@test',
    secretKeyHash: 'hash-s',
    readKeyHash: null,
    writeKeyHash: null,
    signingKey: 'sign-1',
    signingKeyGeneration: 0,
    tokenSalt: 'salt-1',
    defaultTtl: 0,
  };
}

/**
 * One suite for every Store implementation, run directly (no HTTP), on every backend in one run
 * (see store-backends.ts). All must give byte-identical answers.
 */
describeEachBackend('store conformance', conformance);

function conformance(backend: StoreBackend, url: string) {
  let store: Store;
  let cleanup: () => Promise<void>;
  let n = 0;
  /** A fresh bucket per test, so tests never see each other's keys. */
  const newBucket = async () => {
    const id = `bucket-${++n}`;
    await store.buckets.create(bucketRecord(id));
    return id;
  };

  beforeAll(async () => {
    ({ store, cleanup } = await openTestStore(backend, url, {
      prefix: 'kvb_store',
      poolSize: 8,
      // The suite runs again with write batching off when asked (KVB_PG_BATCH_WRITES=off, as servers read it).
      pgBatchWrites: process.env.KVB_PG_BATCH_WRITES !== 'off',
    }));
  });
  afterAll(async () => {
    await store?.close();
    await cleanup?.();
  });

  it('names its backend and whether it is shared between instances', () => {
    expect(store.flags.backend).toBe(backend === 'sqlite' ? 'sqlite' : 'postgres');
    expect(store.flags.shared).toBe(backend !== 'sqlite');
    if (backend === 'pgbouncer') expect(store.flags.capabilities).toContain('named prepared statements not used (auto:');
    if (backend === 'postgres') expect(store.flags.capabilities).toContain('named prepared statements used (auto: no pooler seen)');
  });

  describe('buckets', () => {
    it('creates, reads, changes and deletes a bucket; rotation bumps the signing key generation', async () => {
      const before = await store.buckets.count();
      const id = await newBucket();
      expect(await store.buckets.count()).toBe(before + 1);
      expect(await store.buckets.get(id)).toEqual(bucketRecord(id));
      expect(await store.buckets.update(id, { signingKey: 'sign-2', tokenSalt: 'salt-2', readKeyHash: 'hash-r', defaultTtl: 60 })).toBe(
        true,
      );
      expect(await store.buckets.get(id)).toMatchObject({
        signingKey: 'sign-2',
        signingKeyGeneration: 1,
        tokenSalt: 'salt-2',
        readKeyHash: 'hash-r',
        defaultTtl: 60,
      });
      expect(await store.buckets.update(id, { signingKey: null })).toBe(true);
      expect(await store.buckets.get(id)).toMatchObject({ signingKey: null, signingKeyGeneration: 2 });
      expect(await store.buckets.update('no-such-bucket', { defaultTtl: 1 })).toBe(false);
      await setEntry(store, id, 'k', value('text', 'v'), null, NOW);
      expect(await store.buckets.delete(id)).toBe(true);
      expect(await store.buckets.get(id)).toBeUndefined();
      expect(await store.getEntry(id, 'k', NOW)).toBeUndefined();
      expect(await store.buckets.delete(id)).toBe(false);
    });

    it('a signing key may hold NUL and any character; an id with NUL is simply not found', async () => {
      const id = `bucket-${++n}`;
      const signingKey = 'a\u0000b é 😀';
      await store.buckets.create({ ...bucketRecord(id), signingKey });
      expect((await store.buckets.get(id))?.signingKey).toBe(signingKey);
      expect(await store.buckets.update(id, { signingKey: '\u0000' })).toBe(true);
      expect((await store.buckets.get(id))?.signingKey).toBe('\u0000');
      expect(await store.buckets.get(`${id}\u0000`)).toBeUndefined();
      expect(await store.buckets.update(`${id}\u0000`, { defaultTtl: 1 })).toBe(false);
      expect(await store.buckets.delete(`${id}\u0000`)).toBe(false);
    });
  });

  describe('values round-trip exactly', () => {
    it('Int64 extremes and float text keep every digit', async () => {
      const b = await newBucket();
      for (const text of ['9223372036854775807', '-9223372036854775808', '9007199254740993', '0']) {
        await setEntry(store, b, `i${text}`, value('int64', text), null, NOW);
        expect((await store.getEntry(b, `i${text}`, NOW))?.data.toString()).toBe(text);
      }
      await setEntry(store, b, 'f', value('float64', '0.30000000000000004'), null, NOW);
      expect(await store.getEntry(b, 'f', NOW)).toMatchObject({
        type: 'float64',
        data: Buffer.from('0.30000000000000004'),
        expiresAt: null,
      });
    });

    it('bytes with NUL and invalid UTF-8 come back byte for byte', async () => {
      const b = await newBucket();
      const data = Buffer.from([0x00, 0xff, 0xfe, 0x80, 0x00, 0xc3, 0x28, 0x00]);
      await setEntry(store, b, 'bin', value('bytes', data), null, NOW);
      const entry = await store.getEntry(b, 'bin', NOW);
      expect(entry?.type).toBe('bytes');
      expect(Buffer.compare(entry!.data, data)).toBe(0);
      await setEntry(store, b, 'empty', value('bytes', Buffer.alloc(0)), null, NOW);
      expect((await store.getEntry(b, 'empty', NOW))?.data.length).toBe(0);
    });

    it('expiry times in milliseconds are exact, up to the largest date', async () => {
      const b = await newBucket();
      const far = 8_640_000_000_000_000;
      await setEntry(store, b, 'far', value('text', 'x'), far, NOW);
      expect((await store.getEntry(b, 'far', NOW))?.expiresAt).toBe(far);
      await setEntry(store, b, 'odd', value('text', 'x'), NOW + 1_234_567, NOW);
      expect((await store.getEntry(b, 'odd', NOW))?.expiresAt).toBe(NOW + 1_234_567);
    });

    it('keys with NUL, multibyte characters and the highest code point are distinct keys', async () => {
      const b = await newBucket();
      const keys = ['a', 'a\u0000', 'a\u0000b', 'é', '\u{10FFFF}', '😀'];
      for (const key of keys) await setEntry(store, b, key, value('text', `v:${key}`), null, NOW);
      for (const key of keys) expect((await store.getEntry(b, key, NOW))?.data.toString()).toBe(`v:${key}`);
    });
  });

  describe('listing', () => {
    const keys = [
      'b',
      'a',
      'A',
      'a\u0000',
      'ab',
      'aa',
      'ab\u0000',
      'abc',
      'ac',
      'é',
      'e',
      'z',
      '€',
      '😀',
      '\u{10FFFF}',
      '\u{10FFFF}a',
      '\u007f',
      '~',
    ];
    let bucket: string;
    beforeAll(async () => {
      bucket = await newBucket();
      for (const key of keys) await setEntry(store, bucket, key, value('text', key), null, NOW);
    });

    it('lists keys in UTF-8 byte order (not collation order)', async () => {
      expect(await listAll(store, bucket)).toEqual([...keys].sort(bytewise));
      expect(await listAll(store, bucket, '', { reverse: true })).toEqual([...keys].sort(bytewise).reverse());
    });

    it('a prefix matches exactly the keys that start with its bytes', async () => {
      expect(await listAll(store, bucket, 'ab')).toEqual(['ab', 'ab\u0000', 'abc']);
      expect(await listAll(store, bucket, 'a')).toEqual(['a', 'a\u0000', 'aa', 'ab', 'ab\u0000', 'abc', 'ac']);
      expect(await listAll(store, bucket, '\u{10FFFF}')).toEqual(['\u{10FFFF}', '\u{10FFFF}a']);
      expect(await listAll(store, bucket, 'é')).toEqual(['é']);
      expect(await listAll(store, bucket, 'zz')).toEqual([]);
    });

    it('pages with limit, offset and after, in both directions', async () => {
      const sorted = [...keys].sort(bytewise);
      expect(await listAll(store, bucket, '', { limit: 3 })).toEqual(sorted.slice(0, 3));
      expect(await listAll(store, bucket, '', { limit: 3, offset: 2 })).toEqual(sorted.slice(2, 5));
      expect(await listAll(store, bucket, '', { after: 'ab' })).toEqual(sorted.slice(sorted.indexOf('ab') + 1));
      expect(await listAll(store, bucket, 'a', { after: 'ab', reverse: true })).toEqual(['aa', 'a\u0000', 'a']);
    });

    it('returns values with the keys when asked', async () => {
      const rows = await store.listEntries(bucket, { prefix: 'ab', reverse: false, columns: 'values', offset: 0, limit: 10 }, NOW);
      expect(rows.map((r) => [r.key, r.entry?.data.toString(), r.entry?.type])).toEqual([
        ['ab', 'ab', 'text'],
        ['ab\u0000', 'ab\u0000', 'text'],
        ['abc', 'abc', 'text'],
      ]);
    });
  });

  describe('expiry', () => {
    it('an expired key is absent to every read, and the sweep deletes it', async () => {
      const b = await newBucket();
      await setEntry(store, b, 'old', value('text', 'x'), NOW, NOW);
      await setEntry(store, b, 'live', value('text', 'x'), NOW + 1, NOW);
      await setEntry(store, b, 'forever', value('text', 'x'), null, NOW);
      expect(await store.getEntry(b, 'old', NOW)).toBeUndefined();
      expect(await listAll(store, b)).toEqual(['forever', 'live']);
      expect(await deleteEntry(store, b, 'old', NOW)).toMatchObject({ deleted: false });
      await setEntry(store, b, 'old2', value('int64', '5'), NOW - 1, NOW);
      // The expired value (5) is not counted from: the counter starts afresh.
      const counted = entryOf(await updateEntry(store, b, 'old2', NOW, addCounter(1)));
      expect(counted.data.toString()).toBe('1');
      await setEntry(store, b, 'old3', value('text', 'x'), NOW - 5, NOW);
      const before = await store.maintenance.countEntries();
      let swept = 0;
      for (let got = -1; got !== 0; ) swept += got = await store.maintenance.sweepExpired(NOW, 1);
      expect(swept).toBeGreaterThanOrEqual(1);
      expect(await store.maintenance.countEntries()).toBe(before - swept);
      expect(await store.getEntry(b, 'live', NOW)).toBeDefined();
      expect(await store.getEntry(b, 'forever', NOW)).toBeDefined();
    });
  });

  describe('deleting an expired key that the sweep has not removed yet', () => {
    it('writes nothing, plainly, conditionally, in a transaction or by prefix; the sweep records the expiry as the server', async () => {
      const b = await newBucket();
      await setEntry(store, b, 'p/old', value('text', 'x'), NOW - 1, NOW - 10);
      await setEntry(store, b, 'keep', value('text', 'y'), null, NOW - 10);
      const revision = (await store.buckets.revision(b))!;
      const usage = await store.buckets.usage(b);
      expect(await deleteEntry(store, b, 'p/old', NOW)).toEqual({ deleted: false });
      expect(await deleteEntry(store, b, 'p/old', NOW, { ifNoneMatch: '*' })).toEqual({ deleted: false });
      expect(await deleteEntry(store, b, 'p/old', NOW, { ifMatch: '*' })).toEqual({ refused: 'precondition', current: undefined });
      expect(await store.buckets.revision(b)).toBe(revision);
      // A transaction takes its revision, as it does deleting a key that never was, and changes nothing else.
      const txn = await commit(store, b, [{ op: 'delete', key: 'p/old' }], NOW);
      expect(txn).toEqual({ revision: revision + 1 });
      const byPrefix = await commit(store, b, [{ op: 'delete_prefix', key: 'p/' }], NOW);
      // A prefix delete that finds no live key writes nothing at all: it answers the revision it read at.
      expect(byPrefix).toEqual({ revision: revision + 1, results: [{ op: 'delete_prefix', deleted: 0 }] });
      expect(await store.buckets.usage(b)).toEqual(usage);
      expect(await store.buckets.revision(b)).toBe(revision + 1);
      expect(await store.changes.read(b, revision, revision + 1, 100)).toEqual([]);
      expect((await store.history.keyHistory(b, 'p/old', revision + 2, 10)).map((r) => r.operation)).toEqual(['set']);
      for (let got = -1; got !== 0; ) got = await store.maintenance.sweepExpired(NOW, 100);
      const swept = await store.changes.read(b, revision + 1, revision + 2, 100);
      expect(swept).toEqual([{ revision: revision + 2, key: 'p/old', kind: 'expire', expiresAt: null }]);
      const recorded = await store.history.keyHistory(b, 'p/old', revision + 3, 10);
      expect(recorded.map((r) => [r.operation, r.actor])).toEqual([
        ['expire', { kind: 'server', tokenId: undefined, address: undefined }],
        ['set', null],
      ]);
    });
  });

  describe('counters', () => {
    it('concurrent updates of one key lose nothing, starting from an absent key', async () => {
      const b = await newBucket();
      await Promise.all(Array.from({ length: 200 }, () => updateEntry(store, b, 'hits', NOW, addCounter(1))));
      expect((await store.getEntry(b, 'hits', NOW))?.data.toString()).toBe('200');
    });

    it('keeps Int64 exact near the limits', async () => {
      const b = await newBucket();
      await setEntry(store, b, 'max', value('int64', '9223372036854775806'), null, NOW);
      expect(entryOf(await updateEntry(store, b, 'max', NOW, addCounter(1))).data.toString()).toBe('9223372036854775807');
    });

    it('a counter that cannot add writes nothing (a value that is not a number, an Int64 overflow)', async () => {
      const b = await newBucket();
      await setEntry(store, b, 'c', value('text', '7'), null, NOW);
      await setEntry(store, b, 'max', value('int64', '9223372036854775807'), null, NOW);
      await expect(updateEntry(store, b, 'c', NOW, addCounter(1))).rejects.toThrow('stored value is text, not a number');
      await expect(updateEntry(store, b, 'max', NOW, addCounter(1))).rejects.toThrow('counter overflows Int64');
      expect((await store.getEntry(b, 'c', NOW))?.data.toString()).toBe('7');
      expect((await store.getEntry(b, 'max', NOW))?.data.toString()).toBe('9223372036854775807');
      expect(await store.buckets.revision(b)).toBe(2);
    });
  });

  describe('transactions', () => {
    const set = (key: string, data: string): TxnOp => ({ op: 'set', key, value: value('text', data), expiresAt: null });

    it('applies operations in order: the last one on a key wins', async () => {
      const b = await newBucket();
      await setEntry(store, b, 'gone', value('text', 'x'), null, NOW);
      await commit(
        store,
        b,
        [
          set('a', '1'),
          { op: 'delete', key: 'a' },
          { op: 'delete', key: 'b' },
          set('b', '2'),
          set('c', '3'),
          set('c', '4'),
          { op: 'delete', key: 'gone' },
        ],
        NOW,
      );
      expect(await listAll(store, b)).toEqual(['b', 'c']);
      expect((await store.getEntry(b, 'c', NOW))?.data.toString()).toBe('4');
    });

    it('is all or nothing when one operation fails', async () => {
      const b = await newBucket();
      await setEntry(store, b, 'keep', value('text', 'before'), null, NOW);
      const broken: TxnOp = { op: 'set', key: 'bad', value: { type: 'text', data: null as unknown as Buffer }, expiresAt: null };
      await expect(commit(store, b, [set('keep', 'after'), set('new', 'x'), { op: 'delete', key: 'keep' }, broken], NOW)).rejects.toThrow();
      expect(await listAll(store, b)).toEqual(['keep']);
      expect((await store.getEntry(b, 'keep', NOW))?.data.toString()).toBe('before');
    });

    it('concurrent transactions on overlapping keys leave the state of some serial order', async () => {
      const b = await newBucket();
      const keys = ['k1', 'k2', 'k3', 'k4', 'k5'];
      await Promise.all(
        Array.from({ length: 40 }, (_, i) => {
          const order = i % 2 === 0 ? keys : [...keys].reverse();
          // Even transactions set every key; odd ones set some and delete the rest.
          const ops: TxnOp[] = order.map((key, j) => (i % 2 === 1 && j % 2 === 1 ? { op: 'delete', key } : set(key, `t${i}`)));
          return commit(store, b, ops, NOW);
        }),
      );
      const values = await Promise.all(keys.map(async (key) => (await store.getEntry(b, key, NOW))?.data.toString()));
      const writer = values.find((v) => v !== undefined)!;
      const i = Number(writer.slice(1));
      const expected = keys.map((key) => {
        const order = i % 2 === 0 ? keys : [...keys].reverse();
        return i % 2 === 1 && order.indexOf(key) % 2 === 1 ? undefined : writer;
      });
      expect(values).toEqual(expected);
    });
  });

  describe('revisions', () => {
    const text = (data: string) => value('text', data);
    const revisionOf = (outcome: object) => {
      if (isRefusal(outcome as Refusal)) throw new Error(`refused: ${JSON.stringify(outcome)}`);
      return (outcome as { revision: number }).revision;
    };

    it('a bucket starts at revision 0 and every committed change adds exactly one; each key keeps the revision of its last change', async () => {
      const b = await newBucket();
      expect(await store.buckets.revision(b)).toBe(0);
      expect(revisionOf(await setEntry(store, b, 'a', text('1'), null, NOW))).toBe(1);
      expect(revisionOf(await setEntry(store, b, 'b', text('2'), null, NOW))).toBe(2);
      expect(entryOf(await updateEntry(store, b, 'n', NOW, addCounter(1))).revision).toBe(3);
      expect(await deleteEntry(store, b, 'a', NOW)).toEqual({ deleted: true, revision: 4 });
      expect(
        await commit(
          store,
          b,
          [
            { op: 'set', key: 'c', value: text('3'), expiresAt: null },
            { op: 'delete', key: 'b' },
          ],
          NOW,
        ),
      ).toEqual({ revision: 5 });
      expect(await store.buckets.revision(b)).toBe(5);
      expect((await store.getEntry(b, 'n', NOW))?.revision).toBe(3);
      expect((await store.getEntry(b, 'c', NOW))?.revision).toBe(5);
      // Nothing to delete is no change.
      expect(await deleteEntry(store, b, 'never', NOW)).toEqual({ deleted: false });
      expect(await store.buckets.revision(b)).toBe(5);
      expect(await store.buckets.revision('no-such-bucket')).toBeUndefined();
    });

    it('If-Match (a revision or *) and If-None-Match (*) decide in the write itself; a refusal changes nothing and names the live entry', async () => {
      const b = await newBucket();
      expect(await setEntry(store, b, 'k', text('v1'), null, NOW, { ifMatch: '*' })).toEqual({
        refused: 'precondition',
        current: undefined,
      });
      expect(await setEntry(store, b, 'k', text('v1'), null, NOW, { ifNoneMatch: '*' })).toEqual({ revision: 1 });
      const refused = await setEntry(store, b, 'k', text('v2'), null, NOW, { ifNoneMatch: '*' });
      expect(refused).toMatchObject({ refused: 'precondition', current: { revision: 1, data: Buffer.from('v1') } });
      expect(await setEntry(store, b, 'k', text('v2'), null, NOW, { ifMatch: [7, 9] })).toMatchObject({ refused: 'precondition' });
      expect(await setEntry(store, b, 'k', text('v2'), null, NOW, { ifMatch: [0, 1] })).toEqual({ revision: 2 });
      expect(await setEntry(store, b, 'k', text('v3'), null, NOW, { ifMatch: '*' })).toEqual({ revision: 3 });
      expect(await deleteEntry(store, b, 'k', NOW, { ifMatch: [2] })).toMatchObject({ refused: 'precondition', current: { revision: 3 } });
      expect(await updateEntry(store, b, 'k2', NOW, addCounter(1), { ifMatch: '*' })).toEqual({
        refused: 'precondition',
        current: undefined,
      });
      expect(await store.buckets.revision(b)).toBe(3);
      expect((await store.getEntry(b, 'k', NOW))?.data.toString()).toBe('v3');
      expect(await store.getEntry(b, 'k2', NOW)).toBeUndefined();
      expect(await deleteEntry(store, b, 'k', NOW, { ifMatch: [3] })).toEqual({ deleted: true, revision: 4 });
      // An expired key is absent to conditions too.
      await setEntry(store, b, 'old', text('x'), NOW - 1, NOW);
      expect(await setEntry(store, b, 'old', text('y'), null, NOW, { ifNoneMatch: '*' })).toEqual({ revision: 6 });
    });

    it('transaction checks are evaluated with the writes: any failure writes nothing and names every failing check', async () => {
      const b = await newBucket();
      await setEntry(store, b, 'x', text('1'), null, NOW);
      const ops: TxnOp[] = [
        { op: 'check', key: 'x', rev: 1 },
        { op: 'set', key: 'y', value: text('new'), expiresAt: null },
        { op: 'check', key: 'y', exists: true },
        { op: 'check', key: 'x', rev: 2 },
        { op: 'check', key: 'z', exists: false },
      ];
      expect(await commit(store, b, ops, NOW)).toEqual({ refused: 'checks', failed: [2, 3] });
      expect(await store.getEntry(b, 'y', NOW)).toBeUndefined();
      expect(await store.buckets.revision(b)).toBe(1);
      const passing: TxnOp[] = [
        { op: 'check', key: 'x', rev: 1 },
        { op: 'check', key: 'y', exists: false },
        { op: 'set', key: 'y', value: text('new'), expiresAt: null },
      ];
      expect(await commit(store, b, passing, NOW)).toEqual({ revision: 2 });
      // Checks alone are no change.
      expect(await commit(store, b, [{ op: 'check', key: 'y', rev: 2 }], NOW)).toEqual({ revision: 2 });
      expect(await store.buckets.revision(b)).toBe(2);
    });

    it('concurrent writers get distinct, gap-free revisions; of many writers conditioned on one revision exactly one wins', async () => {
      const b = await newBucket();
      const outcomes = await Promise.all(Array.from({ length: 60 }, (_, i) => setEntry(store, b, `k${i % 7}`, text(String(i)), null, NOW)));
      expect(outcomes.map(revisionOf).sort((x, y) => x - y)).toEqual(Array.from({ length: 60 }, (_, i) => i + 1));
      const current = (await store.getEntry(b, 'k0', NOW))!;
      const racers = await Promise.all(
        Array.from({ length: 30 }, (_, i) => setEntry(store, b, 'k0', text(`w${i}`), null, NOW, { ifMatch: [current.revision] })),
      );
      expect(racers.filter((r) => !isRefusal(r))).toEqual([{ revision: 61 }]);
      expect(await store.buckets.revision(b)).toBe(61);
    });

    it('the sweep numbers its removals: one revision per bucket per batch', async () => {
      const b1 = await newBucket();
      const b2 = await newBucket();
      for (const k of ['a', 'b', 'c']) await setEntry(store, b1, k, text('x'), NOW - 10, NOW - 20);
      await setEntry(store, b2, 'a', text('x'), NOW - 10, NOW - 20);
      for (let got = -1; got !== 0; ) got = await store.maintenance.sweepExpired(NOW, 1000);
      expect(await store.buckets.revision(b1)).toBe(4);
      expect(await store.buckets.revision(b2)).toBe(2);
    });

    it('a write to a deleted bucket is refused and leaves nothing; a delete racing writes leaves no entries', async () => {
      const b = await newBucket();
      await setEntry(store, b, 'k', text('x'), null, NOW);
      expect(await store.buckets.delete(b)).toBe(true);
      expect(await setEntry(store, b, 'k2', text('x'), null, NOW)).toEqual({ refused: 'no_bucket' });
      expect(await setEntry(store, b, 'k2', text('x'), null, NOW, { ifNoneMatch: '*' })).toEqual({ refused: 'no_bucket' });
      expect(await updateEntry(store, b, 'n', NOW, addCounter(1))).toEqual({ refused: 'no_bucket' });
      expect(await commit(store, b, [{ op: 'set', key: 'k3', value: text('x'), expiresAt: null }], NOW)).toEqual({ refused: 'no_bucket' });
      expect(await listAll(store, b)).toEqual([]);

      for (let round = 0; round < 3; round++) {
        const r = await newBucket();
        const writes = Array.from({ length: 40 }, (_, i) =>
          i % 3 === 0
            ? commit(store, r, [{ op: 'set', key: `t${i}`, value: text('x'), expiresAt: null }], NOW)
            : setEntry(store, r, `k${i}`, text('x'), null, NOW),
        );
        const deletion = store.buckets.delete(r);
        const results = await Promise.all(writes);
        expect(await deletion).toBe(true);
        // Acknowledged or refused, no write outlives the bucket.
        expect(results.every((o) => 'revision' in o || isRefusal(o as Refusal))).toBe(true);
        expect(await listAll(store, r)).toEqual([]);
      }
    });
  });

  createRevisionCases(() => store, newBucket, NOW);
}
