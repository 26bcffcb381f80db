import { get } from 'node:http';
import { connect } from 'node:net';
import { Client } from 'undici';
import { describe, expect, it } from 'vitest';
import { call, createBucket } from '../helpers/http.js';
import { rawSocket, readUntilEnd } from '../helpers/raw-socket.js';
import { DEFAULT_SERVER_CONFIG } from '../../src/server/server-config.js';
import { startServer } from '../helpers/server.js';

/** The drain under test is kvb serve's own: its default idle grace (test servers otherwise get 1 ms). */
const SERVE_DRAIN = { env: { KVB_DRAIN_IDLE_GRACE_MS: String(DEFAULT_SERVER_CONFIG.drainIdleGraceMs) } };
import { logged } from '../helpers/logged.js';

/**
 * A drain that drops nothing. On SIGTERM `/ready` answers 503, new connections are
 * refused, every request already received is answered (with `Connection: close`), idle
 * connections close, and the process exits. Runs on SQLite and PostgreSQL (and PgBouncer).
 */

interface WriterLog {
  acknowledged: Map<string, string>;
  /** Requests that failed, by error code; only ECONNREFUSED (never sent) is allowed. */
  failures: string[];
  afterSignal: number;
}

describe('SIGTERM drains: every request received is answered, none is reset', () => {
  it('32 keep-alive writers through SIGTERM: no reset mid-request, every 2xx write present after restart', {
    timeout: 90_000,
  }, async () => {
    const server = await startServer(SERVE_DRAIN);
    const bucket = await createBucket(server.api);
    const origin = new URL(server.url).origin;
    let signalled = false;
    const logs: WriterLog[] = [];
    const writer = async (w: number): Promise<void> => {
      const log: WriterLog = { acknowledged: new Map(), failures: [], afterSignal: 0 };
      logs.push(log);
      // One connection per writer, one request at a time on it, kept alive between requests.
      const client = new Client(origin, { pipelining: 1, keepAliveTimeout: 60_000 });
      try {
        for (let n = 0; ; n++) {
          const key = `w${w}/${n}`;
          try {
            const res = await client.request({
              method: 'PUT',
              path: `/api/v1/${bucket}/${key}`,
              body: `${w}:${n}`,
              headers: { 'content-type': 'text/plain' },
            });
            await res.body.text();
            if (res.statusCode >= 200 && res.statusCode < 300) log.acknowledged.set(key, `${w}:${n}`);
            else log.failures.push(`status ${res.statusCode}`);
            if (signalled) log.afterSignal++;
          } catch (err) {
            const code = String((err as { code?: unknown }).code);
            // Refused at connect: the request was never sent. Anything else means it was cut off.
            if (code === 'ECONNREFUSED') return;
            log.failures.push(`${code}: ${(err as Error).message}`);
            return;
          }
          if (n > 100_000) throw new Error('the server never stopped');
        }
      } finally {
        await client.destroy();
      }
    };
    const writers = Array.from({ length: 32 }, (_, w) => writer(w));
    // Every writer under way (a few answers each) before the signal.
    await expect
      .poll(() => logs.length === 32 && logs.every((l) => l.acknowledged.size >= 3), { timeout: 30_000, interval: 10 })
      .toBe(true);
    signalled = true;
    // process.kill, not the helper's stop(): execa would SIGKILL after 5 s, and on a loaded
    // machine the drain may take longer (its own deadline, --shutdown-timeout, bounds it).
    process.kill(server.process.pid!, 'SIGTERM');
    await Promise.all(writers);
    const result = await server.process;
    expect(result.exitCode, `${result.signal} ${server.logs().slice(-2000)}`).toBe(0);
    expect(logs.flatMap((l) => l.failures)).toEqual([]);
    const acknowledged = new Map(logs.flatMap((l) => [...l.acknowledged]));
    expect(acknowledged.size).toBeGreaterThan(32 * 3);

    // Every acknowledged write is there after a restart.
    const again = await startServer({ db: server.db, dataDir: server.dataDir });
    try {
      const listed = await call(`${again.api}/${bucket}/?format=json&values=true&limit=1000000`);
      expect(listed.status).toBe(200);
      const stored = new Map((listed.json() as Array<[string, unknown]>).map(([key, value]) => [key, String(value)]));
      const missing = [...acknowledged].filter(([key, value]) => stored.get(key) !== value);
      expect(missing).toEqual([]);
    } finally {
      await again.stop();
      await server.stop(); // exited already: this removes its data dir (or PostgreSQL schema)
    }
  });

  it('/ready answers 503 (draining) with Connection: close on a connection opened before the signal; new connections are refused', {
    timeout: 60_000,
  }, async () => {
    // A long grace for idle connections, so the check below does not race it.
    const server = await startServer({ env: { KVB_DRAIN_IDLE_GRACE_MS: '30000' } });
    const { hostname, port } = new URL(server.url);
    const idle = connect(Number(port), hostname);
    await new Promise((resolve) => idle.once('connect', resolve));
    let answer = '';
    idle.setEncoding('utf8').on('data', (chunk: string) => (answer += chunk));
    const closed = new Promise((resolve) => idle.once('close', resolve));
    // (Not fetch: its pooled keep-alive connection would sit out the long grace.)
    const before = await new Promise<number | undefined>((resolve, reject) =>
      get(`${server.url}/ready`, { agent: false }, (res) => resolve(res.resume().statusCode)).on('error', reject),
    );
    expect(before).toBe(200);
    process.kill(server.process.pid!, 'SIGTERM');
    await logged(server, /received SIGTERM, draining/);
    idle.write(`GET /ready HTTP/1.1\r\nHost: ${hostname}\r\n\r\n`);
    await closed;
    expect(answer).toMatch(/^HTTP\/1\.1 503 /);
    expect(answer.toLowerCase()).toContain('connection: close');
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toMatchObject({ status: 'degraded', draining: true });
    const refused = await new Promise<string>((resolve) => {
      const s = connect(Number(port), hostname);
      s.once('connect', () => {
        s.destroy();
        resolve('connected');
      });
      s.once('error', (err: NodeJS.ErrnoException) => resolve(String(err.code)));
    });
    expect(refused).toBe('ECONNREFUSED');
    const result = await server.process;
    expect(result.exitCode, `${result.signal} ${server.logs()}`).toBe(0);
    await server.stop();
  });

  it("a request pipelined behind the drain's last answer is neither answered nor applied", { timeout: 60_000 }, async () => {
    const server = await startServer(SERVE_DRAIN);
    const bucket = await createBucket(server.api);
    const socket = await rawSocket(server);
    const ended = readUntilEnd(socket, 30_000);
    let received = '';
    socket.on('data', (chunk: string) => (received += chunk));
    // A PUT with half its body. `Expect: 100-continue` makes the server say when it has the
    // request (the handler is waiting for the rest of the body), instead of a guess.
    socket.write(
      `PUT /api/v1/${bucket}/put HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\nhello`,
    );
    await expect.poll(() => received, { timeout: 20_000 }).toContain('HTTP/1.1 100 Continue');
    process.kill(server.process.pid!, 'SIGTERM');
    await logged(server, /received SIGTERM, draining/);
    // The rest of the body, and a counter increment pipelined behind it in the same write.
    socket.write(`worldPATCH /api/v1/${bucket}/ctr HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n+1`);
    const answer = await ended;
    socket.destroy();
    const result = await server.process;
    expect(result.exitCode, `${result.signal} ${server.logs().slice(-2000)}`).toBe(0);
    const statuses = [...answer.matchAll(/^HTTP\/1\.1 (\d{3}) /gm)].map((m) => m[1]);
    // The PUT is answered, with Connection: close; the PATCH behind it gets no answer.
    expect(statuses).toEqual(['100', '200']);
    expect(answer.toLowerCase()).toContain('connection: close');
    const again = await startServer({ db: server.db, dataDir: server.dataDir });
    try {
      expect((await call(`${again.api}/${bucket}/put`)).text).toBe('helloworld');
      // Unanswered, so never applied: a client retrying it does not count twice.
      expect((await call(`${again.api}/${bucket}/ctr`)).status).toBe(404);
    } finally {
      await again.stop();
      await server.stop();
    }
  });
});
