import { beforeEach, describe, expect, it } from 'vitest';
import { SHARED_CACHE_MAX_AGE_MS } from '../../src/server/app.js';
import { BucketCache } from '../../src/server/bucket-cache.js';
import type { BucketRecord, Store } from '../../src/store/store.js';
import { type TestClock, testClock } from '../helpers/test-clock.js';

const record = (changes: Partial<BucketRecord> = {}): BucketRecord => ({
  id: 'b',
  email: 'e',
  secretKeyHash: 'h-secret',
  readKeyHash: 'h-read',
  writeKeyHash: null,
  signingKey: 'sign',
  signingKeyGeneration: 0,
  tokenSalt: null,
  defaultTtl: 0,
  ...changes,
});

/** A store holding one bucket record that the test swaps, as another instance would. */
function fakeStore() {
  const state = { current: record() as BucketRecord | undefined, loads: 0 };
  const store = {
    buckets: {
      get: async () => {
        state.loads++;
        return state.current;
      },
    },
  } as unknown as Store;
  return { store, state };
}

describe('bucket cache on a shared store', () => {
  // The max age is measured on the cache's clock: a test clock makes "after the max age" exact
  // instead of a sleep that a loaded machine can stretch past the next deadline.
  let clock: TestClock;
  beforeEach(() => {
    clock = testClock();
  });

  // The bound docs/scale-out.md promises: another instance's change is seen within 1 s.
  it('reloads the record after the shared-store max age, so another instance’s change shows within it', async () => {
    expect(SHARED_CACHE_MAX_AGE_MS).toBe(1000);
    const { store, state } = fakeStore();
    const cache = new BucketCache(store, SHARED_CACHE_MAX_AGE_MS, undefined, clock.now);
    expect((await cache.get('b'))?.record.readKeyHash).toBe('h-read');
    state.current = record({ readKeyHash: 'h-read-2' });
    clock.advance(SHARED_CACHE_MAX_AGE_MS - 1);
    expect((await cache.get('b'))?.record.readKeyHash).toBe('h-read');
    clock.advance(1);
    expect((await cache.get('b'))?.record.readKeyHash).toBe('h-read-2');
    state.current = undefined;
    clock.advance(SHARED_CACHE_MAX_AGE_MS);
    expect(await cache.get('b')).toBeUndefined();
  });

  it('keeps verification results across a reload only while the fields they depend on are unchanged', async () => {
    const { store, state } = fakeStore();
    const cache = new BucketCache(store, 10, undefined, clock.now);
    const first = (await cache.get('b'))!;
    first.keyRoles.set('digest', new Set(['read']));
    first.wrongCredentials.set('guess', new Set());
    first.tokens.set('token', null);
    clock.advance(10);
    state.current = record({ defaultTtl: 60, signingKeyGeneration: 1 });
    const second = (await cache.get('b'))!;
    expect(second).not.toBe(first);
    expect(second.keyRoles.get('digest')).toEqual(new Set(['read']));
    expect(second.wrongCredentials.has('guess')).toBe(true);
    expect(second.tokens.has('token')).toBe(true);
    clock.advance(10);
    state.current = record({ readKeyHash: 'h-read-2', signingKey: 'sign-2' });
    const third = (await cache.get('b'))!;
    expect(third.keyRoles.size).toBe(0);
    // A key rotation forgets the wrong guesses too: one may be the new key.
    expect(third.wrongCredentials.size).toBe(0);
    expect(third.tokens.size).toBe(0);
    expect(state.loads).toBe(3);
  });

  it('concurrent first requests for a bucket share one load; a change during a load is not cached', async () => {
    const { store, state } = fakeStore();
    const cache = new BucketCache(store, 60_000);
    const all = await Promise.all(Array.from({ length: 50 }, () => cache.get('b')));
    expect(state.loads).toBe(1);
    expect(new Set(all).size).toBe(1);
    cache.invalidate('b');
    const during = cache.get('b');
    // This instance changes the bucket while the record is being read: what was read is not kept.
    cache.invalidate('b');
    state.current = record({ readKeyHash: 'h-read-2' });
    expect((await during)?.record.readKeyHash).toBe('h-read');
    expect((await cache.get('b'))?.record.readKeyHash).toBe('h-read-2');
    expect(state.loads).toBe(3);
  });
});
