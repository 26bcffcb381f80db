import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Store, type TxnOp, isRefusal } from '../../src/store/store.js';
import { addCounter, bucketRecord, postgresTestSchema } from '../helpers/store-backends.js';
import { POSTGRES_URL, withAdminClient } from '../helpers/backend.js';
import { setEntry, updateEntry, commit } from '../helpers/store-writes.js';

const NOW = 1_800_000_000_000;
const record = (id: string) => bucketRecord(id, 'f@test');

describe.skipIf(!POSTGRES_URL)(
  `PostgreSQL store under injected failures and with two instances${POSTGRES_URL ? '' : ' (SKIPPED: KVB_TEST_POSTGRES_URL is not set)'}`,
  () => {
    const own = postgresTestSchema('kvb_faults', POSTGRES_URL);
    const { schema } = own;
    let a: Store;
    let b: Store;

    beforeAll(async () => {
      a = await own.open({ poolSize: 6 });
      b = await own.open({ poolSize: 6 });
    });
    afterAll(() => own.drop(a, b));

    it('serialization failures (40001) and deadlocks (40P01) raised mid-write are retried: every operation applies exactly once', async () => {
      const faults = 16;
      // A trigger on entries fails the first `faults` row writes, alternating 40001 and 40P01. The count is
      // a sequence because nextval survives the rollback the failure causes (a counter row would not).
      await withAdminClient(async (c) => {
        await c.query(`create sequence "${schema}".fault_seq`);
        await c.query(`create function "${schema}".inject_fault() returns trigger language plpgsql as $$
        declare n bigint := nextval('"${schema}".fault_seq');
        begin
          if n <= ${faults} then
            raise exception 'injected fault %', n using errcode = case when n % 2 = 0 then '40001' else '40P01' end;
          end if;
          return coalesce(new, old);
        end $$`);
        await c.query(
          `create trigger inject before insert or update or delete on "${schema}".entries for each row execute function "${schema}".inject_fault()`,
        );
      });
      try {
        await a.buckets.create(record('faulty'));
        const set = (key: string): TxnOp => ({ op: 'set', key, value: { type: 'text', data: Buffer.from(key) }, expiresAt: null });
        const outcomes = await Promise.all([
          ...Array.from({ length: 20 }, (_, i) => updateEntry(i % 2 ? a : b, 'faulty', 'hits', NOW, addCounter(1))),
          ...Array.from({ length: 10 }, (_, i) => setEntry(a, 'faulty', `s${i}`, { type: 'text', data: Buffer.from('x') }, null, NOW)),
          ...Array.from({ length: 5 }, (_, i) => commit(b, 'faulty', [set(`t${i}a`), set(`t${i}b`)], NOW)),
          ...Array.from({ length: 5 }, (_, i) =>
            setEntry(a, 'faulty', `c${i}`, { type: 'text', data: Buffer.from('x') }, null, NOW, { ifNoneMatch: '*' }),
          ),
        ]);
        expect(outcomes.filter((o) => isRefusal(o))).toEqual([]);
        const injected = await withAdminClient((c) => c.query(`select last_value from "${schema}".fault_seq`));
        expect(Number(injected.rows[0].last_value)).toBeGreaterThan(faults);
        expect((await a.getEntry('faulty', 'hits', NOW))?.data.toString()).toBe('20');
        // 40 operations, 40 revisions: none lost, none applied twice.
        expect(await a.buckets.revision('faulty')).toBe(40);
        const revisions = outcomes.map((o) => (o as { revision: number }).revision).sort((x, y) => x - y);
        expect(revisions).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
      } finally {
        await withAdminClient((c) => c.query(`drop trigger inject on "${schema}".entries`));
      }
    });

    it('two instances sweeping at once: one holds the sweep lease, every expired key goes, one revision per bucket per batch', async () => {
      await a.buckets.create(record('sweep1'));
      await a.buckets.create(record('sweep2'));
      for (let i = 0; i < 30; i++)
        await setEntry(i % 2 ? a : b, i < 20 ? 'sweep1' : 'sweep2', `e${i}`, { type: 'text', data: Buffer.from('x') }, NOW - 1, NOW - 10);
      await setEntry(a, 'sweep1', 'kept', { type: 'text', data: Buffer.from('x') }, null, NOW);
      const [fromA, fromB] = await Promise.all([a.maintenance.sweepExpired(NOW, 1000), b.maintenance.sweepExpired(NOW, 1000)]);
      // The lease is taken by one of them; the other sweeps nothing.
      expect([fromA, fromB].sort((x, y) => x - y)).toEqual([0, 30]);
      expect(await a.maintenance.countEntries()).toBeGreaterThanOrEqual(1);
      expect(await a.getEntry('sweep1', 'kept', NOW)).toBeDefined();
      expect(await a.buckets.revision('sweep1')).toBe(22);
      expect(await a.buckets.revision('sweep2')).toBe(11);
      const { rows } = await withAdminClient((c) =>
        c.query(`select count(*)::int as n from "${schema}".entries where expires_at <= $1`, [NOW]),
      );
      expect(rows[0].n).toBe(0);
    });

    it('a prefix delete whose every unlocked listing goes stale (another instance writes in between) runs under the bucket row lock and deletes exactly its keys', async () => {
      await a.buckets.create(record('starved'));
      const value = (s: string) => ({ type: 'text' as const, data: Buffer.from(s) });
      for (let i = 0; i < 5; i++) await setEntry(a, 'starved', `tmp/${i}`, value('x'), null, NOW);
      // Each unlocked try reads the bucket's revision, then lists; here `b` writes in between, so
      // every listing is stale when its batch checks it. The locked path reads on its own connection.
      const revision = a.buckets.revision.bind(a.buckets);
      let listings = 0;
      a.buckets.revision = async (bucket) => {
        const at = await revision(bucket);
        listings++;
        await setEntry(b, 'starved', `other/${listings}`, value('y'), null, NOW);
        // A key under the prefix written after a listing: the locked delete must find it too.
        await setEntry(b, 'starved', `tmp/late-${listings}`, value('z'), null, NOW);
        return at;
      };
      const before = await revision('starved');
      try {
        const outcome = await commit(a, 'starved', [{ op: 'delete_prefix', key: 'tmp/' }], NOW);
        expect(isRefusal(outcome)).toBe(false);
        expect(listings).toBe(3);
        // Three listings, each followed by two writes of `b`, then the delete's own revision.
        expect((outcome as { revision: number }).revision).toBe(before! + 3 * 2 + 1);
        const left = await a.listEntries('starved', { prefix: '', reverse: false, columns: 'keys', offset: 0, limit: 100 }, NOW);
        expect(left.map((e) => e.key)).toEqual(['other/1', 'other/2', 'other/3']);
      } finally {
        a.buckets.revision = revision;
      }
    });
  },
);
