import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Watcher, WatchHub } from '../../src/server/watch-hub.js';
import type { Change, CommittedChanges, Store } from '../../src/store/store.js';
import { bucketRecord, openTestStore } from '../helpers/store-backends.js';
import { commit, deleteEntry, setEntry } from '../helpers/store-writes.js';

const text = (data: string) => ({ type: 'text' as const, data: Buffer.from(data) });

/** The store as the hub sees it, counting the hub's reads of the change log. */
function counted(store: Store) {
  const counts = { read: 0 };
  const changes = { ...store.changes };
  changes.read = (...args) => {
    counts.read++;
    return store.changes.read(...args);
  };
  for (const name of ['bounds', 'prune', 'bound', 'onCommit', 'watch'] as const) {
    const member = store.changes[name] as ((...a: unknown[]) => unknown) | undefined;
    if (member) (changes as Record<string, unknown>)[name] = member.bind(store.changes);
  }
  return { store: new Proxy(store, { get: (target, name) => (name === 'changes' ? changes : Reflect.get(target, name, target)) }), counts };
}

/** A watcher that records each revision's changes as the hub hands them. */
function recordingWatcher(bucket: string) {
  const delivered: Array<[number, Change[]]> = [];
  const watcher: Watcher = {
    bucket,
    prefix: '',
    last: 0,
    deliver: (revision, changes) => void delivered.push([revision, changes]),
    reset: () => {
      throw new Error('not reset here');
    },
  };
  return { watcher, delivered };
}

/**
 * SQLite is written by this process alone: the writer's answer carries each commit's changes to
 * the buckets the hub watches, and the hub hands them out without reading them back from the
 * log; they are what the log holds.
 */
describe('watch hub on SQLite: fed the committed changes', () => {
  let store: Store;
  let cleanup: () => Promise<void>;
  let n = 0;
  beforeAll(async () => {
    ({ store, cleanup } = await openTestStore('sqlite', '', { prefix: 'kvb-hub-commits', poolSize: 1 }));
  });
  afterAll(async () => {
    await store?.close();
    await cleanup?.();
  });

  it('sets, deletes and a transaction reach the watcher as the log has them, and the hub reads none of them back', async () => {
    const bucket = `commits-${++n}`;
    await store.buckets.create(bucketRecord(bucket));
    const seen = counted(store);
    const hub = new WatchHub(seen.store);
    try {
      const w = recordingWatcher(bucket);
      expect(await hub.join(w.watcher, undefined, () => {})).toEqual({ joined: true, rev: 0 });
      const readsAtJoin = seen.counts.read;
      const now = Date.now();
      await setEntry(store, bucket, 'a', text('1'), null, now);
      // Sent together: one batch, two revisions.
      await Promise.all([setEntry(store, bucket, 'b', text('2'), now + 60_000, now), deleteEntry(store, bucket, 'a', now)]);
      // Written in the opposite order to the keys': handed out in the log's (key) order.
      await commit(
        store,
        bucket,
        [
          { op: 'set', key: 'z', value: text('3'), expiresAt: null },
          { op: 'set', key: 'c', value: text('4'), expiresAt: null },
        ],
        now,
      );
      await expect.poll(() => w.delivered.map(([revision]) => revision)).toEqual([1, 2, 3, 4]);
      expect(seen.counts.read).toBe(readsAtJoin);
      const logged = await store.changes.read(bucket, 0, 4, 100);
      expect(w.delivered.flatMap(([, changes]) => changes)).toEqual(logged);
      expect(w.delivered[3]![1].map((c) => c.key)).toEqual(['c', 'z']);
    } finally {
      hub.closeAll('test over');
    }
  });

  it('a bucket nobody watches any longer: its commits carry nothing, and a new watcher is fed again', async () => {
    const bucket = `commits-${++n}`;
    await store.buckets.create(bucketRecord(bucket));
    const seen = counted(store);
    const hub = new WatchHub(seen.store);
    try {
      const first = recordingWatcher(bucket);
      await hub.join(first.watcher, undefined, () => {});
      hub.leave(first.watcher);
      const now = Date.now();
      await setEntry(store, bucket, 'unwatched', text('1'), null, now);
      const second = recordingWatcher(bucket);
      expect(await hub.join(second.watcher, undefined, () => {})).toEqual({ joined: true, rev: 1 });
      const readsAtJoin = seen.counts.read;
      await setEntry(store, bucket, 'watched', text('2'), null, now);
      await expect
        .poll(() => second.delivered.map(([revision, changes]) => [revision, changes.map((c) => c.key)]))
        .toEqual([[2, ['watched']]]);
      expect(seen.counts.read).toBe(readsAtJoin);
    } finally {
      hub.closeAll('test over');
    }
  });

  it('a watch that begins or ends inside a batch: each commit carries all of its revisions of the bucket, or none', async () => {
    const bucket = `commits-${++n}`;
    await store.buckets.create(bucketRecord(bucket));
    const carried: CommittedChanges[] = [];
    store.changes.onCommit!((_buckets, committed) => carried.push(...(committed ?? []).filter((c) => c.bucket === bucket)));
    const now = Date.now();
    // One turn, so one message to the writer and one batch: writes, and the watch begun and ended between them.
    const writes = [setEntry(store, bucket, 'a', text('1'), null, now)];
    const unwatch = store.changes.watch!(bucket);
    writes.push(setEntry(store, bucket, 'b', text('2'), null, now));
    unwatch();
    writes.push(setEntry(store, bucket, 'c', text('3'), null, now));
    const unwatchAgain = store.changes.watch!(bucket);
    writes.push(setEntry(store, bucket, 'd', text('4'), null, now));
    await Promise.all(writes);
    // Watched from the start of this one: it carries its changes.
    await setEntry(store, bucket, 'e', text('5'), null, now);
    unwatchAgain();
    expect(carried.length).toBeGreaterThan(0);
    for (const c of carried) {
      const every = Array.from({ length: c.revision - c.from }, (_, i) => c.from + 1 + i);
      expect({ from: c.from, revisions: [...new Set(c.changes.map((change) => change.revision))] }).toEqual({
        from: c.from,
        revisions: every,
      });
    }
    expect(carried.at(-1)).toMatchObject({ from: 4, revision: 5 });
  });
});
