import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  POSTGRES_URL,
  SERVER_POSTGRES_URL,
  THROUGH_PGBOUNCER,
  dropSchema,
  postgresUrl,
  uniqueName,
  withAdminClient,
} from '../helpers/backend.js';
import { type Answer, call, createBucket, json } from '../helpers/http.js';
import { type RunningServer, startServer } from '../helpers/server.js';

const revisionOf = (answer: Answer) => Number(answer.headers.get('kvb-revision') ?? answer.headers.get('etag')?.replace(/"/g, ''));
const range = (from: number, count: number) => Array.from({ length: count }, (_, i) => from + i);

/**
 * `--pg-batch-writes on` (the default): concurrent writes to a bucket are written together. Two instances write to one bucket
 * at once, so batches of both wait on the bucket row for each other; the answers and the change
 * log must be exactly those of one transaction per write.
 */
describe.skipIf(!POSTGRES_URL)(
  `write batching on PostgreSQL, two instances${THROUGH_PGBOUNCER ? ' through PgBouncer' : ''}${POSTGRES_URL ? '' : ' (SKIPPED: KVB_TEST_POSTGRES_URL is not set)'}`,
  () => {
    const schema = uniqueName('kvb_batch');
    let a: RunningServer;
    let b: RunningServer;
    const either = (i: number) => (i % 2 === 0 ? a : b);

    /** The bucket's change log as the database holds it: one row per (revision, key). */
    const changeLog = (bucket: string) =>
      withAdminClient(async (client) => {
        const { rows } = await client.query<{ revision: string; key: Buffer; kind: string; value: Buffer | null; tx: string }>(
          `select revision, key, kind, value, xmin::text as tx from "${schema}".changes where bucket_id = $1 order by revision`,
          [bucket],
        );
        return rows.map((r) => ({
          revision: Number(r.revision),
          key: r.key.toString('utf8'),
          kind: r.kind,
          value: r.value?.toString('utf8'),
          tx: r.tx,
        }));
      });

    beforeAll(async () => {
      const db = postgresUrl({ schema }, SERVER_POSTGRES_URL);
      a = await startServer({ db, args: ['--pg-batch-writes', 'on'] });
      b = await startServer({ db, args: ['--pg-batch-writes', 'on'] });
    });
    afterAll(async () => {
      await Promise.all([a?.stop(), b?.stop()]);
      await dropSchema(schema);
    });

    it('says so in its start-up line', () => {
      expect(a.logs()).toContain('concurrent writes to a bucket share one statement');
    });

    it('400 concurrent SETs on 20 keys: each answered with its own revision, exactly the next 400, logged once each; each key holds its last write', {
      timeout: 60_000,
    }, async () => {
      const bucket = await createBucket(a.api);
      const answers = await Promise.all(
        range(0, 400).map((i) => call(`${either(i).api}/${bucket}/k${i % 20}`, { method: 'PUT', body: `v${i}` })),
      );
      expect(answers.filter((r) => r.status !== 200).map((r) => r.text)).toEqual([]);
      const revisions = answers.map(revisionOf);
      expect([...revisions].sort((x, y) => x - y)).toEqual(range(1, 400));

      const log = await changeLog(bucket);
      expect(log.map((c) => c.revision)).toEqual(range(1, 400));
      // The log says what each answer said: write i is the change at the revision it was given.
      for (const [i, revision] of revisions.entries())
        expect(log[revision - 1]).toMatchObject({ key: `k${i % 20}`, kind: 'set', value: `v${i}` });
      // Writes did share transactions (rows written by one transaction share its xmin).
      expect(new Set(log.map((c) => c.tx)).size).toBeLessThan(400);

      for (let k = 0; k < 20; k++) {
        const last = log.filter((c) => c.key === `k${k}`).at(-1)!;
        const read = await call(`${b.api}/${bucket}/k${k}`);
        expect(read.text).toBe(last.value);
        expect(revisionOf(read)).toBe(last.revision);
      }
    });

    it('600 concurrent +1 counter PATCHes split across both instances give exactly 600, each answer a distinct value', {
      timeout: 60_000,
    }, async () => {
      const bucket = await createBucket(a.api);
      const answers = await Promise.all(range(0, 600).map((i) => call(`${either(i).api}/${bucket}/hits`, { method: 'PATCH', body: '+1' })));
      expect(answers.filter((r) => r.status !== 200).map((r) => r.text)).toEqual([]);
      expect(new Set(answers.map((r) => r.text)).size).toBe(600);
      expect((await call(`${a.api}/${bucket}/hits`)).text).toBe('600');
      const log = await changeLog(bucket);
      expect(log.map((c) => c.revision)).toEqual(range(1, 600));
    });

    it('a write that fails (a refused condition, an increment of text, failed txn checks) fails alone: the writes batched with it commit, with no gap in revisions', {
      timeout: 60_000,
    }, async () => {
      const bucket = await createBucket(a.api);
      expect((await call(`${a.api}/${bucket}/taken`, { method: 'PUT', body: 'x' })).status).toBe(200);
      expect((await call(`${a.api}/${bucket}/words`, { method: 'PUT', body: 'not a number' })).status).toBe(200);
      // How each failing write is answered when it runs alone.
      const failing = [
        () => call(`${either(0).api}/${bucket}/taken`, { method: 'PUT', body: 'y', headers: { 'if-none-match': '*' } }),
        () => call(`${either(1).api}/${bucket}/taken`, { method: 'PUT', body: 'y', headers: { 'if-match': '"999999"' } }),
        () => call(`${either(0).api}/${bucket}/words`, { method: 'PATCH', body: '+1' }),
        () =>
          call(`${either(1).api}/${bucket}`, {
            method: 'POST',
            ...json({
              txn: [
                { check: 'taken', exists: false },
                { set: 'never', value: 'n' },
              ],
            }),
          }),
        () => call(`${either(0).api}/${bucket}/absent`, { method: 'DELETE', headers: { 'if-match': '*' } }),
      ];
      const alone: number[] = [];
      for (const request of failing) alone.push((await request()).status);
      for (const status of alone) expect(status).toBeGreaterThanOrEqual(400);
      const start = Number((await call(`${a.api}/${bucket}/taken`)).headers.get('kvb-revision') ?? 0);
      const bucketRevision = (await changeLog(bucket)).at(-1)!.revision;

      const requests = range(0, 300).map((i) =>
        i % 3 === 0
          ? { fails: i % 5, run: failing[i % 5]! }
          : { fails: undefined, run: () => call(`${either(i).api}/${bucket}/ok${i % 7}`, { method: 'PUT', body: `v${i}` }) },
      );
      const answers = await Promise.all(requests.map((r) => r.run()));
      answers.forEach((answer, i) => {
        const { fails } = requests[i]!;
        expect(answer.status, answer.text).toBe(fails === undefined ? 200 : alone[fails]);
      });
      const succeeded = answers.filter((_, i) => requests[i]!.fails === undefined).map(revisionOf);
      expect([...succeeded].sort((x, y) => x - y)).toEqual(range(bucketRevision + 1, succeeded.length));
      const log = await changeLog(bucket);
      expect(log.map((c) => c.revision)).toEqual(range(1, bucketRevision + succeeded.length));
      expect(log.filter((c) => c.key === 'never' || c.key === 'absent')).toEqual([]);
      expect((await call(`${b.api}/${bucket}/taken`)).text).toBe('x');
      expect(Number((await call(`${b.api}/${bucket}/taken`)).headers.get('kvb-revision'))).toBe(start);
      expect((await call(`${b.api}/${bucket}/words`)).text).toBe('not a number');
    });
  },
);
