import type { FastifyBaseLogger } from 'fastify';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { GATHER_MS, WebhookDeliverer } from '../../src/server/webhooks/webhook-deliverer.js';
import { deliveryOptions } from '../../src/server/webhooks/webhook-delivery.js';
import type { Store } from '../../src/store/store.js';
import type { ScannedWebhook } from '../../src/store/webhook-types.js';

const log = { warn() {}, info() {} } as unknown as FastifyBaseLogger;

/**
 * A store with the parts the delivery loop touches, counting its statements: `all` is the loop's
 * look at the subscriptions, `claim` the first statement of a delivery. Its change log has nothing
 * under any prefix, so a delivery only moves the position (no request leaves the process).
 */
function fakeStore(shared: boolean) {
  const commits: Array<(buckets: string[]) => void> = [];
  const subscribed: Array<() => void> = [];
  const hooks: ScannedWebhook[] = [];
  const revisions = new Map<string, number>();
  const count = { all: 0, claim: 0 };
  /** While set, a delivery's acknowledgement waits for it: commits land while the delivery is under way. */
  let gate: Promise<void> | undefined;
  const store = {
    flags: { shared },
    changes: {
      ...(!shared && { onCommit: (listener: (buckets: string[]) => void) => commits.push(listener) }),
      bounds: async (bucket: string) => ({ floor: 0, watchFloor: 0, revision: revisions.get(bucket) ?? 0 }),
      read: async () => [],
    },
    webhooks: {
      all: async () => {
        count.all++;
        return hooks.map((w) => ({ ...w, bucketRevision: revisions.get(w.bucket) ?? 0 }));
      },
      deliverable: async (id: string) => hooks.find((w) => w.id === id),
      claim: async () => {
        count.claim++;
        return true;
      },
      acknowledge: async (id: string, _holder: string, position: number) => {
        await gate;
        hooks.find((w) => w.id === id)!.position = position;
        return true;
      },
      onSubscribed: (listener: () => void) => subscribed.push(listener),
      release: async () => {},
    },
  } as unknown as Store;
  return {
    store,
    count,
    hooks,
    /** Holds every acknowledgement until the returned function is called. */
    hold() {
      let open = () => {};
      gate = new Promise<void>((resolve) => (open = resolve));
      return async () => {
        gate = undefined;
        open();
        await vi.advanceTimersByTimeAsync(0);
      };
    },
    /** A commit to `bucket`, as the store announces it (SQLite), or as another instance makes it (shared). */
    async commit(bucket: string) {
      revisions.set(bucket, (revisions.get(bucket) ?? 0) + 1);
      for (const listener of commits) listener([bucket]);
      await vi.advanceTimersByTimeAsync(0);
    },
    async subscribe(bucket: string, retryAt = 0) {
      const base = { id: `wh_${hooks.length}`, bucket, url: 'http://127.0.0.1:9/', prefix: 'only/', kinds: ['set', 'delete', 'expire'] };
      const state = { state: 'active', pausedReason: null, failingSince: null, attempts: retryAt ? 1 : 0, nextAttemptAt: retryAt };
      const lease = { secret: 'whsec_x', holder: null, leaseUntil: 0, createdAt: 0, bucketRevision: null };
      hooks.push({ ...base, ...state, ...lease, position: revisions.get(bucket) ?? 0 } as ScannedWebhook);
      for (const listener of subscribed) listener();
      await vi.advanceTimersByTimeAsync(0);
    },
  };
}

const settings = { webhookAllowPrivate: true, webhookTimeoutSeconds: 1, webhookRetrySeconds: 600 };

describe('the webhook delivery loop wakes only when there may be work', () => {
  let deliverer: WebhookDeliverer | undefined;
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(async () => {
    await deliverer?.stop();
    deliverer = undefined;
    vi.useRealTimers();
  });
  const start = async (store: Store) => {
    deliverer = new WebhookDeliverer(store, () => Date.now(), log, deliveryOptions(settings)).start();
    await vi.advanceTimersByTimeAsync(0);
  };

  it('on SQLite, with no webhook: one look at start, none for commits or as time passes', async () => {
    const fake = fakeStore(false);
    await start(fake.store);
    expect(fake.count.all).toBe(1);
    for (let i = 0; i < 100; i++) await fake.commit('b');
    await vi.advanceTimersByTimeAsync(60_000);
    expect(fake.count).toEqual({ all: 1, claim: 0 });
  });

  it("on SQLite, a commit to a webhook's bucket wakes it; others' commits and idle time do not", async () => {
    const fake = fakeStore(false);
    await start(fake.store);
    await fake.subscribe('b');
    expect(fake.count).toEqual({ all: 2, claim: 0 });
    await fake.commit('other');
    await vi.advanceTimersByTimeAsync(60_000);
    expect(fake.count).toEqual({ all: 2, claim: 0 });
    await fake.commit('b');
    // The delivery the commit started, without a look; it ends caught up, waiting for the next commit.
    expect(fake.count).toEqual({ all: 2, claim: 1 });
    await vi.advanceTimersByTimeAsync(60_000);
    expect(fake.count).toEqual({ all: 2, claim: 1 });
  });

  it('on SQLite, a webhook backing off sleeps until its retry is due, whatever is committed meanwhile', async () => {
    const fake = fakeStore(false);
    await start(fake.store);
    await fake.commit('b');
    await fake.subscribe('b', Date.now() + 3000);
    fake.count.all = 0;
    await fake.commit('b');
    await vi.advanceTimersByTimeAsync(2999);
    expect(fake.count).toEqual({ all: 0, claim: 0 });
    await vi.advanceTimersByTimeAsync(1);
    expect(fake.count.claim).toBe(1);
  });

  it('on SQLite, a delivery after which the bucket moved on goes on to the next without a look after GATHER_MS, and one caught up waits for a commit', async () => {
    const fake = fakeStore(false);
    await start(fake.store);
    await fake.subscribe('b');
    fake.count.all = 0;
    const release = fake.hold();
    await fake.commit('b');
    expect(fake.count).toEqual({ all: 0, claim: 1 });
    // Committed while the first delivery waits for its acknowledgement.
    await fake.commit('b');
    await fake.commit('b');
    await release();
    expect(fake.hooks[0]!.position).toBe(1);
    // The next delivery gathers what comes in the meantime, then takes all of it at once.
    await vi.advanceTimersByTimeAsync(GATHER_MS - 1);
    await fake.commit('b');
    expect(fake.count).toEqual({ all: 0, claim: 1 });
    await vi.advanceTimersByTimeAsync(1);
    expect(fake.hooks[0]!.position).toBe(4);
    expect(fake.count).toEqual({ all: 0, claim: 2 });
    await vi.advanceTimersByTimeAsync(60_000);
    expect(fake.count).toEqual({ all: 0, claim: 2 });
    await fake.commit('b');
    expect(fake.hooks[0]!.position).toBe(5);
    expect(fake.count).toEqual({ all: 0, claim: 3 });
  });

  it('on a shared store (PostgreSQL), polls every 5 s with no webhook, every 250 ms with some, and delivers only what has changes waiting', async () => {
    const fake = fakeStore(true);
    await start(fake.store);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(fake.count).toEqual({ all: 3, claim: 0 });
    await fake.subscribe('b');
    fake.count.all = 0;
    await vi.advanceTimersByTimeAsync(1000);
    expect(fake.count).toEqual({ all: 4, claim: 0 });
    // Another instance's commit is seen at the next poll.
    await fake.commit('b');
    await vi.advanceTimersByTimeAsync(250);
    expect(fake.count.claim).toBe(1);
  });
});
