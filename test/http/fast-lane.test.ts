import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createBucket } from '../helpers/http.js';
import { rawSocket, readUntilEnd, startRequest } from '../helpers/raw-socket.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';
import { testClock } from '../helpers/test-clock.js';

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
/** Per server, the buckets the write cases use: `{w}` for writes, `{q}` filled to its byte quota, `{s}` for state. */
const writeBuckets = new Map<AppServer, Record<'w' | 'q' | 's', string>>();
/** Small limits, the same on both servers, so a body over the value limit and a quota refusal are cheap to send. */
const LIMITS = { maxValueBytes: 1024, maxBytesPerBucket: 8192 };

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

/** The write tests' buckets: plain (w), a quota of 8,192 bytes, 8,016 of them used (q), and spare (s). */
async function fillWriteBuckets(server: AppServer): Promise<void> {
  const policy = { secret_key: 'admin', read_key: 'reader', write_key: 'writer', default_ttl: '0' };
  const [w, q, s] = await Promise.all([0, 1, 2].map(() => createBucket(server.api, policy)));
  writeBuckets.set(server, { w: w!, q: q!, s: s! });
  // 8 keys of 1,002 bytes (key and value): the next 200 bytes are over the 8,192-byte quota.
  for (let i = 0; i < 8; i++) {
    const res = await call(`${server.api}/${q}/q${i}`, { method: 'PUT', token: 'admin', body: 'x'.repeat(1000) });
    expect(res.status, res.text).toBe(200);
  }
}

// Each bucket's keys are hashed with a slow KDF (as they must be): on a loaded two-core machine
// the eight buckets took over 30 s one after another, so both servers fill at once, with room.
beforeAll(async () => {
  // A clock that stands still: on a shared store (PostgreSQL) the bucket cache keeps a bucket for
  // a second of the app's time, and the lanes take only what it holds.
  const clock = testClock();
  laned = await startAppServer({ config: LIMITS, clock: clock.now });
  plain = await startAppServer({ config: { ...LIMITS, trustProxy: '10.9.9.9' }, clock: clock.now });
  await Promise.all(
    [laned, plain].map(async (server) => {
      await fill(server);
      await fillWriteBuckets(server);
    }),
  );
}, 120_000);
afterAll(async () => {
  await plain?.stop();
  await laned?.stop();
});

/** A request template's placeholders ({b}, {w}, {q}, {s}) filled with the server's bucket ids. */
function filled(server: AppServer, line: string): string {
  const ids = { b: buckets.get(server)!, ...writeBuckets.get(server) };
  return line.replace(/\{([bwqs])\}/g, (_m, name: keyof typeof ids) => ids[name]!);
}

/** The server's bucket ids in `text` turned back into their placeholders. */
function masked(server: AppServer, text: string): string {
  let result = text;
  for (const [name, id] of Object.entries({ b: buckets.get(server)!, ...writeBuckets.get(server) }))
    result = result.replaceAll(id, `{${name}}`);
  return result;
}

/**
 * One request on a fresh connection; the raw answer with its Date line and generated request id
 * masked. A body (latin1: any bytes) gets its Content-Length unless the head frames it itself.
 */
async function raw(server: AppServer, template: string[], body?: string): Promise<string> {
  const head = template.map((line) => filled(server, line));
  const framed = head.some((line) => /^(content-length|transfer-encoding):/i.test(line));
  if (body !== undefined && !framed) head.push(`Content-Length: ${Buffer.byteLength(body, 'latin1')}`);
  const socket = await rawSocket(server);
  socket.write(`${[...head, 'Host: kvb.test', 'Connection: close'].join('\r\n')}\r\n\r\n${body ?? ''}`, 'latin1');
  const text = await readUntilEnd(socket);
  socket.destroy();
  return masked(server, text.replace(/^Date: .*$/m, 'Date: (now)').replace(/x-request-id: [0-9a-f-]{36}/, 'x-request-id: (generated)'));
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
      return { ...rest, url: masked(server, url) };
    });
}

