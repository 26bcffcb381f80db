import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { MemoryBuckets } from '../../src/store/core/memory-view.js';
import type { Store } from '../../src/store/store.js';
import { type StoreBackend, describeEachBackend, openTestStore, bucketRecord } from '../helpers/store-backends.js';
import { QUOTA, expectSameBucket, modelOutcome, storeWrite, writeOp } from '../helpers/write-op-arbitraries.js';

/**
 * Model-based: random sequences of writes applied to buckets in memory through the write rules
 * (the model) and to a real store must agree, write by write (answers, refusals, errors) and in
 * the bucket's state after (keys, values, revisions, create revisions, usage).
 */
describeEachBackend('write rules: a store agrees with the model', (backend: StoreBackend, url: string) => {
  let store: Store;
  let cleanup: () => Promise<void>;
  let n = 0;
  beforeAll(async () => {
    ({ store, cleanup } = await openTestStore(backend, url, { prefix: 'kvb_model', poolSize: 4, quota: QUOTA }));
  });
  afterAll(async () => {
    await store?.close();
    await cleanup?.();
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
});
