import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createBucket } from '../helpers/http.js';
import { rawSocket, readUntilEnd, startRequest } from '../helpers/raw-socket.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';

/**
 * The fast lane (src/server/fast-lane.ts) answers a GET hit and /health before Fastify. Its
 * answers must be Fastify's, byte for byte, with the same access line and metrics. Two servers,
 * each with a bucket holding the same keys set in the same order: `laned` as `kvb serve` runs by
 * default, `plain` with `--trust-proxy` naming an address no test connects from, which turns the
 * lane off and changes nothing else here.
 */
let laned: AppServer;
let plain: AppServer;
const buckets = new Map<AppServer, string>();

async function fill(server: AppServer): Promise<void> {
  const bucket = await createBucket(server.api, { secret_key: 'admin', read_key: 'reader', default_ttl: '0' });
  buckets.set(server, bucket);
  for (const [key, type, body] of [
    ['text', 'text/plain', 'hello'],
    ['json', 'application/json', '{"a":[1,2]}'],
    ['bytes', 'application/octet-stream', '\x00\xff'],
    ['a/b c', 'text/plain', 'encoded'],
  ] as const) {
    const res = await call(`${server.api}/${bucket}/${encodeURIComponent(key)}`, {
      method: 'PUT',
      token: 'admin',
      headers: { 'content-type': type },
      body,
    });
    expect(res.status, res.text).toBe(200);
  }
}

beforeAll(async () => {
  laned = await startAppServer();
  plain = await startAppServer({ config: { trustProxy: '10.9.9.9' } });
  await fill(laned);
  await fill(plain);
});
afterAll(async () => {
  await plain?.stop();
  await laned?.stop();
});

/** One request on a fresh connection; the raw answer with its Date line and generated request id masked. */
async function raw(server: AppServer, template: string[]): Promise<string> {
  const head = template.map((line) => line.replace('{b}', buckets.get(server)!));
  const socket = await rawSocket(server);
  socket.write(`${[...head, 'Host: kvb.test', 'Connection: close'].join('\r\n')}\r\n\r\n`);
  const text = await readUntilEnd(socket);
  socket.destroy();
  return text.replace(/^Date: .*$/m, 'Date: (now)').replace(/x-request-id: [0-9a-f-]{36}/, 'x-request-id: (generated)');
}

/** The server's access lines after `from` (an offset into its log), without time, pid or request id. */
function accessLines(server: AppServer, from: number): unknown[] {
  return server
    .logs()
    .slice(from)
    .split('\n')
    .filter((line) => line.includes('"msg":"request"'))
    .map((line) => {
      const { time: _t, pid: _p, hostname: _h, req_id: id, ms, url, ...rest } = JSON.parse(line);
      expect(id).toMatch(/^[0-9a-f-]{36}$|^probe-1$/);
      expect(ms).toEqual(expect.any(Number));
      return { ...rest, url: url.replace(buckets.get(server)!, '{b}') };
    });
}

async function requestCounts(server: AppServer): Promise<string[]> {
  const text = await server.app.metricsRegistry.metrics();
  return text.split('\n').filter((line) => /^kvb_(http_requests_total|entry_cache_(hits|misses)_total)/.test(line));
}