async function requestCounts(server: AppServer): Promise<string[]> {
  const text = await server.app.metricsRegistry.metrics();
  // Bucket reads are left out: on a shared store (PostgreSQL) the bucket cache reloads a bucket
  // every second, whichever lane answers.
  return text
    .split('\n')
    .filter((line) => /^kvb_(http_requests_total|entry_cache_(hits|misses)_total|store_operation_duration_seconds_count)/.test(line))
    .filter((line) => !line.includes('op="bucket_read"'));
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
  // The lane answers these itself, on every backend (PostgreSQL's read with a promise too).
  const answeredByLane = new Set(['a text hit', 'a JSON hit', 'a bytes hit', 'a percent-encoded key']);
  it.each(cases)('%s: the same answer, access line and metrics', async (name, head) => {
    // Twice each: the first request warms the bucket cache and the credential's verification.
    for (let round = 0; round < 2; round++) {
      const reads = laned.app.laneCounts.reads;
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
      if (round === 1) expect(laned.app.laneCounts.reads - reads).toBe(answeredByLane.has(name) ? 1 : 0);
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

const ADMIN = 'Authorization: Bearer admin';
const TEXT = 'Content-Type: text/plain';

/**
 * Writes, each sent to both servers in turn, in this order, so both write buckets pass through
 * the same revisions. `lane`: what the write lane does with it once the bucket and credential are
 * cached, `answers` (a success), `hands over` (read the body, then Fastify's route refused it
 * from that body and the store's answer) or `declines` (Fastify reads and answers it all).
 */
const writeCases: Array<[string, 'answers' | 'hands over' | 'declines', string[], string?]> = [
  ['a text set (PUT)', 'answers', ['PUT /api/v1/{w}/text HTTP/1.1', ADMIN, TEXT], 'hello'],
  ['a JSON set (POST)', 'answers', ['POST /api/v1/{w}/json HTTP/1.1', ADMIN, 'Content-Type: application/json; charset=utf-8'], '{"a":1}'],
  ['a set with no Content-Type (a number)', 'answers', ['PUT /api/v1/{w}/n HTTP/1.1', ADMIN], '042'],
  ['a bytes set', 'answers', ['PUT /api/v1/{w}/bytes HTTP/1.1', ADMIN, 'Content-Type: application/octet-stream'], '\x00\xff'],
  ['an empty set', 'answers', ['PUT /api/v1/{w}/empty HTTP/1.1', ADMIN, TEXT, 'Content-Length: 0']],
  ['a percent-encoded key', 'answers', ['PUT /api/v1/{w}/a%2Fb%20c HTTP/1.1', ADMIN, TEXT], 'encoded'],
  ['a counter', 'answers', ['PATCH /api/v1/{w}/count HTTP/1.1', ADMIN, TEXT], '+5'],
  ['a set under If-Match: *', 'answers', ['PUT /api/v1/{w}/text HTTP/1.1', ADMIN, TEXT, 'If-Match: *'], 'again'],
  ['a set by the write key', 'answers', ['PUT /api/v1/{w}/gone{r} HTTP/1.1', 'Authorization: Bearer writer', TEXT], 'bye'],
  ['a delete', 'answers', ['DELETE /api/v1/{w}/gone{r} HTTP/1.1', ADMIN]],
  ['a counter with a bad delta', 'hands over', ['PATCH /api/v1/{w}/count HTTP/1.1', ADMIN, TEXT], 'five'],
  ['a counter on a text value', 'hands over', ['PATCH /api/v1/{w}/text HTTP/1.1', ADMIN], '+1'],
  ['If-Match failing', 'hands over', ['PUT /api/v1/{w}/text HTTP/1.1', ADMIN, TEXT, 'If-Match: "1"'], 'nope'],
  ['If-None-Match: * on a live key', 'hands over', ['PUT /api/v1/{w}/text HTTP/1.1', ADMIN, TEXT, 'If-None-Match: *'], 'nope'],
  ['a delete of an absent key', 'hands over', ['DELETE /api/v1/{w}/absent HTTP/1.1', ADMIN]],
  ['a delete under a failing If-Match', 'hands over', ['DELETE /api/v1/{w}/n HTTP/1.1', ADMIN, 'If-Match: "1"']],
  ['an invalid JSON body', 'hands over', ['PUT /api/v1/{w}/json HTTP/1.1', ADMIN, 'Content-Type: application/json'], '{"a":'],
  ['text with a lone surrogate', 'hands over', ['PUT /api/v1/{w}/text HTTP/1.1', ADMIN, TEXT], '\xed\xa0\x80'],
  ['a quota refusal', 'hands over', ['PUT /api/v1/{q}/q8 HTTP/1.1', ADMIN, TEXT], 'x'.repeat(200)],
  ['a body over the value limit', 'declines', ['PUT /api/v1/{w}/big HTTP/1.1', ADMIN, TEXT], 'x'.repeat(1025)],
  ['a Content-Type Fastify refuses', 'declines', ['PUT /api/v1/{w}/text HTTP/1.1', ADMIN, 'Content-Type: nonsense'], 'x'],
  ['a chunked body', 'declines', ['PUT /api/v1/{w}/text HTTP/1.1', ADMIN, TEXT, 'Transfer-Encoding: chunked'], '5\r\nhello\r\n0\r\n\r\n'],
  ['a key too long', 'declines', [`PUT /api/v1/{w}/${'k'.repeat(129)} HTTP/1.1`, ADMIN, TEXT], 'x'],
  ['a malformed If-Match', 'declines', ['PUT /api/v1/{w}/text HTTP/1.1', ADMIN, TEXT, 'If-Match: 1'], 'x'],
  ['a reader writing', 'declines', ['PUT /api/v1/{w}/text HTTP/1.1', 'Authorization: Bearer reader', TEXT], 'x'],
  ['no credential', 'declines', ['DELETE /api/v1/{w}/text HTTP/1.1']],
  [
    'a write key under If-Match (it may not read)',
    'declines',
    ['PUT /api/v1/{w}/text HTTP/1.1', 'Authorization: Bearer writer', TEXT, 'If-Match: *'],
    'x',
  ],
  ['a write with a request id', 'declines', ['PUT /api/v1/{w}/id HTTP/1.1', ADMIN, TEXT, 'X-Request-Id: probe-1'], 'v'],
];

describe('the write lane answers as Fastify does', () => {
  it.each(writeCases)('%s (the lane %s it): the same answer, access line and metrics', async (_name, lane, head, body) => {
    // Twice each: the first request warms the bucket cache and the credential's verification.
    for (let round = 0; round < 2; round++) {
      const logged = [laned.logs().length, plain.logs().length];
      const before = [await requestCounts(laned), await requestCounts(plain)];
      const took = { ...laned.app.laneCounts };
      const request = head.map((line) => line.replace('{r}', String(round)));
      const fromLane = await raw(laned, request, body);
      const fromFastify = await raw(plain, request, body);
      expect(fromLane).toBe(fromFastify);
      expect(fromLane).toMatch(/^HTTP\/1\.1 \d{3} /);
      expect(accessLines(laned, logged[0]!)).toEqual(accessLines(plain, logged[1]!));
      const after = [await requestCounts(laned), await requestCounts(plain)];
      expect(delta(before[0]!, after[0]!)).toEqual(delta(before[1]!, after[1]!));
      if (round === 0) continue;
      const counts = laned.app.laneCounts;
      expect({ took: counts.writes - took.writes, handedOver: counts.handedOver - took.handedOver }).toEqual(
        { answers: { took: 1, handedOver: 0 }, 'hands over': { took: 1, handedOver: 1 }, declines: { took: 0, handedOver: 0 } }[lane],
      );
      expect(plain.app.laneCounts).toEqual({ reads: 0, writes: 0, handedOver: 0 });
    }
  });

  it('leaves the store as Fastify does: revisions, history and watch events', async () => {
    const state = async (server: AppServer) => {
      const { s } = writeBuckets.get(server)!;
      const watch = await watchLines(server, `/api/v1/${s}/?watch=true&format=jsonl`, 3);
      const answers = [
        await raw(server, ['PUT /api/v1/{s}/k HTTP/1.1', ADMIN, TEXT], 'v1'),
        await raw(server, ['PATCH /api/v1/{s}/c HTTP/1.1', ADMIN, TEXT], '+2'),
        await raw(server, ['DELETE /api/v1/{s}/k HTTP/1.1', ADMIN]),
      ];
      const history = await Promise.all(
        ['k', 'c'].map(async (key) => (await call(`${server.api}/${s}/${key}?history=true`, { token: 'admin' })).text),
      );
      const counter = await call(`${server.api}/${s}/c`, { token: 'admin' });
      const noTimes = (text: string) => masked(server, text).replace(/"(time|at|expires_at)":"[^"]*"/g, '"$1":"(t)"');
      return { answers, history: history.map(noTimes), events: (await watch.lines).map(noTimes), etag: counter.headers.get('etag') };
    };
    const took = laned.app.laneCounts.writes;
    const fromLane = await state(laned);
    expect(laned.app.laneCounts.writes - took).toBe(3);
    expect(fromLane.events).toHaveLength(3);
    expect(fromLane.history.join('')).toContain('"operation":"counter"');
    expect(fromLane).toEqual(await state(plain));
  });
});

/**
 * The first `count` change lines of a JSONL watch stream (admin credential; its sync and progress
 * lines left out), read as they arrive. Resolves once the stream is open, with its lines to come.
 */
async function watchLines(server: AppServer, path: string, count: number): Promise<{ lines: Promise<string[]> }> {
  const socket = await rawSocket(server);
  socket.write(`GET ${path} HTTP/1.1\r\nHost: kvb.test\r\n${ADMIN}\r\nConnection: close\r\n\r\n`);
  let text = '';
  // Resolves once the stream's head is in: the watch is registered before a write is sent.
  await new Promise<void>((resolve) => {
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      if (text.includes('\r\n\r\n')) resolve();
    });
  });
  const lines = new Promise<string[]>((resolve) => {
    const check = () => {
      const lines = text.split('\n').filter((line) => line.startsWith('{') && !/^\{"type":"(sync|progress)"/.test(line));
      if (lines.length < count) return;
      socket.destroy();
      resolve(lines.slice(0, count));
    };
    socket.on('data', check);
    check();
  });
  return { lines };
}

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
