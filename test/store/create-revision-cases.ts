import { describe, expect, it } from 'vitest';
import { type Entry, type Refusal, type Store, type TxnOp, isRefusal } from '../../src/store/store.js';
import type { StoredValue } from '../../src/values/stored-value.js';
import { addCounter } from '../helpers/store-backends.js';
import { setEntry, deleteEntry, updateEntry, commit } from '../helpers/store-writes.js';

/**
 * The store conformance suite's create-revision cases (store-conformance.test.ts runs them on
 * every backend): a key's create revision is the revision at which it last became live from
 * absent or expired (etcd's CreateRevision), the fencing token of a lock. Kept apart only for the
 * suite file's size.
 */
export function createRevisionCases(store: () => Store, newBucket: () => Promise<string>, now: number): void {
  const text = (data: string): StoredValue => ({ type: 'text', data: Buffer.from(data) });
  const set = (key: string, data: string, expiresAt: number | null = null): TxnOp => ({ op: 'set', key, value: text(data), expiresAt });
  const revisionOf = (outcome: object): number => {
    if (isRefusal(outcome as Refusal)) throw new Error(`refused: ${JSON.stringify(outcome)}`);
    return (outcome as { revision: number }).revision;
  };
  const created = async (bucket: string, key: string, at = now) => (await store().getEntry(bucket, key, at))?.createRevision;

  describe('create revisions', () => {
    it('a set creates a key at its revision; sets over the live value (plain, conditional, counter, transaction, expire) keep it', async () => {
      const b = await newBucket();
      const first = revisionOf(await setEntry(store(), b, 'k', text('1'), null, now));
      expect(await created(b, 'k')).toBe(first);
      const second = revisionOf(await setEntry(store(), b, 'k', text('2'), null, now));
      const third = revisionOf(
        await setEntry(store(), b, 'k', { type: 'int64', data: Buffer.from('3') }, null, now, { ifMatch: [second] }),
      );
      expect(third).toBe(second + 1);
      await updateEntry(store(), b, 'k', now, addCounter(1));
      await commit(store(), b, [set('k', '5')], now);
      await commit(store(), b, [{ op: 'expire', key: 'k', expiresAt: now + 60_000 }], now);
      const entry = await store().getEntry(b, 'k', now);
      expect(entry?.revision).toBe(first + 5);
      expect(entry?.createRevision).toBe(first);
    });

    it('a set after a delete, or after the key expired (swept or not), creates it anew', async () => {
      const b = await newBucket();
      await setEntry(store(), b, 'd', text('1'), null, now);
      await deleteEntry(store(), b, 'd', now);
      const again = revisionOf(await setEntry(store(), b, 'd', text('2'), null, now));
      expect(await created(b, 'd')).toBe(again);

      // Expired at now - 10, not swept: each kind of write creates it anew.
      for (const write of ['set', 'counter', 'transaction', 'conditional'] as const) {
        const key = `e-${write}`;
        await setEntry(store(), b, key, text('old'), now - 10, now - 20);
        const revision =
          write === 'set'
            ? revisionOf(await setEntry(store(), b, key, text('new'), null, now))
            : write === 'conditional'
              ? revisionOf(await setEntry(store(), b, key, text('new'), null, now, { ifNoneMatch: '*' }))
              : write === 'counter'
                ? ((await updateEntry(store(), b, key, now, addCounter(1))) as Entry).revision
                : revisionOf(await commit(store(), b, [set(key, 'new')], now));
        expect(await created(b, key), write).toBe(revision);
      }

      await setEntry(store(), b, 'swept', text('old'), now - 10, now - 20);
      for (let got = -1; got !== 0; ) got = await store().maintenance.sweepExpired(now, 1000);
      const after = revisionOf(await setEntry(store(), b, 'swept', text('new'), null, now));
      expect(await created(b, 'swept')).toBe(after);
    });

    it('a transaction creates its new keys at its revision; a delete and set of a live key in one transaction keeps it (the key was never absent)', async () => {
      const b = await newBucket();
      const before = revisionOf(await setEntry(store(), b, 'live', text('1'), null, now));
      const revision = revisionOf(
        await commit(store(), b, [set('new', 'x'), { op: 'delete', key: 'live' }, set('live', '2'), set('new', 'y')], now),
      );
      expect(await created(b, 'new')).toBe(revision);
      expect(await created(b, 'live')).toBe(before);
    });

    it('sets of an absent key in one batch: the first creates it, the rest keep its create revision', async () => {
      const b = await newBucket();
      // Not awaited one by one: the stores take them as one batch where they batch writes.
      const revisions = (
        await Promise.all(Array.from({ length: 8 }, (_, i) => setEntry(store(), b, 'burst', text(String(i)), null, now)))
      ).map(revisionOf);
      expect(await created(b, 'burst')).toBe(Math.min(...revisions));
      expect((await store().getEntry(b, 'burst', now))?.revision).toBe(Math.max(...revisions));
    });

    it('{check, created} holds only while the key is live with that create revision', async () => {
      const b = await newBucket();
      const token = revisionOf(await setEntry(store(), b, 'lock', text('me'), now + 1000, now));
      await setEntry(store(), b, 'lock', text('me'), now + 1000, now, { ifMatch: [token] });
      const fenced = (at: number, token: number) =>
        commit(store(), b, [{ op: 'check', key: 'lock', created: token }, set('work', 'done')], at);
      expect(revisionOf(await fenced(now, token))).toBe(token + 2);
      expect(await fenced(now, token + 1)).toEqual({ refused: 'checks', failed: [0] });
      expect(await commit(store(), b, [{ op: 'check', key: 'never', created: token }], now)).toEqual({ refused: 'checks', failed: [0] });
      // Past its expiry the key is not live: the old token fails, and the next holder's differs.
      expect(await fenced(now + 1000, token)).toEqual({ refused: 'checks', failed: [0] });
      const next = revisionOf(await setEntry(store(), b, 'lock', text('other'), null, now + 1000, { ifNoneMatch: '*' }));
      expect(next).toBeGreaterThan(token);
      expect(await fenced(now + 1000, token)).toEqual({ refused: 'checks', failed: [0] });
      expect(revisionOf(await fenced(now + 1000, next))).toBe(next + 1);
    });

    it('reads carry it: getEntry, a listing with values, an export snapshot', async () => {
      const b = await newBucket();
      const first = revisionOf(await setEntry(store(), b, 'r', text('1'), null, now));
      await setEntry(store(), b, 'r', text('2'), null, now);
      const [listed] = await store().listEntries(b, { prefix: 'r', reverse: false, columns: 'values', offset: 0, limit: 10 }, now);
      expect(listed?.entry).toMatchObject({ revision: first + 1, createRevision: first });
      const snapshot = (await store().openSnapshot(b, '', now))!;
      try {
        expect((await snapshot.read(10)).map((e) => [e.key, e.entry.revision, e.entry.createRevision])).toEqual([['r', first + 1, first]]);
      } finally {
        await snapshot.close();
      }
    });

    it('an import is a write: a key live before it keeps its create revision, the others are created at its revision', async () => {
      const b = await newBucket();
      const kept = revisionOf(await setEntry(store(), b, 'kept', text('1'), null, now));
      // An import decides liveness by the clock (as the import route does), not by the suite's `now`.
      await setEntry(store(), b, 'lapsed', text('1'), Date.now() - 10_000, Date.now() - 20_000);
      const staging = await store().beginImport(b);
      await staging.add(
        ['kept', 'lapsed', 'fresh'].map((key) => ({
          key,
          entry: { type: 'text', data: Buffer.from('i'), expiresAt: null, createRevision: 1 },
        })),
      );
      const revision = revisionOf(await staging.apply({ replace: false, prefix: '' }));
      expect(await created(b, 'kept')).toBe(kept);
      expect(await created(b, 'lapsed')).toBe(revision);
      expect(await created(b, 'fresh')).toBe(revision);
    });

    it('a restore keeps each staged create revision (one without it gets its revision)', async () => {
      const b = await newBucket();
      const staging = await store().beginImport(b);
      await staging.add([
        { key: 'lock', entry: { type: 'text', data: Buffer.from('me'), expiresAt: null, revision: 40, createRevision: 31 } },
        { key: 'old-dump', entry: { type: 'text', data: Buffer.from('x'), expiresAt: null, revision: 12 } },
      ]);
      expect(await staging.apply({ replace: true, prefix: '', restoreRevision: 50 })).toEqual({ revision: 50 });
      expect(await store().getEntry(b, 'lock', now)).toMatchObject({ revision: 40, createRevision: 31 });
      expect(await store().getEntry(b, 'old-dump', now)).toMatchObject({ revision: 12, createRevision: 12 });
      // Writes after the restore go on from there: a set over the live lock keeps 31.
      await setEntry(store(), b, 'lock', text('me'), null, now);
      expect(await created(b, 'lock')).toBe(31);
    });
  });
}
