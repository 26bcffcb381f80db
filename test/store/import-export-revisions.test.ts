import { afterAll, beforeAll, expect, it } from 'vitest';
import { dumpStore, restoreDump } from '../../src/store/dump.js';
import type { BucketRecord, KeyedEntry, Store } from '../../src/store/store.js';
import { uniqueName } from '../helpers/backend.js';
import { type StoreBackend, describeEachBackend, openTestStore } from '../helpers/store-backends.js';
import { setEntry, deleteEntry } from '../helpers/store-writes.js';

/** A store of its own for this suite on `backend`. */
const openRevisionsStore = (backend: StoreBackend, url: string) => openTestStore(backend, url, { prefix: 'kvb_revs', poolSize: 4 });

const NOW = Date.now();
const text = (s: string) => ({ type: 'text' as const, data: Buffer.from(s) });
const staged = (key: string, value = key): KeyedEntry => ({ key, entry: { ...text(value), expiresAt: null } });
const record = (id: string): BucketRecord => ({
  id,
  email: 'revs@test',
  secretKeyHash: 'hash',
  readKeyHash: null,
  writeKeyHash: null,
  signingKey: 'sign',
  signingKeyGeneration: 3,
  defaultTtl: 0,
  tokenSalt: 'salt',
});

async function readAll(store: Store, bucket: string, prefix = '') {
  const snapshot = await store.openSnapshot(bucket, prefix, NOW);
  if (!snapshot) throw new Error(`no bucket ${bucket}`);
  try {
    const rows: Array<{ key: string; revision: number; value: string }> = [];
    for (let batch = await snapshot.read(2); batch.length > 0; batch = await snapshot.read(2)) {
      rows.push(...batch.map(({ key, entry }) => ({ key, revision: entry.revision, value: entry.data.toString() })));
    }
    return { revision: snapshot.revision, rows };
  } finally {
    await snapshot.close();
  }
}

/**
 * Revisions in export, import, dump and restore, straight on the store, on every backend (a
 * backend that is not configured is reported as a skipped suite naming what to set).
 */
