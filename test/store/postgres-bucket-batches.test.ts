import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StorageUnavailableError } from '../../src/store/storage-errors.js';
import type { Store } from '../../src/store/store.js';
import { PGBOUNCER_URL, POSTGRES_URL, withAdminClient } from '../helpers/backend.js';
import { addCounter, bucketRecord, postgresTestSchema, text } from '../helpers/store-backends.js';
import { commit, setEntry, updateEntry } from '../helpers/store-writes.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';

/**
 * A PostgreSQL batch carries the writes of every bucket queued in one turn: one statement, one
 * commit, each bucket's revisions as its own writes alone would give. Each bucket's part is
 * guarded by its row's version, and the rows are locked in id order, so two instances writing
 * the same buckets wait for each other in a line, never in a cycle. Another instance's write is
 * stood for by an admin connection that updates a bucket row and holds it.
 */
const NOW = 1_800_000_000_000;
const TARGETS = [
  { name: 'postgres', base: POSTGRES_URL, missing: 'KVB_TEST_POSTGRES_URL' },
  { name: 'pgbouncer', base: PGBOUNCER_URL, missing: 'KVB_TEST_PGBOUNCER_URL' },
];

/** `base` with its host and port replaced by the proxy's. */
const through = (base: string, port: number) => base.replace(/@[^/?]+/, `@127.0.0.1:${port}`);

