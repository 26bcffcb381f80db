import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { POSTGRES_URL, SERVER_POSTGRES_URL, THROUGH_PGBOUNCER, dropSchema, postgresUrl, uniqueName } from '../helpers/backend.js';
import { call, createBucket, json } from '../helpers/http.js';
import { type RunningServer, startServer } from '../helpers/server.js';
import { startReceiver } from '../helpers/webhook-receiver.js';

const ADMIN = 'multi-admin';
const auth = { authorization: `Bearer ${ADMIN}` };
const ARGS = ['--webhook-allow-private', '--webhook-timeout', '1'];
const ENV = { KVB_WEBHOOK_LEASE_MS: '2000' };
const DELIVERED = { timeout: 30_000, interval: 100 };

/** Each revision once, in order: what a receiver sees when no fault came between. */
const inOrder = (revs: number[]) => revs.every((r, i) => i === 0 || r > revs[i - 1]!);

describe.skipIf(!POSTGRES_URL)(
  `webhooks from two kvb serve instances on one PostgreSQL schema${THROUGH_PGBOUNCER ? ' through PgBouncer' : ''}${POSTGRES_URL ? '' : ' (SKIPPED: KVB_TEST_POSTGRES_URL is not set)'}`,
  () => {
    const schema = uniqueName('kvb_hooks');
    // Made in beforeAll: without PostgreSQL the file still loads, to report itself skipped.
    let db: string;
    let a: RunningServer;
    let b: RunningServer;
    beforeAll(async () => {
      db = postgresUrl({ schema }, SERVER_POSTGRES_URL);
      [a, b] = await Promise.all([startServer({ db, args: ARGS, env: ENV }), startServer({ db, args: ARGS, env: ENV })]);
    });
    afterAll(async () => {
      await Promise.all([a?.stop(), b?.stop()]);
      await dropSchema(schema);
    });

    it('delivers the writes made on both instances once each, in revision order, and hands over when the deliverer is killed', async () => {
      const receiver = await startReceiver();
      try {
        const bucket = await createBucket(a.api, { secret_key: ADMIN });
        const added = await call(`${a.api}/webhooks/${bucket}`, { method: 'POST', ...json({ url: receiver.url, prefix: 'p/' }, auth) });
        expect(added.status, added.text).toBe(201);
        const put = async (server: RunningServer, key: string) => {
          const res = await call(`${server.api}/${bucket}/${key}`, { method: 'PUT', body: key, headers: auth });
          expect(res.status, res.text).toBe(200);
          return Number(res.headers.get('kvb-revision'));
        };
        const revisions: number[] = [];
        for (let i = 0; i < 30; i++) {
          revisions.push(await put(i % 2 === 0 ? a : b, `p/${i}`));
          await put(i % 2 === 0 ? b : a, `q/${i}`);
        }
        await expect.poll(() => receiver.acknowledged().map((e) => e.rev), DELIVERED).toEqual(revisions);
        expect(inOrder(receiver.acknowledged().map((e) => e.rev))).toBe(true);

        // Whichever instance held the lease, A dies without a word; B goes on alone.
        a.process.kill('SIGKILL');
        await a.process.catch(() => {});
        for (let i = 30; i < 40; i++) revisions.push(await put(b, `p/${i}`));
        await expect.poll(() => [...new Set(receiver.acknowledged().map((e) => e.rev))], DELIVERED).toEqual(revisions);
        // Repeats only around the fault (what was in flight when A died), never out of order past it.
        const revs = receiver.acknowledged().map((e) => e.rev);
        expect(revs.length - new Set(revs).size).toBeLessThanOrEqual(40);
        expect(revs.at(-1)).toBe(revisions.at(-1));
      } finally {
        await receiver.close();
      }
    });
  },
);