describe('the fast lane answers as Fastify does', () => {
  const cases: Array<[string, string[]]> = [
    ['a text hit', ['GET /api/v1/{b}/text HTTP/1.1', 'Authorization: Bearer reader']],
    ['a JSON hit', ['GET /api/v1/{b}/json HTTP/1.1', 'Authorization: Bearer admin']],
    ['a bytes hit', ['GET /api/v1/{b}/bytes HTTP/1.1', 'Authorization: Basic YWRtaW46']],
    ['a percent-encoded key', ['GET /api/v1/{b}/a%2Fb%20c HTTP/1.1', 'Authorization: Bearer admin']],
    ['a miss', ['GET /api/v1/{b}/absent HTTP/1.1', 'Authorization: Bearer admin']],
    ['no credential', ['GET /api/v1/{b}/text HTTP/1.1']],
    ['a wrong credential', ['GET /api/v1/{b}/text HTTP/1.1', 'Authorization: Bearer nope']],
    ['a malformed key', ['GET /api/v1/{b}/%E0%A4%A HTTP/1.1', 'Authorization: Bearer admin']],
    ['an If-None-Match', ['GET /api/v1/{b}/text HTTP/1.1', 'Authorization: Bearer admin', 'If-None-Match: "999"']],
    ['/health', ['GET /health HTTP/1.1']],
    ['/health with a request id', ['GET /health HTTP/1.1', 'X-Request-Id: probe-1']],
  ];
  it.each(cases)('%s: the same answer, access line and metrics', async (_name, head) => {
    // Twice each: the first request warms the bucket cache and the credential's verification.
    for (let round = 0; round < 2; round++) {
      const logged = [laned.logs().length, plain.logs().length];
      const before = [await requestCounts(laned), await requestCounts(plain)];
      const fromLane = await raw(laned, head);
      const fromFastify = await raw(plain, head);
      expect(fromLane).toBe(fromFastify);
      expect(fromLane).toMatch(/^HTTP\/1\.1 \d{3} /);
      expect(accessLines(laned, logged[0]!)).toEqual(accessLines(plain, logged[1]!));
      // The same series moved by the same amounts (a miss counted once, not once per reader).
      // Only once both entry caches are warm: the key was set through `laned`, whose cache has it.
      const after = [await requestCounts(laned), await requestCounts(plain)];
      if (round === 1) expect(delta(before[0]!, after[0]!)).toEqual(delta(before[1]!, after[1]!));
    }
  });

  it('a key set after a hit is read fresh: the headers built once belong to the entry, not the key', async () => {
    const url = `${laned.api}/${buckets.get(laned)}/text`;
    expect((await call(url, { token: 'admin' })).text).toBe('hello');
    await call(url, { method: 'PUT', token: 'admin', headers: { 'content-type': 'text/plain' }, body: 'changed' });
    const read = await call(url, { token: 'admin' });
    expect(read.text).toBe('changed');
    expect(read.headers.get('etag')).toBe(`"${read.headers.get('kvb-revision')}"`);
  });
});

/** How much each counter line moved between two scrapes. */
function delta(before: string[], after: string[]): Record<string, number> {
  const value = (lines: string[], name: string) => Number(lines.find((l) => l.startsWith(`${name} `))?.split(' ')[1] ?? 0);
  const moved: Record<string, number> = {};
  for (const line of after) {
    const name = line.slice(0, line.lastIndexOf(' '));
    const change = value(after, name) - value(before, name);
    if (change !== 0) moved[name] = change;
  }
  return moved;
}

describe('/health does not wait behind writes', () => {
  it('answers at once with a body announced and never sent', async () => {
    const socket = await rawSocket(laned);
    socket.write('GET /health HTTP/1.1\r\nHost: kvb.test\r\nContent-Length: 5\r\n\r\n');
    const answer = await new Promise<string>((resolve) => socket.once('data', (chunk) => resolve(chunk.toString())));
    socket.destroy();
    expect(answer).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(answer).toContain('"status":"ok"');
  });

  it('answers while 50 writes are under way, each waiting for its body', async () => {
    const writers = await Promise.all(Array.from({ length: 50 }, () => rawSocket(laned)));
    await Promise.all(
      writers.map((socket, i) =>
        startRequest(
          socket,
          `PUT /api/v1/${buckets.get(laned)}/w${i} HTTP/1.1\r\nHost: kvb.test\r\nAuthorization: Bearer admin\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nConnection: close\r\n`,
        ),
      ),
    );
    expect(await raw(laned, ['GET /health HTTP/1.1'])).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    const writes = await Promise.all(
      writers.map((socket) => {
        const answer = readUntilEnd(socket);
        socket.write('ok');
        return answer;
      }),
    );
    for (const answer of writes) expect(answer).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
  });
});
