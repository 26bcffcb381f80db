import { TcpProxy } from '../helpers/tcp-proxy.js';
import { execa } from 'execa';
import { afterAll, describe, expect, it } from 'vitest';
import { POSTGRES_URL, THROUGH_PGBOUNCER, dropSchema, postgresUrl, terminateBackends, uniqueName } from '../helpers/backend.js';
import { type Answer, call, createBucket, json } from '../helpers/http.js';
import { KVB_BIN, type RunningServer, startServer } from '../helpers/server.js';

/** Pacing of the connection cuts below; no assertion depends on how long a pause lasts. */
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const SERVICE_UNAVAILABLE = { error: { code: 503, message: 'service_unavailable' } };

/** The envelope's code and message; its `detail` (the reason in words) may vary with where the storage failed. */
const isEnvelope503 = (r: Answer) => {
  if (r.status !== 503) return false;
  const { error } = r.json() as { error: { code: number; message: string; detail?: unknown } };
  return (
    error.code === SERVICE_UNAVAILABLE.error.code && error.message === SERVICE_UNAVAILABLE.error.message && typeof error.detail === 'string'
  );
};

// Through PgBouncer the server connections belong to PgBouncer, not to kvb (its application_name
// does not reach them), so this test cannot find and kill only kvb's connections there.
describe.skipIf(!POSTGRES_URL || THROUGH_PGBOUNCER)(
  `losing the PostgreSQL connection${
    THROUGH_PGBOUNCER
      ? " (SKIPPED through PgBouncer: it kills kvb's own backends by application_name, which PgBouncer does not pass on)"
      : POSTGRES_URL
        ? ''
        : ' (SKIPPED: KVB_TEST_POSTGRES_URL is not set)'
  }`,
  () => {
    const schemas: string[] = [];
    const servers: RunningServer[] = [];
    afterAll(async () => {
      await Promise.all(servers.map((s) => s.stop()));
      for (const schema of schemas) await dropSchema(schema);
    });

    it('pg_terminate_backend on its connections under load: 503 envelopes at worst, never a 500 or a crash, and it recovers', {
      timeout: 60_000,
    }, async () => {
      const schema = uniqueName('kvb_kill');
      schemas.push(schema);
      const server = await startServer({ db: postgresUrl({ schema }), args: ['--pool-size', '4'] });
      servers.push(server);
      const bucket = await createBucket(server.api);
      const base = `${server.api}/${bucket}`;

      const answers: Answer[] = [];
      let running = true;
      const worker = async (id: number) => {
        for (let n = 0; running; n++) {
          const kind = n % 4;
          const answer =
            kind === 0
              ? await call(`${base}/k${id}`, { method: 'PUT', body: `v${n}` })
              : kind === 1
                ? await call(`${base}/k${id}`)
                : kind === 2
                  ? await call(`${base}/counter`, { method: 'PATCH', body: '+1' })
                  : await call(base, {
                      method: 'POST',
                      ...json({
                        txn: [
                          { set: `t${id}`, value: n },
                          { set: 'shared', value: n },
                        ],
                      }),
                    });
          answers.push(answer);
        }
      };
      const guarded = async (id: number) => {
        try {
          await worker(id);
        } catch (err) {
          running = false;
          throw new Error(
            `request failed (${String(err)}); server output:\n${server
              .logs()
              .split('\n')
              .filter((l) => !l.includes('"level":30'))
              .slice(-60)
              .join('\n')
              .slice(-12000)}`,
          );
        }
      };
      const workers = Array.from({ length: 8 }, (_, i) => guarded(i));
      let killed = 0;
      const readiness: number[] = [];
      // Pacing, not a wait for a result: ten cuts spread over the load, each checked by what follows.
      for (let round = 0; round < 10; round++) {
        await sleep(200);
        killed += await terminateBackends(server.applicationName!);
        readiness.push((await call(`${server.url}/ready`)).status);
      }
      running = false;
      await Promise.all(workers);

      expect(killed).toBeGreaterThan(0);
      const statuses = new Map<number, number>();
      for (const a of answers) statuses.set(a.status, (statuses.get(a.status) ?? 0) + 1);
      console.log(
        `terminated ${killed} connections; answers by status: ${JSON.stringify(Object.fromEntries(statuses))}; /ready: ${readiness.join(',')}`,
      );
      // The first read of a key may come before its first write landed (404); everything else is success or a 503 envelope.
      expect([...statuses.keys()].filter((s) => ![200, 204, 404, 503].includes(s))).toEqual([]);
      for (const a of answers.filter((r) => r.status === 503)) expect(isEnvelope503(a), a.text).toBe(true);
      expect(readiness.every((s) => s === 200 || s === 503)).toBe(true);
      expect(answers.filter((a) => a.status === 200 || a.status === 204).length).toBeGreaterThan(answers.length / 2);

      // Still the same process, and healthy again without a restart.
      expect(server.process.exitCode).toBeNull();
      await expect.poll(async () => (await call(`${server.url}/ready`)).status, { timeout: 10_000, interval: 100 }).toBe(200);
      expect((await call(`${base}/after`, { method: 'PUT', body: 'ok' })).status).toBe(200);
      expect((await call(`${base}/after`)).text).toBe('ok');
      expect(server.logs()).not.toContain('unexpected error');
    });

    it('while PostgreSQL is unreachable /ready is 503 degraded and requests get 503 envelopes; it recovers without a restart', {
      timeout: 60_000,
    }, async () => {
      const target = new URL(POSTGRES_URL!);
      const outage = new TcpProxy(target.hostname, Number(target.port || 5432));
      await outage.open();
      const schema = uniqueName('kvb_outage');
      schemas.push(schema);
      const viaProxy = new URL(postgresUrl({ schema }));
      viaProxy.host = `127.0.0.1:${outage.port}`;
      // The postgresql:// spelling selects PostgreSQL too.
      const server = await startServer({ db: viaProxy.toString().replace(/^postgres:/, 'postgresql:') });
      servers.push(server);
      const bucket = await createBucket(server.api);
      const base = `${server.api}/${bucket}`;
      expect((await call(`${base}/k`, { method: 'PUT', body: 'before' })).status).toBe(200);

      await outage.refuse();
      const ready = await call(`${server.url}/ready`);
      expect(ready.status).toBe(503);
      expect(ready.json()).toMatchObject({ status: 'degraded', storage: 'error' });
      expect((await call(`${server.url}/health`)).status).toBe(200);
      for (const answer of [
        await call(`${base}/k`),
        await call(`${base}/k`, { method: 'PUT', body: 'during' }),
        await call(`${base}/counter`, { method: 'PATCH', body: '+1' }),
        await call(`${base}/?format=json`),
        await call(base, {
          method: 'POST',
          ...json({
            txn: [
              { set: 'a', value: 1 },
              { set: 'b', value: 2 },
            ],
          }),
        }),
        await call(`${server.api}/`, { method: 'POST', body: new URLSearchParams({ email: 'x@y.z' }) }),
      ]) {
        expect(isEnvelope503(answer), `${answer.status} ${answer.text}`).toBe(true);
      }

      await outage.open();
      await expect.poll(async () => (await call(`${server.url}/ready`)).status, { timeout: 10_000, interval: 100 }).toBe(200);
      expect((await call(`${base}/k`)).text).toBe('before');
      expect((await call(`${base}/k`, { method: 'PUT', body: 'after' })).status).toBe(200);
      expect(server.process.exitCode).toBeNull();
      await outage.refuse();
      await outage.open(); // leave it up so stop() can close the pool cleanly
    });

    it('starting while PostgreSQL is unreachable fails with one clear line and a non-zero exit', async () => {
      const outage = new TcpProxy('127.0.0.1', 5432);
      await outage.open();
      const port = outage.port;
      await outage.refuse(); // nothing listens on `port` now
      const result = await execa('node', [KVB_BIN, 'serve', '--port', '0', '--db', `postgres://kvb@127.0.0.1:${port}/kvb`], {
        reject: false,
        timeout: 20_000,
      });
      expect(result.exitCode).toBe(1);
      expect(result.stdout).toBe('');
      expect(result.stderr.trim().split('\n')).toEqual([
        `kvb: cannot open PostgreSQL at 127.0.0.1:${port}/kvb: connect ECONNREFUSED 127.0.0.1:${port}`,
      ]);
    });
  },
);