describeEachBackend('import/export revisions', (backend, url) => {
  let store: Store;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ store, cleanup } = await openRevisionsStore(backend, url));
  });
  afterAll(async () => {
    await store.close();
    await cleanup();
  });

  it('a snapshot carries the bucket revision it was read at, and each entry its own', async () => {
    const b = uniqueName('snap');
    await store.buckets.create(record(b));
    await setEntry(store, b, 'a', text('1'), null, NOW);
    await setEntry(store, b, 'b', text('2'), null, NOW);
    await setEntry(store, b, 'a', text('3'), null, NOW);
    const snapshot = (await store.openSnapshot(b, '', NOW))!;
    // A write after the snapshot opened is neither in its rows nor in its revision.
    await setEntry(store, b, 'c', text('4'), null, NOW);
    const rows = await snapshot.read(10);
    await snapshot.close();
    expect(snapshot.revision).toBe(3);
    expect(rows.map((r) => [r.key, r.entry.revision])).toEqual([
      ['a', 3],
      ['b', 2],
    ]);
    expect(await store.buckets.revision(b)).toBe(4);
    expect(await store.openSnapshot(uniqueName('none'), '', NOW)).toBeUndefined();
  });

  it('an import commits as ONE revision: the bucket revision goes up by one and every imported key carries it', async () => {
    const b = uniqueName('imp');
    await store.buckets.create(record(b));
    await setEntry(store, b, 'keep', text('k'), null, NOW);
    await setEntry(store, b, 'x/old', text('o'), null, NOW);
    const before = (await store.buckets.revision(b))!;
    const staging = await store.beginImport(b);
    await staging.add([staged('x/1'), staged('x/2'), staged('x/1', 'last')]);
    await staging.add([staged('x/3')]);
    const outcome = await staging.apply({ replace: true, prefix: 'x/' });
    expect(outcome).toEqual({ revision: before + 1 });
    expect(await store.buckets.revision(b)).toBe(before + 1);
    const { rows } = await readAll(store, b);
    expect(rows).toEqual([
      { key: 'keep', revision: 1, value: 'k' },
      { key: 'x/1', revision: before + 1, value: 'last' },
      { key: 'x/2', revision: before + 1, value: 'x/2' },
      { key: 'x/3', revision: before + 1, value: 'x/3' },
    ]);
    expect((await store.getEntry(b, 'x/1', NOW))?.revision).toBe(before + 1);
    // The next write continues the sequence.
    expect(await setEntry(store, b, 'after', text('a'), null, NOW)).toEqual({ revision: before + 2 });
  });

  it('an import into a bucket deleted meanwhile writes nothing and says so', async () => {
    const b = uniqueName('gone');
    await store.buckets.create(record(b));
    const staging = await store.beginImport(b);
    await staging.add([staged('a'), staged('b')]);
    expect(await store.buckets.delete(b)).toBe(true);
    expect(await staging.apply({ replace: false, prefix: '' })).toEqual({ refused: 'no_bucket' });
    // A new bucket of the same id starts empty: nothing of the import landed.
    await store.buckets.create(record(b));
    expect((await readAll(store, b)).rows).toEqual([]);
    expect(await store.buckets.revision(b)).toBe(0);
    expect((await store.maintenance.checkIntegrity()).filter((p) => p.includes('no bucket'))).toEqual([]);
  });

  it('dump and restore keep the bucket revision and every entry revision; a restored bucket continues its sequence', async () => {
    const b = uniqueName('dump');
    await store.buckets.create(record(b));
    await setEntry(store, b, 'one', text('1'), null, NOW);
    await setEntry(store, b, 'two', text('2'), null, NOW);
    await setEntry(store, b, 'one', text('1b'), null, NOW);
    await deleteEntry(store, b, 'two', NOW);
    await setEntry(store, b, 'three', text('3'), null, NOW);
    const dumped = await readAll(store, b);
    expect(dumped.revision).toBe(5);

    let text_ = '';
    await dumpStore(
      store,
      async (chunk) => {
        text_ += chunk;
      },
      NOW,
    );
    const lines = text_.split('\n');
    expect(JSON.parse(lines[0]!)).toMatchObject({ kvb: 'dump', version: 4 });
    const bucketLine = lines
      .map((l) => JSON.parse(l || 'null') as Record<string, unknown> | null)
      .find((l) => l?.kvb === 'bucket' && l.id === b);
    expect(bucketLine).toMatchObject({ revision: 5, signing_key_generation: 3 });
    // `created`: the create revision (set at 1, overwritten while live at 3), a lock's fencing token.
    expect(lines).toContain(`{"key":"one","type":"text","value":"1b","expires_at":null,"rev":3,"created":1}`);

    // Into a fresh store of the same backend, and into SQLite (a move between backends).
    for (const target of [await openRevisionsStore(backend, url), await openRevisionsStore('sqlite', 'sqlite')]) {
      try {
        async function* chunks() {
          yield* text_.split('\n').slice(0, -1);
        }
        const restored = await restoreDump(target.store, chunks(), { force: false, now: NOW });
        expect(restored.entries).toBeGreaterThanOrEqual(2);
        expect(await readAll(target.store, b)).toEqual(dumped);
        expect(await target.store.getEntry(b, 'one', NOW)).toMatchObject({ revision: 3, createRevision: 1 });
        expect(await target.store.buckets.get(b)).toEqual(record(b));
        expect(await setEntry(target.store, b, 'four', text('4'), null, NOW)).toEqual({ revision: 6 });
        // A conditional write with the ETag revision read before the move still matches.
        const outcome = await setEntry(target.store, b, 'one', text('1c'), null, NOW, { ifMatch: [3] });
        expect(outcome).toEqual({ revision: 7 });
      } finally {
        await target.store.close();
        await target.cleanup();
      }
    }
  });
});
