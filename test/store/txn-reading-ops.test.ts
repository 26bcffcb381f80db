import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { CommitOutcome, Store, TxnRequestOp } from '../../src/store/store.js';
import { resolveTransaction } from '../../src/store/core/txn-resolution.js';
import { MAX_PREFIX_DELETE_KEYS } from '../../src/limits.js';
import { type StoreBackend, describeEachBackend, openTestStore, bucketRecord } from '../helpers/store-backends.js';
import { setEntry, commit } from '../helpers/store-writes.js';

const NOW = 1_800_000_000_000;
const text = (data: string) => ({ type: 'text' as const, data: Buffer.from(data) });
const revisionOf = (outcome: CommitOutcome) => {
  if ('refused' in outcome) throw new Error(`refused: ${JSON.stringify(outcome)}`);
  return outcome.revision;
};

/** The reading transaction operations (get, expire, delete_prefix) on every backend, directly on the store. */
describeEachBackend('store: reading transaction operations', readingOps);

function readingOps(backend: StoreBackend, url: string) {
  let store: Store;
  let cleanup: () => Promise<void>;
  let n = 0;
  const newBucket = async () => {
    const id = `reading-${++n}`;
    await store.buckets.create(bucketRecord(id));
    return id;
  };
  beforeAll(async () => {
    ({ store, cleanup } = await openTestStore(backend, url, { prefix: 'kvb_reading', poolSize: 8 }));
  });
  afterAll(async () => {
    await store?.close();
    await cleanup?.();
  });

  it("gets read the state before the transaction's writes; an expired key reads as absent; gets alone make no revision", async () => {
    const b = await newBucket();
    await setEntry(store, b, 'a', text('old'), null, NOW);
    await setEntry(store, b, 'expired', text('x'), NOW - 1, NOW - 10);
    const before = await store.buckets.revision(b);
    const readOnly = await commit(
      store,
      b,
      [
        { op: 'get', key: 'a' },
        { op: 'get', key: 'expired' },
      ],
      NOW,
    );
    expect(revisionOf(readOnly)).toBe(before);
    expect(await store.buckets.revision(b)).toBe(before);
    const outcome = await commit(
      store,
      b,
      [
        { op: 'set', key: 'a', value: text('new'), expiresAt: null },
        { op: 'get', key: 'a' },
      ],
      NOW,
    );
    expect(revisionOf(outcome)).toBe(before! + 1);
    const results = (outcome as { results: unknown[] }).results;
    expect(results[0]).toBeUndefined();
    expect(results[1]).toMatchObject({ op: 'get', key: 'a', entry: { type: 'text', revision: 1 } });
    expect((results[1] as { entry: { data: Buffer } }).entry.data.toString()).toBe('old');
    expect((readOnly as { results: Array<{ entry?: unknown }> }).results[1]!.entry).toBeUndefined();
  });

  it('expire keeps value, type and usage and logs one set with the new expiry; a key that is not live fails by index', async () => {
    const b = await newBucket();
    await setEntry(store, b, 'k', { type: 'int64', data: Buffer.from('42') }, null, NOW);
    const usage = await store.buckets.usage(b);
    const revision = revisionOf(await commit(store, b, [{ op: 'expire', key: 'k', expiresAt: NOW + 60_000 }], NOW));
    const entry = await store.getEntry(b, 'k', NOW);
    expect(entry).toMatchObject({ type: 'int64', expiresAt: NOW + 60_000, revision });
    expect(entry!.data.toString()).toBe('42');
    expect(await store.buckets.usage(b)).toEqual(usage);
    const changes = await store.changes.read(b, revision - 1, revision, 10);
    expect(changes).toEqual([expect.objectContaining({ revision, key: 'k', kind: 'set', expiresAt: NOW + 60_000 })]);
    expect(
      await commit(
        store,
        b,
        [
          { op: 'expire', key: 'k', expiresAt: null },
          { op: 'expire', key: 'missing', expiresAt: null },
        ],
        NOW,
      ),
    ).toEqual({ refused: 'checks', failed: [1] });
    expect((await store.getEntry(b, 'k', NOW))?.expiresAt).toBe(NOW + 60_000);
  });

  it('delete_prefix removes exactly the live keys under the prefix, in one revision, with usage and the change log kept exact', async () => {
    const b = await newBucket();
    const keys = Array.from({ length: 300 }, (_, i) => `p/${i}`);
    await commit(
      store,
      b,
      [...keys, 'p', 'q/1', 'p0'].map((key): TxnRequestOp => ({ op: 'set', key, value: text('v'), expiresAt: null })),
      NOW,
    );
    const usage = (await store.buckets.usage(b))!;
    const outcome = await commit(store, b, [{ op: 'delete_prefix', key: 'p/' }], NOW);
    const revision = revisionOf(outcome);
    expect((outcome as { results: unknown[] }).results).toEqual([{ op: 'delete_prefix', deleted: 300 }]);
    const left = (await store.listEntries(b, { prefix: '', reverse: false, columns: 'keys', offset: 0, limit: 1000 }, NOW)).map(
      (e) => e.key,
    );
    expect(left).toEqual(['p', 'p0', 'q/1']);
    const after = (await store.buckets.usage(b))!;
    expect(after.keys).toBe(usage.keys - 300);
    expect(after.bytes).toBeLessThan(usage.bytes);
    const changes = await store.changes.read(b, revision - 1, revision, 1000);
    expect(changes).toHaveLength(300);
    expect(changes.every((c) => c.revision === revision && c.kind === 'delete')).toBe(true);
  });

  it('delete_prefix is atomic against concurrent writers: no key under the prefix older than its revision survives', async () => {
    const b = await newBucket();
    const writers = Array.from({ length: 20 }, (_, i) =>
      commit(
        store,
        b,
        [
          { op: 'set', key: `c/${i % 8}`, value: text(String(i)), expiresAt: null },
          { op: 'set', key: `c/extra${i}`, value: text('x'), expiresAt: null },
        ],
        NOW,
      ),
    );
    const deletes = [4, 10, 16].map(async (at) => {
      await writers[at];
      return revisionOf(await commit(store, b, [{ op: 'delete_prefix', key: 'c/' }], NOW));
    });
    await Promise.all(writers);
    const last = Math.max(...(await Promise.all(deletes)));
    const left = await store.listEntries(b, { prefix: 'c/', reverse: false, columns: 'meta', offset: 0, limit: 1000 }, NOW);
    for (const { key, meta } of left) expect({ key, newer: meta!.revision > last }).toEqual({ key, newer: true });
  });

  it('a prefix delete over the bound is refused (400) and changes nothing; PostgreSQL sends none of the write (no batch read, lock or write)', {
    timeout: 120_000,
  }, async () => {
    const b = await newBucket();
    const staging = await store.beginImport(b);
    for (let start = 0; start <= MAX_PREFIX_DELETE_KEYS; start += 5_000) {
      const length = Math.min(5_000, MAX_PREFIX_DELETE_KEYS + 1 - start);
      await staging.add(Array.from({ length }, (_, i) => ({ key: `big/${start + i}`, entry: { ...text('v'), expiresAt: null } })));
    }
    await staging.apply({ replace: false, prefix: '' });
    const before = await store.buckets.revision(b);
    const sent: string[] = [];
    if (backend === 'postgres') {
      const pgStore = store as unknown as { query(name: string, ...rest: unknown[]): unknown };
      const query = pgStore.query.bind(pgStore);
      vi.spyOn(pgStore, 'query').mockImplementation((name, ...rest) => {
        sent.push(name);
        return query(name, ...rest);
      });
    }
    try {
      await expect(
        commit(
          store,
          b,
          [
            { op: 'set', key: 'new', value: text('n'), expiresAt: null },
            { op: 'delete_prefix', key: 'big/' },
          ],
          NOW,
        ),
      ).rejects.toMatchObject({
        status: 400,
        message: expect.stringMatching(/txn\[1\]: prefix "big\/" holds more than 50000 keys/),
      });
    } finally {
      vi.restoreAllMocks();
    }
    if (backend === 'postgres') {
      // The bucket's revision and the bounded listing are all it read.
      expect(sent.length).toBeGreaterThan(0);
      expect(sent.filter((name) => ['readBatch', 'applyBatch', 'lockBucket', 'setsFresh'].includes(name))).toEqual([]);
    }
    expect(await store.buckets.revision(b)).toBe(before);
    expect(await store.getEntry(b, 'new', NOW)).toBeUndefined();
    expect(await store.getEntry(b, `big/${MAX_PREFIX_DELETE_KEYS}`, NOW)).toBeDefined();
  });
}