for (const { name, base, missing } of TARGETS) {
  describe.skipIf(!base)(`PostgreSQL: one batch over many buckets (${name})${base ? '' : `: SKIPPED, set ${missing}`}`, () => {
    const own = postgresTestSchema('kvb_buckets', base);
    // application_name keeps 63 bytes: short names, unique to this run.
    const apps = { a: `kvb_${process.pid}_${name}_a`, b: `kvb_${process.pid}_${name}_b` };
    let a: Store;
    let b: Store;
    let n = 0;

    beforeAll(async () => {
      a = await own.open({ url: own.url({ application_name: apps.a }), poolSize: 6, pgPrepare: 'auto' });
      b = await own.open({ url: own.url({ application_name: apps.b }), poolSize: 6, pgPrepare: 'auto' });
    });
    afterAll(() => own.drop(a, b));

    const newBuckets = async (count: number) => {
      const run = ++n;
      const ids = Array.from({ length: count }, (_, i) => `b${run}-${String(i).padStart(2, '0')}`);
      for (const id of ids) await a.buckets.create(bucketRecord(id));
      return ids;
    };

    /** Per bucket, its change log: revision, key, value, and the transaction that wrote it. */
    const changeLogs = (buckets: string[]) =>
      withAdminClient(async (client) => {
        const { rows } = await client.query<{ bucket_id: string; revision: string; key: Buffer; value: Buffer | null; tx: string }>(
          `select bucket_id, revision, key, value, xmin::text as tx from "${own.schema}".changes where bucket_id = any($1) order by bucket_id, revision`,
          [buckets],
        );
        return rows.map((r) => ({
          bucket: r.bucket_id,
          revision: Number(r.revision),
          key: r.key.toString(),
          value: r.value?.toString(),
          tx: r.tx,
        }));
      });

    /**
     * Holds `bucket`'s row changed (a new version, as another instance's write makes) while `start`
     * sends writes and sees them wait, then commits; the writes' answers, which come after.
     */
    const holding = <T>(bucket: string, start: () => Promise<{ answers: Promise<T> }>) =>
      withAdminClient(async (other) => {
        await other.query('begin');
        await other.query(`update "${own.schema}".buckets set revision = revision where id = $1`, [bucket]);
        let started: { answers: Promise<T> };
        try {
          started = await start();
        } finally {
          await other.query('commit');
        }
        return started.answers;
      });

    /**
     * The backends of `application` waiting for a lock, each with the pids blocking it; asked on a
     * connection of its own, since pg_stat_activity stays as first read for a whole transaction.
     */
    const lockWaits = (application: string) =>
      withAdminClient((client) =>
        client
          .query<{ pid: number; blockers: number[] }>(
            `select pid, pg_blocking_pids(pid) as blockers from pg_stat_activity where application_name = $1 and wait_event_type = 'Lock'`,
            [application],
          )
          .then((r) => r.rows),
      );

    it('SETs, counters and a transaction to eight buckets queued in one turn commit in one transaction, each bucket at its own revisions', async () => {
      const buckets = await newBuckets(8);
      const answers = await Promise.all(
        buckets.flatMap((bucket, i) => [
          setEntry(a, bucket, 'k', text(`v${i}`), null, NOW),
          i % 2 === 0
            ? commit(a, bucket, [{ op: 'set', key: 't', value: text('T'), expiresAt: null }], NOW)
            : updateEntry(a, bucket, 'c', NOW, addCounter(2)),
        ]),
      );
      expect(answers.map((r) => (r as { revision: number }).revision)).toEqual(buckets.flatMap(() => [1, 2]));
      const logs = await changeLogs(buckets);
      expect(logs.map(({ bucket, revision, key }) => ({ bucket, revision, key }))).toEqual(
        buckets.flatMap((bucket, i) => [
          { bucket, revision: 1, key: 'k' },
          { bucket, revision: 2, key: i % 2 === 0 ? 't' : 'c' },
        ]),
      );
      expect(new Set(logs.map((c) => c.tx)).size).toBe(1);
    });

    it('plain SETs to many buckets: one statement, each bucket numbered from its own revision', async () => {
      const buckets = await newBuckets(5);
      await setEntry(a, buckets[2]!, 'old', text('o'), null, NOW);
      const answers = await Promise.all(
        buckets.flatMap((bucket) => [0, 1, 2].map((j) => setEntry(a, bucket, `k${j % 2}`, text(`${j}`), null, NOW))),
      );
      expect(answers).toEqual(buckets.flatMap((_, i) => [1, 2, 3].map((r) => ({ revision: r + (i === 2 ? 1 : 0) }))));
      const logs = (await changeLogs(buckets)).filter((c) => c.key !== 'old');
      expect(new Set(logs.map((c) => c.tx)).size).toBe(1);
      const usage = await withAdminClient(
        async (client) =>
          (await client.query(`select id, usage_keys from "${own.schema}".buckets where id = any($1) order by id`, [buckets])).rows,
      );
      expect(usage).toEqual(buckets.map((id, i) => ({ id, usage_keys: i === 2 ? '3' : '2' })));
    });

    it("one bucket's refused write refuses only itself: the other buckets' writes in the batch commit", async () => {
      const [first, second] = await newBuckets(2);
      await setEntry(a, first!, 'k', text('old'), null, NOW);
      const [refused, alongside, done] = await Promise.all([
        setEntry(a, first!, 'k', text('new'), null, NOW, { ifMatch: [99] }),
        setEntry(a, first!, 'other', text('x'), null, NOW),
        setEntry(a, second!, 'k', text('v'), null, NOW),
      ]);
      expect(refused).toMatchObject({ refused: 'precondition', current: { revision: 1 } });
      expect(alongside).toEqual({ revision: 2 });
      expect(done).toEqual({ revision: 1 });
      expect((await a.getEntry(first!, 'k', NOW))?.data.toString()).toBe('old');
      expect((await a.getEntry(second!, 'k', NOW))?.data.toString()).toBe('v');
    });

    it("a bucket another writer changed runs again under its lock; the batch's other buckets are done at once", async () => {
      const [busy, free] = await newBuckets(2);
      const answers = await holding(busy!, async () => {
        const pending = Promise.all([setEntry(a, busy!, 'k', text('1'), null, NOW), setEntry(a, free!, 'k', text('2'), null, NOW)]);
        await expect.poll(() => lockWaits(apps.a).then((w) => w.length), { timeout: 10_000 }).toBe(1);
        return { answers: pending };
      });
      expect(answers).toEqual([{ revision: 1 }, { revision: 1 }]);
      const logs = await changeLogs([busy!, free!]);
      expect(logs.map(({ bucket, revision }) => ({ bucket, revision }))).toEqual([
        { bucket: busy, revision: 1 },
        { bucket: free, revision: 1 },
      ]);
      // The free bucket committed with the first statement; the busy one after the other writer, in one of its own.
      expect(logs[0]!.tx).not.toBe(logs[1]!.tx);
    });

    it('two instances writing the same buckets in opposite orders wait in a line, not a cycle, and every write lands once', async () => {
      const buckets = await newBuckets(10);
      const [middle] = buckets.slice(5);
      const write = (store: Store, order: string[], tag: string) =>
        Promise.all(order.map((bucket) => setEntry(store, bucket, tag, text(tag), null, NOW)));
      const answers = await holding(middle!, async () => {
        const first = write(a, buckets, 'a');
        await expect.poll(() => lockWaits(apps.a).then((w) => w.length), { timeout: 10_000 }).toBe(1);
        const second = write(b, [...buckets].reverse(), 'b');
        await expect.poll(() => lockWaits(apps.b).then((w) => w.length), { timeout: 10_000 }).toBe(1);
        // A's statement holds the rows before the middle one (id order) and waits for it; B's,
        // which lists the buckets the other way round, waits for A's first row, not for the middle.
        const [waitingA] = await lockWaits(apps.a);
        const [waitingB] = await lockWaits(apps.b);
        expect(waitingB!.blockers).toEqual([waitingA!.pid]);
        return { answers: Promise.all([first, second]) };
      });
      expect(answers.flat().every((r) => 'revision' in r)).toBe(true);
      const logs = await changeLogs(buckets);
      for (const bucket of buckets) {
        const own = logs.filter((c) => c.bucket === bucket);
        expect(own.map((c) => c.revision)).toEqual([1, 2]);
        expect(own.map((c) => c.key).sort()).toEqual(['a', 'b']);
      }
    });

    it('a connection cut while the batch waits for a row: every write of it is reported of unknown outcome, though some commit', async () => {
      const proxy = new TcpProxy('127.0.0.1', Number(new URL(base!).port));
      await proxy.open();
      const cutSchema = postgresTestSchema('kvb_cut', through(base!, proxy.port));
      const app = `kvb_${process.pid}_${name}_cut`;
      const cut = await cutSchema.open({ url: `${cutSchema.url()}&application_name=${app}`, poolSize: 4 });
      const { schema } = cutSchema;
      try {
        const [busy, free] = ['busy', 'free'];
        for (const id of [busy, free]) await cut.buckets.create(bucketRecord(id));
        const outcomes = await withAdminClient(async (other) => {
          await other.query('begin');
          await other.query(`update "${schema}".buckets set revision = revision where id = $1`, [busy]);
          const pending = Promise.allSettled([
            setEntry(cut, busy, 'k', text('1'), null, NOW),
            setEntry(cut, free, 'k', text('2'), null, NOW),
          ]);
          await expect.poll(() => lockWaits(app).then((w) => w.length), { timeout: 10_000 }).toBe(1);
          proxy.cut();
          const settled = await pending;
          await other.query('commit');
          return settled;
        });
        for (const outcome of outcomes) {
          expect(outcome.status).toBe('rejected');
          const reason = (outcome as PromiseRejectedResult).reason;
          expect(reason).toBeInstanceOf(StorageUnavailableError);
          expect((reason as StorageUnavailableError).outcomeUnknown).toBe(true);
        }
        // The statement ran on once the row was free: the free bucket's write did happen.
        await expect
          .poll(
            () =>
              withAdminClient(
                async (client) =>
                  (await client.query(`select count(*)::int as n from "${schema}".entries where bucket_id = $1`, [free])).rows[0].n,
              ),
            { timeout: 10_000 },
          )
          .toBe(1);
      } finally {
        await cutSchema.drop(cut);
        await proxy.close();
      }
    });
  });
}
