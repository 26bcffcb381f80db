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
import { call, createBucket, json } from '../helpers/http.js';
import { type RunningServer, startServer, storedKeys } from '../helpers/server.js';
import { watchStream } from '../helpers/watch-stream.js';

const bearer = (credential: string) => ({ authorization: `Bearer ${credential}` });

/**
 * How long another instance's change can go unseen is the bucket cache's max age, pinned on a
 * faked clock in test/unit/bucket-cache.test.ts. Here, across two real instances, the change is
 * seen (polled, with room for a loaded machine) and, once seen, stays seen.
 */
const SEEN = { timeout: 15_000, interval: 50 };

describe.skipIf(!POSTGRES_URL)(
  `two kvb serve instances on one PostgreSQL schema${THROUGH_PGBOUNCER ? ' through PgBouncer' : ''}${POSTGRES_URL ? '' : ' (SKIPPED: KVB_TEST_POSTGRES_URL is not set)'}`,
  () => {
    const schema = uniqueName('kvb_multi');
    let a: RunningServer;
    let b: RunningServer;

    beforeAll(async () => {
      // Both start at once on a fresh schema: their migrations race for the `migrate` lease row.
      const db = postgresUrl({ schema }, SERVER_POSTGRES_URL);
      [a, b] = await Promise.all([startServer({ db }), startServer({ db })]);
    });
    afterAll(async () => {
      await Promise.all([a?.stop(), b?.stop()]);
      await dropSchema(schema);
    });

    it('both instances started on the same fresh schema (migrations ran once)', async () => {
      expect((await call(`${a.url}/ready`)).status).toBe(200);
      expect((await call(`${b.url}/ready`)).status).toBe(200);
    });

    it('a key set on A is read on B at once, and the other way round (no entry cache)', async () => {
      const bucket = await createBucket(a.api);
      for (let i = 0; i < 20; i++) {
        const [writer, reader] = i % 2 === 0 ? [a, b] : [b, a];
        expect((await call(`${writer.api}/${bucket}/k`, { method: 'PUT', body: `v${i}` })).status).toBe(200);
        const read = await call(`${reader.api}/${bucket}/k`);
        expect(read.text).toBe(`v${i}`);
      }
      expect((await call(`${a.api}/${bucket}/k`, { method: 'DELETE' })).status).toBe(204);
      expect((await call(`${b.api}/${bucket}/k`)).status).toBe(404);
    });

    it('1,000 concurrent +1 counter PATCHes split across both instances give exactly 1,000', { timeout: 60_000 }, async () => {
      const bucket = await createBucket(a.api);
      const results = await Promise.all(
        Array.from({ length: 1000 }, (_, i) => call(`${(i % 2 === 0 ? a : b).api}/${bucket}/hits`, { method: 'PATCH', body: '+1' })),
      );
      expect(results.filter((r) => r.status !== 200).map((r) => r.text)).toEqual([]);
      expect((await call(`${a.api}/${bucket}/hits`)).text).toBe('1000');
      // Every answer was a distinct intermediate value: no two increments saw the same state.
      expect(new Set(results.map((r) => r.text)).size).toBe(1000);
    });

    it('concurrent transactions on overlapping keys leave the state of some serial order', { timeout: 60_000 }, async () => {
      const bucket = await createBucket(a.api);
      const keys = ['k1', 'k2', 'k3', 'k4', 'k5', 'k6'];
      const opsOf = (i: number) => {
        const order = i % 2 === 0 ? keys : [...keys].reverse();
        // Odd transactions delete every other key they touch, so a mix of two would show.
        return order.map((key, j) => (i % 2 === 1 && j % 2 === 1 ? { delete: key } : { set: key, value: `t${i}` }));
      };
      const answers = await Promise.all(
        Array.from({ length: 60 }, (_, i) =>
          call(`${(i % 2 === 0 ? a : b).api}/${bucket}`, { method: 'POST', ...json({ txn: opsOf(i) }) }),
        ),
      );
      expect(answers.map((r) => r.status)).toEqual(answers.map(() => 204));
      const state = await Promise.all(
        keys.map(async (key) => {
          const r = await call(`${b.api}/${bucket}/${key}`);
          return r.status === 200 ? r.text : undefined;
        }),
      );
      const last = Number(state.find((v) => v !== undefined)!.slice(1));
      const expected = keys.map((key) => {
        const op = opsOf(last).find((o) => ('set' in o ? o.set : o.delete) === key)!;
        return 'set' in op ? `t${last}` : undefined;
      });
      expect(state).toEqual(expected);
    });

    it('both instances sweep expired keys at once without conflict (the sweep lease row)', { timeout: 30_000 }, async () => {
      const sweepSchema = uniqueName('kvb_sweep');
      const db = postgresUrl({ schema: sweepSchema }, SERVER_POSTGRES_URL);
      const sweepers = await Promise.all([0, 1].map(() => startServer({ db, args: ['--sweep-interval', '1', '--log-level', 'debug'] })));
      try {
        const bucket = await createBucket(sweepers[0]!.api);
        // 400 keys that expire in a second, written by two transactions, one through each instance
        // (400 single PUTs on one bucket could hold every pooled connection for seconds on a
        // loaded machine, and the sweep waiting for one would time out: not what this test is about).
        const written = await Promise.all(
          [0, 1].map((half) =>
            call(`${sweepers[half]!.api}/${bucket}`, {
              method: 'POST',
              ...json({ txn: Array.from({ length: 200 }, (_, i) => ({ set: `gone-${half * 200 + i}`, value: 'x', ttl: 1 })) }),
            }),
          ),
        );
        for (const w of written) expect(w.status, w.text).toBe(204);
        await call(`${sweepers[0]!.api}/${bucket}/kept?ttl=0`, { method: 'PUT', body: 'x' });
        const stored = () => storedKeys({ ...sweepers[0]!, db: postgresUrl({ schema: sweepSchema }) });
        await expect.poll(stored, { timeout: 20_000, interval: 250 }).toEqual(['kept']);
        await Promise.all(sweepers.map((s) => s.stop({ keepData: true })));
        for (const s of sweepers) expect(s.logs()).not.toContain('sweep failed');
      } finally {
        await Promise.all(sweepers.map((s) => s.stop()));
        await dropSchema(sweepSchema);
      }
    });

    it('16 clients split across both instances doing GET + If-Match value+1: final value = acknowledged writes, revisions never shared; watchers on both see each revision once', {
      timeout: 120_000,
    }, async () => {
      const bucket = await createBucket(a.api);
      // Open before the first write (the stream's headers come once its start revision is fixed).
      const watchers = [
        await watchStream(`${a.api}/${bucket}/?watch=true&values=true&format=jsonl`),
        await watchStream(`${b.api}/${bucket}/?watch=true&values=true&format=jsonl`),
      ];
      await call(`${a.api}/${bucket}/n`, { method: 'PUT', body: '0' });
      const acknowledged: number[] = [];
      await Promise.all(
        Array.from({ length: 16 }, async (_, client) => {
          const server = client % 2 === 0 ? a : b;
          for (let done = 0; done < 3; ) {
            const read = await call(`${server.api}/${bucket}/n`);
            const write = await call(`${server.api}/${bucket}/n`, {
              method: 'PUT',
              body: String(Number(read.text) + 1),
              headers: { 'if-match': read.headers.get('etag')! },
            });
            if (write.status === 412) continue;
            expect(write.status, write.text).toBe(200);
            acknowledged.push(Number(write.headers.get('kvb-revision')));
            done++;
          }
        }),
      );
      expect((await call(`${b.api}/${bucket}/n`)).text).toBe('48');
      expect(new Set(acknowledged).size).toBe(48);
      // Revision 1 is the PUT of 0; each acknowledged write's revision then carries the value it wrote.
      const changes = (w: (typeof watchers)[number]) => w.events.filter((l) => l.type === 'set');
      for (const w of watchers) {
        await expect.poll(() => changes(w).length, { timeout: 30_000 }).toBeGreaterThanOrEqual(49);
        w.stop();
        const seen = changes(w);
        expect(seen.map((l) => l.rev)).toEqual(Array.from({ length: 49 }, (_, i) => i + 1));
        expect(seen.map((l) => l.value)).toEqual(Array.from({ length: 49 }, (_, i) => String(i)));
      }
      expect([...acknowledged].sort((x, y) => x - y)).toEqual(Array.from({ length: 48 }, (_, i) => i + 2));
    });

    it('transfers with checks on both keys, split across both instances, keep the sum', { timeout: 60_000 }, async () => {
      const bucket = await createBucket(a.api);
      await call(`${a.api}/${bucket}`, {
        method: 'POST',
        ...json({
          txn: [
            { set: 'a', value: 500 },
            { set: 'b', value: 500 },
          ],
        }),
      });
      await Promise.all(
        Array.from({ length: 10 }, async (_, client) => {
          const server = client % 2 === 0 ? a : b;
          for (let done = 0; done < 3; ) {
            const [x, y] = await Promise.all([call(`${server.api}/${bucket}/a`), call(`${server.api}/${bucket}/b`)]);
            const answer = await call(`${server.api}/${bucket}`, {
              method: 'POST',
              ...json({
                txn: [
                  { check: 'a', rev: Number(x.headers.get('kvb-revision')) },
                  { check: 'b', rev: Number(y.headers.get('kvb-revision')) },
                  { set: 'a', value: Number(x.text) - 7 },
                  { set: 'b', value: Number(y.text) + 7 },
                ],
              }),
            });
            if (answer.status === 409) continue;
            expect(answer.status, answer.text).toBe(204);
            done++;
          }
        }),
      );
      const [x, y] = await Promise.all([call(`${a.api}/${bucket}/a`), call(`${b.api}/${bucket}/b`)]);
      expect([Number(x.text), Number(y.text)]).toEqual([500 - 7 * 30, 500 + 7 * 30]);
    });

    it('a bucket deleted on A while both instances write to it leaves no entries', { timeout: 60_000 }, async () => {
      for (let round = 0; round < 4; round++) {
        const bucket = await createBucket(a.api);
        const writes = Array.from({ length: 60 }, (_, i) => {
          const server = i % 2 === 0 ? a : b;
          return i % 3 === 0
            ? call(`${server.api}/${bucket}`, { method: 'POST', ...json({ txn: [{ set: `t${i}`, value: 1 }] }) })
            : call(`${server.api}/${bucket}/k${i}`, { method: 'PUT', body: 'x' });
        });
        const deletion = call(`${a.api}/${bucket}`, { method: 'DELETE' });
        const answers = await Promise.all(writes);
        expect((await deletion).status).toBe(204);
        for (const answer of answers) expect([200, 204, 404], answer.text).toContain(answer.status);
        const { rows } = await withAdminClient((c) =>
          c.query(`select count(*)::int as n from "${schema}".entries where bucket_id = $1`, [bucket]),
        );
        expect(rows[0].n).toBe(0);
      }
    });

    it('a token minted on A stops working on B after a signing-key rotation on A, and stays refused', async () => {
      const bucket = await createBucket(a.api, { secret_key: 'admin', signing_key: 'k1' });
      const mint = await call(`${a.api}/${bucket}/tokens/`, {
        method: 'POST',
        headers: bearer('admin'),
        body: new URLSearchParams({ prefix: 'p', permissions: 'read', ttl: '600' }),
      });
      const token = (mint.json() as { access_token: string }).access_token;
      await call(`${a.api}/${bucket}/p1`, { method: 'PUT', headers: bearer('admin'), body: 'x' });
      // B has verified (and cached) the token before the rotation.
      expect((await call(`${b.api}/${bucket}/p1`, { headers: bearer(token) })).status).toBe(200);
      expect((await call(`${a.api}/${bucket}`, { method: 'PATCH', ...json({ signing_key: 'k2' }, bearer('admin')) })).status).toBe(204);
      await expect.poll(async () => (await call(`${b.api}/${bucket}/p1`, { headers: bearer(token) })).status, SEEN).toBe(401);
      // Once refused, it stays refused.
      expect((await call(`${b.api}/${bucket}/p1`, { headers: bearer(token) })).status).toBe(401);
    });

    it('an old key stops working on B after a key change on A, and the new one works there', async () => {
      const bucket = await createBucket(a.api, { secret_key: 'admin', read_key: 'old-read' });
      expect((await call(`${b.api}/${bucket}/?format=json`, { headers: bearer('old-read') })).status).toBe(200);
      expect((await call(`${a.api}/${bucket}`, { method: 'PATCH', ...json({ read_key: 'new-read' }, bearer('admin')) })).status).toBe(204);
      await expect
        .poll(async () => (await call(`${b.api}/${bucket}/?format=json`, { headers: bearer('old-read') })).status, SEEN)
        .toBe(401);
      expect((await call(`${b.api}/${bucket}/?format=json`, { headers: bearer('old-read') })).status).toBe(401);
      expect((await call(`${b.api}/${bucket}/?format=json`, { headers: bearer('new-read') })).status).toBe(200);
    });

    it('a bucket deleted on A is gone on B: its keys at once, its cached policy soon after', async () => {
      const bucket = await createBucket(a.api, { secret_key: 'admin' });
      await call(`${a.api}/${bucket}/k`, { method: 'PUT', headers: bearer('admin'), body: 'x' });
      // B has the bucket's policy cached.
      expect((await call(`${b.api}/${bucket}/?format=json`, { headers: bearer('admin') })).status).toBe(200);
      expect((await call(`${a.api}/${bucket}`, { method: 'DELETE', headers: bearer('admin') })).status).toBe(204);
      // Its keys went with it, on every instance, at once.
      expect((await call(`${b.api}/${bucket}/k`, { headers: bearer('admin') })).status).toBe(404);
      // B's cached policy lets the admin key list the (now empty) bucket until its max age passes.
      const listing = async () => (await call(`${b.api}/${bucket}/?format=json`, { headers: bearer('admin') })).status;
      await expect.poll(async () => [401, 404].includes(await listing()), SEEN).toBe(true);
      expect([401, 404]).toContain(await listing());
    });
  },
);
