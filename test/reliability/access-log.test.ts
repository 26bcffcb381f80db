import { request } from 'node:http';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createBucket } from '../helpers/http.js';
import { KVB_BIN, type RunningServer, startServer } from '../helpers/server.js';

/** Access-log lines (JSON) the server wrote so far. */
function accessLines(server: RunningServer): Array<Record<string, unknown>> {
  return server
    .logs()
    .split('\n')
    .filter((line) => line.includes('"msg":"request"'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** A GET with any headers (fetch refuses to set some, and picks its own X-Forwarded-For never). */
function get(url: string, headers: Record<string, string>): Promise<{ status: number; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers }));
    });
    req.on('error', reject);
    req.end();
  });
}

let plain: RunningServer;
let proxied: RunningServer;
beforeAll(async () => {
  [plain, proxied] = await Promise.all([startServer(), startServer({ args: ['--trust-proxy', '127.0.0.1'] })]);
});
afterAll(async () => {
  await Promise.all([plain?.stop(), proxied?.stop()]);
});

describe('access log', () => {
  it('one info line per request: method, route pattern, redacted path, status, time, bytes, client IP, request id', async () => {
    const bucket = await createBucket(plain.api, { secret_key: 'S3cret-access-log' });
    const res = await call(`${plain.api}/${bucket}/some/key?key=S3cret-access-log`);
    expect(res.status).toBe(404);
    const id = res.headers.get('x-request-id');
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    await expect.poll(() => accessLines(plain).find((l) => l.req_id === id)).toBeDefined();
    const line = accessLines(plain).find((l) => l.req_id === id)!;
    expect(line).toMatchObject({
      level: 30,
      msg: 'request',
      method: 'GET',
      route: '/api/v1/:bucket/*',
      url: `/api/v1/${bucket}/some/key?key=[redacted]`,
      status: 404,
      bytes: res.body.length,
      ip: '127.0.0.1',
    });
    expect(typeof line.ms).toBe('number');
    expect(plain.logs()).not.toContain('S3cret-access-log');
  });

  it('X-Request-Id is taken from the request when short and plain, else generated; returned when sent, and logged', async () => {
    const kept = await get(`${plain.url}/health`, { 'x-request-id': 'trace-abc.123' });
    expect(kept.headers['x-request-id']).toBe('trace-abc.123');
    const tooLong = await get(`${plain.url}/health`, { 'x-request-id': 'x'.repeat(200) });
    const unsafe = await get(`${plain.url}/health`, { 'x-request-id': 'a b"c' });
    for (const answer of [tooLong, unsafe]) expect(answer.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    await expect.poll(() => accessLines(plain).some((l) => l.req_id === 'trace-abc.123')).toBe(true);
    expect(plain.logs()).not.toContain('x'.repeat(200));
  });

  it('the client IP comes from X-Forwarded-For only when the peer is a proxy named by --trust-proxy', async () => {
    const [direct, viaProxy] = await Promise.all([
      get(`${plain.url}/health`, { 'x-forwarded-for': '203.0.113.7', 'x-request-id': 'xff-untrusted' }),
      get(`${proxied.url}/health`, { 'x-forwarded-for': '203.0.113.7', 'x-request-id': 'xff-trusted' }),
    ]);
    expect([direct.status, viaProxy.status]).toEqual([200, 200]);
    await expect.poll(() => accessLines(plain).find((l) => l.req_id === 'xff-untrusted')?.ip).toBe('127.0.0.1');
    await expect.poll(() => accessLines(proxied).find((l) => l.req_id === 'xff-trusted')?.ip).toBe('203.0.113.7');
  });

  it('--access-log off (or KVB_ACCESS_LOG=off) logs no request lines; a bad value is refused in one line', async () => {
    const quiet = await startServer({ env: { KVB_ACCESS_LOG: 'off' } });
    try {
      expect((await call(`${quiet.url}/health`)).status).toBe(200);
    } finally {
      await quiet.stop();
    }
    // Checked once the process has exited, so every line it would have written is in.
    expect(accessLines(quiet)).toEqual([]);
    const bad = await execa('node', [KVB_BIN, 'serve', '--port', '0', '--db', ':memory:', '--access-log', 'sometimes'], {
      reject: false,
      timeout: 15_000,
    });
    expect(bad).toMatchObject({ exitCode: 1, stderr: 'kvb: --access-log must be one of 1/0, true/false, yes/no, on/off, not "sometimes"' });
  });

  it('--log-format pretty writes human-readable lines (pino-pretty), json one object per line', async () => {
    const pretty = await startServer({ args: ['--log-format', 'pretty'] });
    try {
      await call(`${pretty.url}/health`);
      await call(`${pretty.url}/api/v1/no-such-bucket/k?key=secret-in-query`);
      await expect.poll(() => pretty.logs()).toMatch(/INFO.*request GET \/api\/v1\/no-such-bucket/);
      expect(pretty.logs()).toMatch(/INFO.*kvb \d+\.\d+\.\d+ listening on http:\/\//);
      expect(pretty.logs()).not.toContain('"level":30');
      // One line per request, as a person reads them at a terminal: method, path, status, time.
      const lines = pretty.logs().split('\n');
      expect(lines.filter((line) => /INFO.*request GET \/health 200 [\d.]+ ms$/.test(line))).toHaveLength(1);
      expect(lines.find((line) => line.includes('no-such-bucket'))).toMatch(
        /request GET \/api\/v1\/no-such-bucket\/k\?key=\S+ 404 [\d.]+ ms$/,
      );
      expect(pretty.logs()).not.toContain('secret-in-query');
      // No field on a line of its own (pino-pretty's default: nine lines for one request).
      expect(lines.filter((line) => /^\s+\w+: /.test(line))).toEqual([]);
    } finally {
      await pretty.stop();
    }
    expect(plain.logs().split('\n')[0]).toMatch(/^\{"level":30,/);
  });
});
