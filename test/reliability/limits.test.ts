import { execa } from 'execa';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createBucket, expectError } from '../helpers/http.js';
import { startRequest } from '../helpers/raw-socket.js';
import { KVB_BIN, type RunningServer, startServer } from '../helpers/server.js';

const create = (api: string) => call(`${api}/`, { method: 'POST', body: new URLSearchParams({ email: 'a@b.c' }) });

describe('limits on what anyone can consume, all off by default', () => {
  it('serve --help documents every limit with its environment variable; a bad rate is refused', async () => {
    const { stdout } = await execa('node', [KVB_BIN, 'serve', '--help']);
    for (const [flag, env] of [
      ['--rate-limit', 'KVB_RATE_LIMIT'],
      ['--bucket-creation-rate', 'KVB_BUCKET_CREATION_RATE'],
      ['--max-buckets', 'KVB_MAX_BUCKETS'],
      ['--shutdown-timeout', 'KVB_SHUTDOWN_TIMEOUT'],
      ['--trust-proxy', 'KVB_TRUST_PROXY'],
    ]) {
      expect(stdout).toContain(flag);
      expect(stdout).toContain(env);
    }
    const bad = await execa('node', [KVB_BIN, 'serve', '--rate-limit', '10 per minute'], { reject: false });
    expect(bad.exitCode).toBe(1);
    expect(bad.stderr).toMatch(/N\/WINDOW/);
  });

  describe('14. --rate-limit N/WINDOW per credential, per address when anonymous', () => {
    let server: RunningServer;
    beforeAll(async () => {
      server = await startServer({ env: { KVB_RATE_LIMIT: '5/1m' } });
    });
    afterAll(async () => {
      await server.stop();
    });

    it('answers 429 too_many_requests with Retry-After and the draft and X- rate headers past the limit', async () => {
      const url = `${server.api}/00000000-0000-4000-8000-000000000000/k`;
      const first = await call(url);
      expect(first.headers.get('x-ratelimit-limit')).toBe('5');
      expect(first.headers.get('x-ratelimit-remaining')).toBe('4');
      expect(first.headers.get('ratelimit-policy')).toBe('"kvb";q=5;w=60');
      expect(first.headers.get('ratelimit')).toMatch(/^"kvb";r=4;t=\d+$/);
      for (let i = 0; i < 4; i++) expect((await call(url)).status).toBe(404);
      const refused = await call(url);
      expectError(refused, 429, 'too_many_requests');
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(refused.headers.get('x-ratelimit-remaining')).toBe('0');
      expect(refused.headers.get('ratelimit')).toMatch(/^"kvb";r=0;t=\d+$/);
      // Monitoring still gets through.
      expect((await call(`${server.url}/health`)).status).toBe(200);
      // A credential has its own allowance, then its own 429.
      for (let i = 0; i < 5; i++) expect((await call(url, { token: 'some-credential' })).status).toBe(404);
      expectError(await call(url, { token: 'some-credential' }), 429, 'too_many_requests');
    });
  });

  describe('12. --max-buckets and --bucket-creation-rate', () => {
    let server: RunningServer;
    beforeAll(async () => {
      server = await startServer({ args: ['--max-buckets', '2', '--bucket-creation-rate', '3/1h'] });
    });
    afterAll(async () => {
      await server.stop();
    });

    it('a full server answers 507; a client past its creation rate gets 429 with Retry-After', async () => {
      await createBucket(server.api);
      await createBucket(server.api);
      const full = await create(server.api);
      expectError(full, 507, 'insufficient_storage');
      expect(full.headers.get('kvb-error-detail')).toMatch(/maximum of 2 buckets/);
      const limited = await create(server.api);
      expectError(limited, 429, 'too_many_requests');
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(3000);
      expect(limited.headers.get('ratelimit-policy')).toBe('"kvb";q=3;w=3600');
    });
  });

  it('12. concurrent creations never overshoot --max-buckets: the count and the insert run one at a time', async () => {
    const server = await startServer({ args: ['--max-buckets', '3'] });
    try {
      const answers = await Promise.all(Array.from({ length: 12 }, () => create(server.api)));
      expect(answers.filter((a) => a.status === 201)).toHaveLength(3);
      for (const a of answers.filter((x) => x.status !== 201)) expectError(a, 507, 'insufficient_storage');
    } finally {
      await server.stop();
    }
  });

  describe('4. graceful shutdown has a deadline', () => {
    it('SIGTERM with a client stuck mid-request cuts it at --shutdown-timeout and exits 0', async () => {
      const server = await startServer({ args: ['--shutdown-timeout', '1'] });
      const bucket = await createBucket(server.api);
      const { hostname, port } = new URL(server.url);
      // Not half-open: the socket closes when the server ends its side.
      const socket = connect(Number(port), hostname);
      const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
      socket.on('error', () => undefined);
      // The body never arrives in full: the request stays open until the 30 s request timeout.
      await startRequest(socket, `PUT /api/v1/${bucket}/k HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n`);
      socket.write('abc');
      // The deadline, not the request, ends the drain: it says so, and the exit is clean (the helper
      // would have to kill a server that hung, which is not exit 0).
      const code = await server.stop();
      expect(code).toBe(0);
      await closed;
      expect(server.logs()).toMatch(/did not finish within 1 s/);
    });
  });
});
