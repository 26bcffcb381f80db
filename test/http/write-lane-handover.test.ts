import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StorageUnavailableError } from '../../src/store/storage-errors.js';
import type { Store } from '../../src/store/store.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';
import { call, createBucket } from '../helpers/http.js';
import { testClock } from '../helpers/test-clock.js';

/**
 * A write the write lane made and handed to Fastify (its answer a refusal or an error) is
 * answered from that write's own outcome, never from the route opening the bucket again. On a
 * shared store (PostgreSQL) the bucket cache reloads a bucket every second: a write that failed
 * through an outage outlived its cache entry, the route's reload failed through the same outage,
 * and a write of unknown outcome (it may have committed) was answered as a plain 503, which a
 * client takes as not applied (robustness pg2-cut and ha2-switchover recorded such writes).
 *
 * The store here is the real one with the faults of that moment around it: it says it is shared
 * (so the cache ages), a write waits until the test settles it, and reading a bucket can fail.
 */
const clock = testClock();
let server: AppServer;
let bucket: string;
/** A write held until the test settles it: `started` resolves (through `begun`) once the store was asked for it. */
interface HeldWrite {
  settle: (outcome: Promise<never>) => void;
  started: Promise<void>;
  begun: () => void;
}
const faults = {
  /** The next write's outcome, settled by the test; the real write when unset. */
  pendingWrite: undefined as HeldWrite | undefined,
  bucketReadsFail: false,
};

function faulty(store: Store): Store {
  const buckets = new Proxy(store.buckets, {
    get(target, name, receiver) {
      const real = Reflect.get(target, name, receiver);
      if (name !== 'get' || typeof real !== 'function') return typeof real === 'function' ? real.bind(target) : real;
      return (...args: unknown[]) =>
        faults.bucketReadsFail
          ? Promise.reject(new StorageUnavailableError(new Error('Connection terminated unexpectedly')))
          : real.apply(target, args);
    },
  });
  return new Proxy(store, {
    get(target, name, receiver) {
      if (name === 'flags') return { ...target.flags, shared: true };
      if (name === 'buckets') return buckets;
      const real = Reflect.get(target, name, receiver);
      if (name !== 'write' || typeof real !== 'function') return typeof real === 'function' ? real.bind(target) : real;
      return (...args: unknown[]) => {
        const pending = faults.pendingWrite;
        if (pending === undefined) return real.apply(target, args);
        faults.pendingWrite = undefined;
        return new Promise((resolve, reject) => {
          pending.settle = (outcome) => outcome.then(resolve, reject);
          pending.begun();
        });
      };
    },
  });
}

/** Holds the next write until `settle`. */
function holdNextWrite(): HeldWrite {
  let begun!: () => void;
  const started = new Promise<void>((resolve) => {
    begun = resolve;
  });
  const pending: HeldWrite = { settle: () => {}, started, begun };
  faults.pendingWrite = pending;
  return pending;
}

/** The writes the lane took, and handed over, since the counts `took`. */
function laneSince(took: { writes: number; handedOver: number }) {
  const now = server.app.laneCounts;
  return { took: now.writes - took.writes, handedOver: now.handedOver - took.handedOver };
}

beforeAll(async () => {
  server = await startAppServer({ clock: clock.now, wrapStore: faulty });
  bucket = await createBucket(server.api, { secret_key: 'admin', default_ttl: '0' });
  // Through the route once: the cache now knows the bucket and the credential, so the lane takes writes.
  const warm = await call(`${server.api}/${bucket}/warm`, { method: 'PUT', token: 'admin', body: 'x' });
  expect(warm.status, warm.text).toBe(200);
}, 60_000);
afterAll(async () => {
  await server?.stop();
});

describe('a write the lane handed over is answered from its own outcome', () => {
  for (const [name, init] of [
    ['PUT', { method: 'PUT', body: 'v' }],
    ['PATCH', { method: 'PATCH', body: '+1' }],
    ['DELETE', { method: 'DELETE' }],
  ] as const) {
    it(`${name}: a lost commit answer stays "may or may not have been applied" when the bucket's reload fails`, async () => {
      const took = { ...server.app.laneCounts };
      const held = holdNextWrite();
      const answer = fetch(`${server.api}/${bucket}/k-${name}`, {
        ...init,
        // text/plain as the lane takes it (fetch's own default spells its charset in capitals).
        headers: { authorization: 'Bearer admin', ...(init.method !== 'DELETE' && { 'content-type': 'text/plain' }) },
      });
      await held.started;
      // While the write was under way: the cache entry aged out, and the storage went away.
      clock.advance(5_000);
      faults.bucketReadsFail = true;
      try {
        held.settle(Promise.reject(new StorageUnavailableError(new Error('Connection terminated unexpectedly'), { outcomeUnknown: true })));
        const res = await answer;
        const body = (await res.json()) as { error: { detail: string } };
        expect(res.status).toBe(503);
        expect(body.error.detail).toMatch(/may or may not have been applied/);
        expect(laneSince(took)).toEqual({ took: 1, handedOver: 1 });
      } finally {
        faults.bucketReadsFail = false;
      }
      // The cache reloads (storage is back): the next write goes through as usual.
      const after = await call(`${server.api}/${bucket}/k-${name}-after`, { method: 'PUT', token: 'admin', body: 'x' });
      expect(after.status, after.text).toBe(200);
    });
  }

  it('a refusal stays the refusal (412), not the reload failure', async () => {
    const took = { ...server.app.laneCounts };
    const held = holdNextWrite();
    const answer = fetch(`${server.api}/${bucket}/warm`, {
      method: 'PUT',
      body: 'y',
      headers: { authorization: 'Bearer admin', 'content-type': 'text/plain', 'if-match': '"1"' },
    });
    await held.started;
    clock.advance(5_000);
    faults.bucketReadsFail = true;
    try {
      const current = await server.store.getEntry(bucket, 'warm', clock.now());
      held.settle(Promise.resolve({ refused: 'precondition', current }) as unknown as Promise<never>);
      const res = await answer;
      expect(res.status, await res.text()).toBe(412);
      expect(laneSince(took)).toEqual({ took: 1, handedOver: 1 });
    } finally {
      faults.bucketReadsFail = false;
    }
  });
});
