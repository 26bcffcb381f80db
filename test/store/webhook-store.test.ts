import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Store } from '../../src/store/store.js';
import { bucketRecord, describeEachBackend, openTestStore, text } from '../helpers/store-backends.js';
import { setEntry } from '../helpers/store-writes.js';

const NOW = 1_800_000_000_000;

/** The webhook subscriptions' rows, the same on every backend (webhook-store.ts). */
describeEachBackend('webhook store', (backend, url) => {
  let store: Store;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ store, cleanup } = await openTestStore(backend, url, { prefix: 'kvb_webhook_store', poolSize: 4 }));
    await store.buckets.create(bucketRecord('b1'));
    await store.buckets.create(bucketRecord('b2'));
  });
  afterAll(async () => {
    await store?.close();
    await cleanup?.();
  });

  const hook = (id: string, bucket = 'b1') => ({
    id,
    bucket,
    url: 'https://example.com/h',
    prefix: 'user/',
    kinds: ['set' as const],
    secret: `s-${id}`,
  });

  it('adds a subscription at the bucket revision, up to the limit, and never for a missing bucket', async () => {
    await setEntry(store, 'b1', 'a', text('1'), null, NOW);
    expect(await store.webhooks.add(hook('w1'), 2, NOW)).toBe(true);
    expect(await store.webhooks.add(hook('w2'), 2, NOW + 1)).toBe(true);
    expect(await store.webhooks.add(hook('w3'), 2, NOW + 2)).toBe(false);
    expect(await store.webhooks.add(hook('w4', 'nope'), 2, NOW)).toBe(false);
    const listed = await store.webhooks.list('b1');
    expect(listed.map((w) => w.id)).toEqual(['w1', 'w2']);
    expect(listed[0]).toMatchObject({ bucket: 'b1', prefix: 'user/', kinds: ['set'], state: 'active', position: 1, createdAt: NOW });
    expect(JSON.stringify(listed)).not.toContain('s-w1');
    expect(await store.webhooks.list('b2')).toEqual([]);
    expect(await store.webhooks.get('b2', 'w1')).toBeUndefined();
  });

  it('pauses, resumes, rotates and removes only within its bucket', async () => {
    expect(await store.webhooks.pause('b2', 'w1', 'x')).toBe(false);
    expect(await store.webhooks.pause('b1', 'w1', 'by request')).toBe(true);
    expect(await store.webhooks.get('b1', 'w1')).toMatchObject({ state: 'paused', pausedReason: 'by request' });
    expect(await store.webhooks.resume('b1', 'w1')).toBe(true);
    expect(await store.webhooks.get('b1', 'w1')).toMatchObject({ state: 'active', pausedReason: null, attempts: 0 });
    expect(await store.webhooks.rotate('b1', 'w1', 'new-secret')).toBe(true);
    expect((await store.webhooks.all()).find((w) => w.id === 'w1')?.secret).toBe('new-secret');
    expect(await store.webhooks.remove('b1', 'w2')).toBe(true);
    expect(await store.webhooks.remove('b1', 'w2')).toBe(false);
  });

  it('leases a subscription to one holder at a time; only the holder moves its position', async () => {
    expect(await store.webhooks.claim('w1', 'A', NOW + 1000, NOW)).toBe(true);
    expect(await store.webhooks.claim('w1', 'B', NOW + 1500, NOW + 500)).toBe(false);
    expect(await store.webhooks.acknowledge('w1', 'B', 5)).toBe(false);
    expect(await store.webhooks.acknowledge('w1', 'A', 5)).toBe(true);
    // An acknowledgement never moves the position back.
    expect(await store.webhooks.acknowledge('w1', 'A', 3)).toBe(false);
    expect(await store.webhooks.claim('w1', 'B', NOW + 3000, NOW + 1000)).toBe(true);
    expect(await store.webhooks.fail('w1', 'A', { attempts: 1, failingSince: NOW, nextAttemptAt: NOW + 10, pausedReason: null })).toBe(
      false,
    );
    expect(await store.webhooks.fail('w1', 'B', { attempts: 3, failingSince: NOW, nextAttemptAt: NOW + 10, pausedReason: 'gave up' })).toBe(
      true,
    );
    expect(await store.webhooks.get('b1', 'w1')).toMatchObject({ position: 5, state: 'paused', pausedReason: 'gave up', attempts: 3 });
    await store.webhooks.release('w1', 'B');
    expect(await store.webhooks.claim('w1', 'A', NOW + 1000, NOW)).toBe(true);
  });

  it('keeps the newest attempts of the delivery log', async () => {
    for (let i = 0; i < 5; i++) {
      await store.webhooks.log(
        'w1',
        {
          attemptedAt: NOW + i,
          firstRevision: i,
          lastRevision: i,
          status: i === 4 ? 200 : 500,
          latencyMs: 3,
          error: i === 4 ? null : 'boom',
        },
        3,
      );
    }
    const log = await store.webhooks.deliveries('w1', 10);
    expect(log.map((a) => a.attemptedAt)).toEqual([NOW + 4, NOW + 3, NOW + 2]);
    expect(log[0]).toEqual({ attemptedAt: NOW + 4, firstRevision: 4, lastRevision: 4, status: 200, latencyMs: 3, error: null });
  });

  it('drops a bucket’s subscriptions with it', async () => {
    await store.webhooks.removeBucket('b1');
    expect(await store.webhooks.list('b1')).toEqual([]);
    expect(await store.webhooks.deliveries('w1', 10)).toEqual([]);
  });
});
