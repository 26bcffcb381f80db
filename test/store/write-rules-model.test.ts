import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { MemoryBuckets } from '../../src/store/core/memory-view.js';
import type { Store } from '../../src/store/store.js';
import { type StoreBackend, describeEachBackend, openTestStore, bucketRecord } from '../helpers/store-backends.js';
import { QUOTA, expectSameBucket, modelOutcome, plainSet, storeWrite, writeOp } from '../helpers/write-op-arbitraries.js';

/**
 * Model-based: random sequences of writes applied to buckets in memory through the write rules
 * (the model) and to a real store must agree, write by write (answers, refusals, errors) and in
 * the bucket's state after (keys, values, revisions, create revisions, usage).
 */
describeEachBackend('write rules: a store agrees with the model', (backend: StoreBackend, url: string) => {
  let store: Store;
  let cleanup: () => Promise<void>;
  /** The same engine with no quota set: PostgreSQL then writes a batch of plain SETs in one statement of its own. */
  let free: Store;
  let cleanupFree: () => Promise<void>;
  let n = 0;
  beforeAll(async () => {
    ({ store, cleanup } = await openTestStore(backend, url, { prefix: 'kvb_model', poolSize: 4, quota: QUOTA }));
    ({ store: free, cleanup: cleanupFree } = await openTestStore(backend, url, { prefix: 'kvb_model_free', poolSize: 4 }));
  });
  afterAll(async () => {
    await store?.close();
    await cleanup?.();
    await free?.close();
    await cleanupFree?.();
  });

  it('random write sequences: the same answers and the same bucket after', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(writeOp, { minLength: 1, maxLength: 12 }), async (ops) => {
        const bucket = `model-${++n}`;
        await store.buckets.create(bucketRecord(bucket));
        const model = new MemoryBuckets(QUOTA);
        model.createBucket(bucket);
        for (const [i, op] of ops.entries()) {
          const expected = modelOutcome(model.write(bucket, [op])[0]!);
          expect(await storeWrite(store, bucket, op), `write ${i}: ${op.op}`).toEqual(expected);
        }
        await expectSameBucket(store, model, bucket);
      }),
      { numRuns: backend === 'sqlite' ? 60 : 25 },
    );
  });

  // PostgreSQL writes a batch of SETs without conditions, when no quota is set, in one statement
  // that assigns the revisions, create revisions, usage and change rows itself (setsFresh in
  // postgres-statements.ts) instead of reading the rows and running the rules: the one place a
  // rule is restated, for the commonest write's round trip. This holds it to the rules.
  it('bursts of plain SETs with no quota (sent at once, so batched) after random writes: the same answers and bucket', async () => {
    const none = { maxKeys: 0, maxBytes: 0 };
    await fc.assert(
      fc.asyncProperty(
        fc.array(writeOp, { maxLength: 6 }),
        fc.array(fc.array(plainSet, { minLength: 1, maxLength: 12 }), { minLength: 1, maxLength: 3 }),
        async (before, bursts) => {
          const bucket = `burst-${++n}`;
          await free.buckets.create(bucketRecord(bucket));
          const model = new MemoryBuckets(none);
          model.createBucket(bucket);
          for (const op of before) {
            expect(await storeWrite(free, bucket, op)).toEqual(modelOutcome(model.write(bucket, [op])[0]!));
          }
          for (const burst of bursts) {
            const expected = burst.map((op) => modelOutcome(model.write(bucket, [op])[0]!));
            expect(await Promise.all(burst.map((op) => storeWrite(free, bucket, op)))).toEqual(expected);
          }
          await expectSameBucket(free, model, bucket);
        },
      ),
      { numRuns: backend === 'sqlite' ? 60 : 25 },
    );
  });
});
