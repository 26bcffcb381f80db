import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/store.js';
import { PGBOUNCER_URL, POSTGRES_URL, withAdminClient } from '../helpers/backend.js';
import { bucketRecord, postgresTestSchema, text } from '../helpers/store-backends.js';
import { commit, setEntry } from '../helpers/store-writes.js';

/**
 * A PostgreSQL batch that lost its optimistic try to another writer of its bucket runs again
 * holding the bucket row's lock; while it waited, this instance's next writes to the bucket
 * queued, and they join it instead of waiting for the lock once more. Another instance's write is
 * stood for by an admin connection that updates the bucket row (a new row version) and holds it
 * until the batch is seen waiting.
 */
const NOW = 1_800_000_000_000;
const TARGETS = [
  { name: 'postgres', base: POSTGRES_URL, missing: 'KVB_TEST_POSTGRES_URL' },
  { name: 'pgbouncer', base: PGBOUNCER_URL, missing: 'KVB_TEST_PGBOUNCER_URL' },
];

for (const { name, base, missing } of TARGETS) {
  describe.skipIf(!base)(
    `PostgreSQL: a batch that waited for its bucket row takes in the writes queued meanwhile (${name})${base ? '' : `: SKIPPED, set ${missing}`}`,
    () => {
      const own = postgresTestSchema('kvb_locked', base);
      let store: Store;
      let n = 0;

      beforeAll(async () => {
        store = await own.open({ url: own.url({ application_name: own.schema }), poolSize: 6, pgPrepare: 'auto' });
      });
      afterAll(() => own.drop(store));

      /** The bucket's change log: per revision, its key, value and the transaction that wrote it. */
      const changeLog = (bucket: string) =>
        withAdminClient(async (client) => {
          const { rows } = await client.query<{ revision: string; key: Buffer; value: Buffer | null; tx: string }>(
            `select revision, key, value, xmin::text as tx from "${own.schema}".changes where bucket_id = $1 order by revision`,
            [bucket],
          );
          return rows.map((r) => ({ revision: Number(r.revision), key: r.key.toString(), value: r.value?.toString(), tx: r.tx }));
        });

      /**
       * Runs `first` while another transaction has changed the bucket row and holds it; once the
       * store's statement waits on that row (pg_stat_activity), `rest` are sent, then the other
       * transaction commits. Returns the answers of all, and the statement of the store's that waited.
       */
      async function behindAnotherWriter<T>(bucket: string, first: () => Promise<T>, rest: Array<() => Promise<T>>): Promise<T[]> {
        return (await waitingBehindAnotherWriter(bucket, first, rest)).answers;
      }

      async function waitingBehindAnotherWriter<T>(bucket: string, first: () => Promise<T>, rest: Array<() => Promise<T>>) {
        return withAdminClient(async (other) => {
          await other.query('begin');
          // Same values, a new row version: the store's optimistic statement finds it changed.
          await other.query(`update "${own.schema}".buckets set revision = revision where id = $1`, [bucket]);
          const head = first();
          // Asked on a connection of its own: pg_stat_activity stays as first read for a whole transaction.
          const waiting = () =>
            withAdminClient(
              async (client) =>
                (
                  await client.query<{ query: string }>(
                    `select query from pg_stat_activity where application_name = $1 and wait_event_type = 'Lock'`,
                    [own.schema],
                  )
                ).rows,
            );
          await expect.poll(async () => (await waiting()).length, { timeout: 10_000 }).toBe(1);
          const [{ query: waited }] = (await waiting()) as [{ query: string }];
          const tail = rest.map((write) => write());
          await other.query('commit');
          return { answers: await Promise.all([head, ...tail]), waited };
        });
      }

      it('plain SETs: the waiting batch and the nine queued behind it commit in one transaction, at consecutive revisions', async () => {
        const bucket = `sets-${++n}`;
        await store.buckets.create(bucketRecord(bucket));
        const set = (i: number) => () => setEntry(store, bucket, `k${i % 4}`, text(`v${i}`), null, NOW);
        const answers = await behindAnotherWriter(
          bucket,
          set(0),
          Array.from({ length: 9 }, (_, i) => set(i + 1)),
        );
        expect(answers).toEqual(Array.from({ length: 10 }, (_, i) => ({ revision: i + 1 })));
        const log = await changeLog(bucket);
        expect(log.map(({ revision, key, value }) => ({ revision, key, value }))).toEqual(
          Array.from({ length: 10 }, (_, i) => ({ revision: i + 1, key: `k${i % 4}`, value: `v${i}` })),
        );
        expect(new Set(log.map((c) => c.tx)).size).toBe(1);
        // Usage counts each key once, as the rules keep it.
        const [record] = await withAdminClient(
          async (client) =>
            (await client.query(`select usage_keys, revision from "${own.schema}".buckets where id = $1`, [bucket])).rows as Array<{
              usage_keys: string;
              revision: string;
            }>,
        );
        expect(record).toEqual({ usage_keys: '4', revision: '10' });
      });

      it('a bucket whose batch lost its try goes straight to the lock next time: one wait, not a lost try and a second wait', async () => {
        const bucket = `contended-${++n}`;
        await store.buckets.create(bucketRecord(bucket));
        const set = (i: number) => () => setEntry(store, bucket, `k${i}`, text(`v${i}`), null, NOW);
        const lost = await waitingBehindAnotherWriter(bucket, set(0), [set(1)]);
        // Not contended yet: the optimistic statement is what waits (and then loses).
        expect(lost.waited).toMatch(/^with s as/);
        expect(lost.answers).toEqual([{ revision: 1 }, { revision: 2 }]);
        const next = await waitingBehindAnotherWriter(bucket, set(2), [set(3), set(4)]);
        expect(next.waited).toMatch(/^select 1 from "[^"]+"\."buckets" where id = \$1 for update$/);
        expect(next.answers).toEqual([{ revision: 3 }, { revision: 4 }, { revision: 5 }]);
        const log = await changeLog(bucket);
        expect(log.map((c) => c.revision)).toEqual([1, 2, 3, 4, 5]);
        expect(new Set(log.slice(2).map((c) => c.tx)).size).toBe(1);
      });

      it('a mix (a transaction first, SETs queued): one transaction, through the rules', async () => {
        const bucket = `mix-${++n}`;
        await store.buckets.create(bucketRecord(bucket));
        await setEntry(store, bucket, 'old', text('o'), null, NOW);
        const txn = () =>
          commit(
            store,
            bucket,
            [
              { op: 'set', key: 'a', value: text('A'), expiresAt: null },
              { op: 'delete', key: 'old' },
            ],
            NOW,
          );
        const set = (i: number) => () => setEntry(store, bucket, `s${i}`, text(`v${i}`), null, NOW);
        const answers = await behindAnotherWriter<unknown>(bucket, txn, [set(1), set(2)]);
        expect(answers).toEqual([{ revision: 2 }, { revision: 3 }, { revision: 4 }]);
        const log = await changeLog(bucket);
        expect(log.slice(1).map(({ revision, key, value }) => ({ revision, key, value }))).toEqual([
          { revision: 2, key: 'a', value: 'A' },
          { revision: 2, key: 'old', value: undefined },
          { revision: 3, key: 's1', value: 'v1' },
          { revision: 4, key: 's2', value: 'v2' },
        ]);
        expect(new Set(log.slice(1).map((c) => c.tx)).size).toBe(1);
        expect(await store.getEntry(bucket, 'old', NOW)).toBeUndefined();
      });
    },
  );
}
