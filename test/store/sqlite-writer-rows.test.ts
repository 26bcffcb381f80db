import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryBuckets } from '../../src/store/core/memory-view.js';
import { openStore } from '../../src/store/open-store.js';
import type { Condition, Store } from '../../src/store/store.js';
import { bucketRecord } from '../helpers/store-backends.js';
import { QUOTA, expectSameBucket, modelOutcome, storeWrite, writeOp } from '../helpers/write-op-arbitraries.js';

/**
 * The SQLite writer loads a key it wrote before from the rows it kept, not from the file
 * (`WrittenRows`, sqlite-written-rows.ts). A kept row that outlived a change it did not make would show
 * as a wrong condition verdict, create revision or usage: each case below changes a key's row
 * another way than a plain committed write (a taken-back write, a bucket dropped and made again,
 * an import, a whole batch) and then asks a conditional write that depends on the file's row.
 */
const text = (s: string) => ({ type: 'text' as const, data: Buffer.from(s) });
const set = (key: string, value: string, condition?: Condition) => ({
  op: 'set' as const,
  key,
  value: text(value),
  expiresAt: null,
  now: Date.now(),
  condition,
});

/** A transaction that sets "a", then "boom" (which `refusingKey` below can make fail). */
const boomTxn = () => ({
  op: 'commit' as const,
  now: Date.now(),
  ops: [
    { op: 'set' as const, key: 'a', value: text('1'), expiresAt: null },
    { op: 'set' as const, key: 'boom', value: text('2'), expiresAt: null },
  ],
});

/**
 * Runs `test` while a trigger on `table` refuses every insert of `key`, through a second
 * connection to the file (the store's writer does not know of it), and drops it after.
 */
async function refusingKey(file: string, table: 'entries' | 'changes', key: string, test: () => Promise<void>): Promise<void> {
  const name = `refuse_${table}_${key}`;
  const raw = new Database(file);
  raw.exec(
    `create trigger ${name} before insert on ${table} when new.key = cast('${key}' as blob) begin select raise(abort, 'refused by the test'); end`,
  );
  raw.close();
  try {
    await test();
  } finally {
    const cleanup = new Database(file);
    cleanup.exec(`drop trigger ${name}`);
    cleanup.close();
  }
}

