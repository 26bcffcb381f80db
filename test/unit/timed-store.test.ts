import { describe, expect, it } from 'vitest';
import type { WriteOp } from '../../src/store/core/write-ops.js';
import type { Store } from '../../src/store/store.js';
import { type StoreOp, timedStore } from '../../src/store/timed-store.js';

/** A store whose every method answers at once; only the members the test calls exist. */
function fakeStore() {
  const calls: string[] = [];
  const answer =
    (name: string, value: unknown = undefined) =>
    async (..._args: unknown[]) => {
      calls.push(name);
      return value;
    };
  const store = {
    flags: { backend: 'sqlite', shared: false, capabilities: 'fake', cachesEntries: true },
    stats: { sweptKeys: 0, cacheHits: 0, cacheMisses: 0 },
    write: answer('write', { revision: 1 }),
    getEntry: answer('getEntry'),
    getEntryNow: (..._args: unknown[]) => {
      calls.push('getEntryNow');
      return undefined;
    },
    listEntries: answer('listEntries', []),
    buckets: {
      create: answer('buckets.create'),
      get: answer('buckets.get'),
      update: answer('buckets.update', true),
      delete: answer('buckets.delete', true),
      list: answer('buckets.list', []),
      count: answer('buckets.count', 0),
      revision: answer('buckets.revision', 0),
      usage: answer('buckets.usage'),
    },
    history: { readAt: answer('history.readAt'), listAt: answer('history.listAt'), keyHistory: answer('history.keyHistory', []) },
    changes: {
      read: answer('changes.read', []),
      bounds: answer('changes.bounds'),
      prune: answer('changes.prune', 0),
      bound: answer('changes.bound', 0),
    },
    maintenance: {
      sweepExpired: answer('maintenance.sweepExpired', 0),
      checkIntegrity: answer('maintenance.checkIntegrity', []),
      countEntries: answer('maintenance.countEntries', 0),
    },
  } as unknown as Store;
  return { store, calls };
}

function timed() {
  const { store, calls } = fakeStore();
  const observed: StoreOp[] = [];
  return { store: timedStore(store, (op) => void observed.push(op)), inner: store, calls, observed };
}

describe('timedStore', () => {
  it('times each write under its kind: set, delete, update (a counter), commit', async () => {
    const { store, observed, calls } = timed();
    const value = { type: 'text' as const, data: Buffer.from('x') };
    const ops: WriteOp[] = [
      { op: 'set', key: 'k', value, expiresAt: null, now: 1 },
      { op: 'delete', key: 'k', now: 1 },
      { op: 'counter', key: 'k', delta: { kind: 'int64', value: 1n }, expiresAt: null, keepExpiry: true, now: 1 },
      { op: 'commit', ops: [], now: 1 },
    ];
    for (const op of ops) await store.write('b', op);
    expect(observed).toEqual(['set', 'delete', 'update', 'commit']);
    expect(calls).toEqual(['write', 'write', 'write', 'write']);
  });

  it('times the grouped methods as before: bucket reads and writes, counts, history', async () => {
    const { store, observed } = timed();
    await store.buckets.get('b');
    await store.buckets.revision('b');
    await store.buckets.usage('b');
    await store.buckets.create({} as never);
    await store.buckets.update('b', {});
    await store.buckets.delete('b');
    await store.buckets.count();
    await store.maintenance.countEntries();
    await store.history.readAt('b', 'k', 1);
    await store.history.listAt('b', {} as never, 1);
    await store.history.keyHistory('b', 'k', 1, 1);
    await store.getEntry('b', 'k', 1);
    store.getEntryNow?.('b', 'k', 1);
    await store.listEntries('b', {} as never, 1);
    expect(observed).toEqual([
      'bucket_read',
      'bucket_read',
      'bucket_read',
      'bucket_write',
      'bucket_write',
      'bucket_write',
      'count',
      'count',
      'get',
      'list',
      'list',
      'get',
      'get',
      'list',
    ]);
  });

  it('passes the background and whole-store work through untimed, and properties unchanged', async () => {
    const { store, inner, observed, calls } = timed();
    await store.buckets.list(undefined, 10);
    await store.changes.read('b', 0, 1, 10);
    await store.changes.bounds('b');
    await store.changes.prune(0, 10);
    await store.changes.bound(0, 0);
    await store.maintenance.sweepExpired(0, 10);
    await store.maintenance.checkIntegrity();
    expect(observed).toEqual([]);
    expect(calls).toHaveLength(7);
    expect(store.flags).toBe(inner.flags);
    expect(store.stats).toBe(inner.stats);
    expect(store.changes).toBe(inner.changes);
    expect(store.buckets).toBe(store.buckets);
  });

  it('reports a failed call too, and keeps a synchronous method synchronous', async () => {
    const { store: inner } = fakeStore();
    const observed: StoreOp[] = [];
    const failing = { ...inner, getEntry: async () => Promise.reject(new Error('down')) } as Store;
    const store = timedStore(failing, (op) => void observed.push(op));
    await expect(store.getEntry('b', 'k', 1)).rejects.toThrow('down');
    expect(store.getEntryNow?.('b', 'k', 1)).toBeUndefined();
    expect(observed).toEqual(['get', 'get']);
  });
});