describe('resolveTransaction (pure)', () => {
  it('refuses a prefix holding more keys than the limit, naming the operation and the limit', () => {
    const many = Array.from({ length: MAX_PREFIX_DELETE_KEYS + 1 }, (_, i) => `p/${i}`);
    expect(() =>
      resolveTransaction(
        [
          { op: 'get', key: 'x' },
          { op: 'delete_prefix', key: 'p/' },
        ],
        new Map(),
        new Map([['p/', many]]),
      ),
    ).toThrow(/txn\[1\].*more than 50000 keys/);
  });
  it('checks and expires fail by index; later writes keep request order', () => {
    const entry = { type: 'text' as const, data: Buffer.from('v'), expiresAt: null, revision: 3 };
    const resolution = resolveTransaction(
      [
        { op: 'check', key: 'a', rev: 3 },
        { op: 'expire', key: 'a', expiresAt: 5 },
        { op: 'check', key: 'b', exists: true },
        { op: 'expire', key: 'b', expiresAt: null },
      ],
      new Map([['a', entry]]),
      new Map(),
    );
    expect(resolution.failed).toEqual([2, 3]);
    expect(resolution.writes).toEqual([{ op: 'set', key: 'a', value: { type: 'text', data: entry.data }, expiresAt: 5 }]);
    expect(resolution.reports).toBe(false);
  });
});
