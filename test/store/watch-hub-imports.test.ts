import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Watcher, WatchHub } from '../../src/server/watch-hub.js';
import type { Change, Store } from '../../src/store/store.js';
import { describeEachBackend, openTestStore, bucketRecord } from '../helpers/store-backends.js';
import { setEntry } from '../helpers/store-writes.js';

const NOW = 1_800_000_000_000;
const text = (data: string) => ({ type: 'text' as const, data: Buffer.from(data) });
const set = async (store: Store, bucket: string, key: string) => {
  const written = await setEntry(store, bucket, key, text(key), null, NOW);
  if ('refused' in written) throw new Error('set refused');
  return written.revision;
};

type FeedRead = 'bounds' | 'read';

/**
 * The store as the hub sees it, with two things a test needs: every change the hub read, and a
 * one-shot hook that runs right after the hub's next call of one of its two reads of the change
 * feed has its answer and before the hub gets it (so a commit lands between the hub's two reads, on purpose).
 */
function observed(store: Store) {
  const read: Change[] = [];
  let hook: { after: FeedRead; run: () => Promise<void> } | undefined;
  const changes = new Proxy(store.changes, {
    get(target, name) {
      const member = Reflect.get(target, name, target) as unknown;
      if (typeof member !== 'function') return member;
      const bound = (member as (...args: unknown[]) => unknown).bind(target);
      if (name !== 'bounds' && name !== 'read') return bound;
      return async (...args: unknown[]) => {
        const answer = await bound(...args);
        if (name === 'read') read.push(...(answer as Change[]));
        const armed = hook;
        if (armed?.after === name) {
          hook = undefined;
          await armed.run();
        }
        return answer;
      };
    },
  });
  const proxy = new Proxy(store, {
    get(target, name) {
      if (name === 'changes') return changes;
      const member = Reflect.get(target, name, target) as unknown;
      return typeof member === 'function' ? member.bind(target) : member;
    },
  });
  return {
    store: proxy,
    read,
    /** Runs `run` right after the hub's next `after` read. */
    between(after: FeedRead, run: () => Promise<void>) {
      hook = { after, run };
    },
  };
}

/** A watcher that records what the hub hands it. */
function recordingWatcher(bucket: string) {
  const delivered: Array<{ revision: number; keys: string[] }> = [];
  const resets: Array<{ revision: number; oldest: number }> = [];
  const watcher: Watcher = {
    bucket,
    prefix: '',
    last: 0,
    deliver: (revision, changes) => void delivered.push({ revision, keys: changes.map((c) => c.key) }),
    reset: (revision, oldest) => void resets.push({ revision, oldest }),
  };
  return { watcher, delivered, resets };
}

/**
 * The watch hub over each backend's store: an import (one revision of up to millions of keys)
 * resets the watchers behind it and is never read from the log as events, whenever it commits.
 */
describeEachBackend('watch hub: imports reset watchers', (backend, url) => {
  let store: Store;
  let cleanup: () => Promise<void>;
  let n = 0;
  beforeAll(async () => {
    ({ store, cleanup } = await openTestStore(backend, url, { prefix: 'kvb_hub', poolSize: 4 }));
  });
  afterAll(async () => {
    await store?.close();
    await cleanup?.();
  });

  const importKeys = async (s: Store, bucket: string, keys: string[]) => {
    const staging = await s.beginImport(bucket);
    await staging.add(keys.map((key) => ({ key, entry: { ...text(key), expiresAt: null } })));
    const applied = await staging.apply({ replace: false, prefix: '' });
    if ('refused' in applied) throw new Error('import refused');
    return applied.revision;
  };

  // Both orders: whichever read the hub makes first, the import commits right after it.
  for (const first of ['bounds', 'read'] as const) {
    it(`an import that commits right after the hub's changes.${first} resets the live watcher; its keys are not events`, async () => {
      const bucket = `hub-${first}-${++n}`;
      await store.buckets.create(bucketRecord(bucket));
      const feed = observed(store);
      const hub = new WatchHub(feed.store);
      try {
        const w = recordingWatcher(bucket);
        expect(await hub.join(w.watcher, undefined, () => {})).toEqual({ joined: true, rev: 0 });
        const written = await set(store, bucket, 'n');
        hub.wake([bucket]);
        await expect.poll(() => w.delivered).toEqual([{ revision: written, keys: ['n'] }]);

        let imported = -1;
        feed.between(first, async () => {
          imported = await importKeys(store, bucket, ['i1', 'i2']);
        });
        hub.wake([bucket]);
        await expect.poll(() => imported).toBeGreaterThan(written);
        // The commit's own wake (SQLite) or the poller (PostgreSQL) brings the next read; this one
        // makes sure there is one.
        hub.wake([bucket]);
        await expect.poll(() => w.resets).toEqual([{ revision: imported, oldest: imported }]);
        expect(w.delivered).toEqual([{ revision: written, keys: ['n'] }]);
        expect(feed.read.filter((c) => c.revision === imported)).toEqual([]);
      } finally {
        hub.closeAll('test over');
      }
    });
  }

  it('a watcher joining with a since before an import is reset without the import being read', async () => {
    const bucket = `hub-since-${++n}`;
    await store.buckets.create(bucketRecord(bucket));
    const before = await set(store, bucket, 'n');
    const imported = await importKeys(store, bucket, ['i1', 'i2', 'i3']);
    const feed = observed(store);
    const hub = new WatchHub(feed.store);
    try {
      const w = recordingWatcher(bucket);
      expect(await hub.join(w.watcher, before, () => {})).toEqual({ joined: false, reset: { rev: imported, oldest: imported } });
      expect(feed.read.filter((c) => c.revision === imported)).toEqual([]);
    } finally {
      hub.closeAll('test over');
    }
  });
});