describe("the SQLite writer's kept rows", () => {
  let dir: string;
  let file: string;
  let store: Store;
  let n = 0;
  const fresh = async () => {
    const bucket = `rows-${++n}`;
    await store.buckets.create(bucketRecord(bucket));
    return bucket;
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kvb-writer-rows-'));
    file = join(dir, 'kvb.db');
    store = await openStore(file, { durability: 'normal', poolSize: 1, quota: QUOTA });
  });
  afterAll(async () => {
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a write taken back by a failing statement leaves no kept row behind', async () => {
    const bucket = await fresh();
    // The transaction sets "a", then fails on "boom".
    await refusingKey(file, 'entries', 'boom', async () => {
      await expect(store.write(bucket, boomTxn())).rejects.toThrow();
      // "a" is absent in the file: a write that requires that succeeds, at the bucket's first revision.
      expect(await store.write(bucket, set('a', 'x', { ifNoneMatch: '*' }))).toEqual({ revision: 1 });
    });
  });

  it('the same, with the failing write and the next one in one batch', async () => {
    const bucket = await fresh();
    await refusingKey(file, 'entries', 'boom', async () => {
      // Sent together, so the writer runs them in one batch, in this order.
      const [failed, next] = await Promise.allSettled([
        store.write(bucket, boomTxn()),
        store.write(bucket, set('a', 'x', { ifNoneMatch: '*' })),
      ]);
      expect(failed.status).toBe('rejected');
      expect(next).toMatchObject({ status: 'fulfilled', value: { revision: 1 } });
    });
  });

  it('a key whose row cannot be written fails only its own SET; the rest of its batch commits', async () => {
    const bucket = await fresh();
    await refusingKey(file, 'entries', 'boom', async () => {
      // One batch: the writer writes its rows at its end, finds one refused, and runs the batch again row by row.
      const outcomes = await Promise.allSettled([
        store.write(bucket, set('a', '1')),
        store.write(bucket, set('boom', '2')),
        store.write(bucket, set('c', '3')),
      ]);
      expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
      expect(outcomes.map((o) => (o.status === 'fulfilled' ? o.value : undefined))).toEqual([{ revision: 1 }, undefined, { revision: 2 }]);
    });
    expect((await store.getEntry(bucket, 'c', Date.now()))?.data.toString()).toBe('3');
    expect(await store.getEntry(bucket, 'boom', Date.now())).toBeUndefined();
    expect(await store.buckets.usage(bucket)).toEqual({ keys: 2, bytes: expect.any(Number) });
    const changes = await store.changes.read(bucket, 0, 10, 10);
    expect(changes.map((c) => [c.key, c.revision])).toEqual([
      ['a', 1],
      ['c', 2],
    ]);
  });

  it('a batch whose change log cannot be written fails whole, and keeps none of its rows', async () => {
    const bucket = await fresh();
    // The change-log row of key "doom" fails: its batch's bookkeeping fails, so every write in that batch does.
    await refusingKey(file, 'changes', 'doom', async () => {
      const [a, doom] = await Promise.allSettled([store.write(bucket, set('a', '1')), store.write(bucket, set('doom', '2'))]);
      expect([a.status, doom.status]).toEqual(['rejected', 'rejected']);
    });
    expect(await store.write(bucket, set('a', 'x', { ifNoneMatch: '*' }))).toEqual({ revision: 1 });
  });

  it('a bucket deleted and made again starts without the rows the writer kept for it', async () => {
    const bucket = await fresh();
    await store.write(bucket, set('k', 'old'));
    expect(await store.buckets.delete(bucket)).toBe(true);
    await store.buckets.create(bucketRecord(bucket));
    expect(await store.write(bucket, set('k', 'new', { ifNoneMatch: '*' }))).toEqual({ revision: 1 });
    expect(await store.buckets.usage(bucket)).toEqual({ keys: 1, bytes: expect.any(Number) });
  });

  it('an import that rewrites a kept key: the next conditional write sees the imported row', async () => {
    const bucket = await fresh();
    expect(await store.write(bucket, set('k', 'v1'))).toMatchObject({ revision: 1 });
    const staging = await store.beginImport(bucket);
    await staging.add([{ key: 'k', entry: { ...text('v2'), expiresAt: null } }]);
    expect(await staging.apply({ replace: true, prefix: '' })).toEqual({ revision: 2 });
    // The import's revision is k's now: a write conditioned on revision 1 is refused, on 2 it goes.
    expect(await store.write(bucket, set('k', 'v3', { ifMatch: [1] }))).toMatchObject({ refused: expect.anything() });
    expect(await store.write(bucket, set('k', 'v3', { ifMatch: [2] }))).toMatchObject({ revision: 3 });
    expect((await store.getEntry(bucket, 'k', Date.now()))?.data.toString()).toBe('v3');
  });

  it('a key written in a batch and written again in the same batch sees its first write', async () => {
    const bucket = await fresh();
    const results = await Promise.all([
      store.write(bucket, set('k', 'one', { ifNoneMatch: '*' })),
      store.write(bucket, set('k', 'two', { ifMatch: [1] })),
      store.write(bucket, { op: 'delete', key: 'k', now: Date.now(), condition: { ifMatch: [2] } }),
      store.write(bucket, set('k', 'three', { ifNoneMatch: '*' })),
    ]);
    expect(results.map((r) => ('refused' in r ? 'refused' : r.revision))).toEqual([1, 2, 3, 4]);
    expect(await store.getEntry(bucket, 'k', Date.now())).toMatchObject({ revision: 4, createRevision: 4 });
    expect(await store.buckets.usage(bucket)).toEqual({ keys: 1, bytes: expect.any(Number) });
  });

  it("writes to two buckets sent at once, interleaved: each bucket's in order, each answered in its place", async () => {
    const [x, y] = [await fresh(), await fresh()];
    const results = await Promise.all([
      store.write(x, set('k', 'x1', { ifNoneMatch: '*' })),
      store.write(y, set('k', 'y1', { ifNoneMatch: '*' })),
      store.write(x, set('k', 'x2', { ifMatch: [1] })),
      store.write(y, set('k', 'y2', { ifNoneMatch: '*' })),
      store.write(x, set('j', 'x3')),
    ]);
    expect(results.map((r) => ('refused' in r ? r.refused : r.revision))).toEqual([1, 1, 2, 'precondition', 3]);
    expect((await store.getEntry(x, 'k', Date.now()))?.data.toString()).toBe('x2');
    expect((await store.getEntry(y, 'k', Date.now()))?.data.toString()).toBe('y1');
    expect([await store.buckets.revision(x), await store.buckets.revision(y)]).toEqual([3, 1]);
  });

  it('random write sequences sent at once (batched by the writer, some keys twice) agree with the model, twice over', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(writeOp, { minLength: 1, maxLength: 12 }), async (ops) => {
        const bucket = await fresh();
        const model = new MemoryBuckets(QUOTA);
        model.createBucket(bucket);
        // The same sequence twice: the second round starts from rows the writer kept from the first.
        for (const round of [1, 2]) {
          const expected = ops.map((op) => modelOutcome(model.write(bucket, [op])[0]!));
          const answers = await Promise.all(ops.map((op) => storeWrite(store, bucket, op)));
          expect(answers, `round ${round}`).toEqual(expected);
          await expectSameBucket(store, model, bucket);
        }
      }),
      { numRuns: 60 },
    );
  });
});

describe("':memory:' (the writer on the request thread, through the same encoded messages)", () => {
  let store: Store;
  let n = 0;
  beforeAll(async () => {
    store = await openStore(':memory:', { durability: 'normal', poolSize: 1, quota: QUOTA });
  });
  afterAll(async () => {
    await store?.close();
  });

  it('random write sequences sent at once agree with the model', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(writeOp, { minLength: 1, maxLength: 12 }), async (ops) => {
        const bucket = `memory-${++n}`;
        await store.buckets.create(bucketRecord(bucket));
        const model = new MemoryBuckets(QUOTA);
        model.createBucket(bucket);
        const expected = ops.map((op) => modelOutcome(model.write(bucket, [op])[0]!));
        expect(await Promise.all(ops.map((op) => storeWrite(store, bucket, op)))).toEqual(expected);
        await expectSameBucket(store, model, bucket);
      }),
      { numRuns: 30 },
    );
  });
});
