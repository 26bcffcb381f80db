import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Store } from '../../src/store/store.js';
import { PGBOUNCER_URL, POSTGRES_URL } from '../helpers/backend.js';
import { bucketRecord, postgresTestSchema, text } from '../helpers/store-backends.js';
import { setEntry } from '../helpers/store-writes.js';

/**
 * Point reads on PostgreSQL are coalesced (postgres-point-reads.ts): the GETs of one turn of the
 * event loop go to the database as one statement. Statements are counted where they leave
 * node-postgres, so a store that sent one per read fails here. Two stores on one schema stand
 * for two kvb instances.
 */
type Query = (this: pg.Client, config: unknown, ...rest: unknown[]) => unknown;
const realQuery = pg.Client.prototype.query as unknown as Query;
const textOf = (config: unknown) => (typeof config === 'string' ? config : ((config as { text?: string } | null)?.text ?? ''));
const isPointRead = (config: unknown) => /with ordinality/.test(textOf(config));

const record = (id: string) => bucketRecord(id, 'p@test');
const NOW = 1_800_000_000_000;
const stored = (entry: { data: Buffer } | undefined) => entry?.data.toString();

const TARGETS = [
  { name: 'postgres', base: POSTGRES_URL, missing: 'KVB_TEST_POSTGRES_URL' },
  { name: 'pgbouncer', base: PGBOUNCER_URL, missing: 'KVB_TEST_PGBOUNCER_URL' },
];

for (const { name, base, missing } of TARGETS) {
  describe.skipIf(!base)(
    `PostgreSQL point reads of one turn share one statement (${name})${base ? '' : `: SKIPPED, set ${missing}`}`,
    () => {
      const own = postgresTestSchema('kvb_points', base);
      let a: Store;
      let b: Store;
      const buckets = ['one', 'two'];

      beforeAll(async () => {
        a = await own.open();
        b = await own.open();
        for (const id of buckets) await a.buckets.create(record(id));
        for (let i = 0; i < 20; i++) await setEntry(a, 'one', `k${i}`, text(`one-${i}`), null, NOW);
        for (let i = 0; i < 5; i++) await setEntry(a, 'two', `k${i}`, text(`two-${i}`), null, NOW);
        await setEntry(a, 'one', 'expired', text('gone'), NOW - 1, NOW - 10);
      });

      afterEach(() => {
        vi.restoreAllMocks();
      });

      afterAll(() => own.drop(a, b));

      it('answers N concurrent GETs of one turn, across buckets, from one statement', async () => {
        const reads: Array<[string, string, string | undefined]> = [
          ...Array.from({ length: 20 }, (_, i): [string, string, string] => ['one', `k${i}`, `one-${i}`]),
          ...Array.from({ length: 5 }, (_, i): [string, string, string] => ['two', `k${i}`, `two-${i}`]),
          ['two', 'k10', undefined],
          ['one', 'absent', undefined],
          ['one', 'expired', undefined],
          ['one', 'k3', 'one-3'],
          ['no-such-bucket', 'k1', undefined],
        ];
        const sent: string[] = [];
        vi.spyOn(pg.Client.prototype, 'query').mockImplementation(function (this: pg.Client, config: unknown, ...rest: unknown[]) {
          sent.push(textOf(config));
          return realQuery.call(this, config, ...rest);
        } as never);
        const answers = await Promise.all(reads.map(([bucket, key]) => b.getEntry(bucket, key, NOW)));
        expect(answers.map(stored)).toEqual(reads.map(([, , value]) => value));
        expect(sent).toHaveLength(1);
        expect(isPointRead(sent[0])).toBe(true);
        // Its revisions come with it (ETag, Kvb-Revision).
        expect(answers[0]?.revision).toBeGreaterThan(0);
      });

      it('reads of later turns go in later statements', async () => {
        let statements = 0;
        vi.spyOn(pg.Client.prototype, 'query').mockImplementation(function (this: pg.Client, config: unknown, ...rest: unknown[]) {
          if (isPointRead(config)) statements++;
          return realQuery.call(this, config, ...rest);
        } as never);
        expect(stored(await b.getEntry('one', 'k1', NOW))).toBe('one-1');
        expect(stored(await b.getEntry('one', 'k2', NOW))).toBe('one-2');
        expect(statements).toBe(2);
      });

      it('a GET issued after another instance acknowledged a write sees it, though a read sent before the write is still unanswered', async () => {
        await setEntry(a, 'one', 'ryw', text('before'), null, NOW);
        // The first point-read statement of B runs on the server, and its answer is held back.
        let answered = false;
        let releaseFirst!: () => void;
        const held = new Promise<void>((resolve) => {
          releaseFirst = resolve;
        });
        let pointReads = 0;
        vi.spyOn(pg.Client.prototype, 'query').mockImplementation(function (this: pg.Client, config: unknown, ...rest: unknown[]) {
          const result = realQuery.call(this, config, ...rest);
          if (!isPointRead(config) || pointReads++ > 0) return result;
          return (result as Promise<unknown>).then(async (value) => {
            answered = true;
            await held;
            return value;
          });
        } as never);
        const first = b.getEntry('one', 'ryw', NOW);
        await expect.poll(() => answered).toBe(true);
        await setEntry(a, 'one', 'ryw', text('after'), null, NOW);
        // Issued after A's answer, while B's earlier statement is unanswered: it must not share that answer.
        const second = b.getEntry('one', 'ryw', NOW);
        await new Promise((resolve) => setImmediate(resolve));
        releaseFirst();
        expect(stored(await second)).toBe('after');
        expect(stored(await first)).toBe('before');
        expect(pointReads).toBe(2);
      });

      it('a failed statement fails each of its reads, and the next turn reads again', async () => {
        let fail = true;
        vi.spyOn(pg.Client.prototype, 'query').mockImplementation(function (this: pg.Client, config: unknown, ...rest: unknown[]) {
          if (fail && isPointRead(config)) {
            fail = false;
            return Promise.reject(Object.assign(new Error('statement failed'), { code: 'XX000' }));
          }
          return realQuery.call(this, config, ...rest);
        } as never);
        const failed = await Promise.allSettled([b.getEntry('one', 'k1', NOW), b.getEntry('two', 'k1', NOW)]);
        expect(failed.map((r) => r.status)).toEqual(['rejected', 'rejected']);
        expect(stored(await b.getEntry('one', 'k1', NOW))).toBe('one-1');
      });
    },
  );
}
