import { execa } from 'execa';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { call, createBucket } from '../helpers/http.js';
import { KVB_BIN, startServer } from '../helpers/server.js';

const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'kvb-life-'));
  dirs.push(dir);
  return dir;
};
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('kvb serve: options, start-up and shutdown', () => {
  it('--help documents every option with its environment variable', async () => {
    const { stdout, exitCode } = await execa('node', [KVB_BIN, 'serve', '--help']);
    expect(exitCode).toBe(0);
    for (const [flag, env] of [
      ['--port', 'KVB_PORT'],
      ['--host', 'KVB_HOST'],
      ['--db', 'KVB_DB'],
      ['--log-level', 'KVB_LOG_LEVEL'],
      ['--default-ttl', 'KVB_DEFAULT_TTL'],
      ['--bucket-creation-key', 'KVB_BUCKET_CREATION_KEY'],
      ['--require-secret-key', 'KVB_REQUIRE_SECRET_KEY'],
      ['--cors-origin', 'KVB_CORS_ORIGIN'],
      ['--durability', 'KVB_DURABILITY'],
    ]) {
      expect(stdout).toContain(flag);
      expect(stdout).toContain(env);
    }
  });

  it('environment variables configure it, and it logs one line with the address', async () => {
    const dir = tempDir();
    const server = await startServer({ dataDir: dir, db: join(dir, 'env.db'), env: { KVB_DEFAULT_TTL: '42' } });
    try {
      const lines = server.logs().trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/kvb listening on http:\/\/127\.0\.0\.1:\d+ \(storage: sqlite\)/);
      const id = await createBucket(server.api);
      expect((await call(`${server.api}/${id}`)).json()).toMatchObject({ default_ttl: 42 });
    } finally {
      await server.stop();
    }
  });

  it('a bad option is refused with a one-line message and exit code 1', async () => {
    const result = await execa('node', [KVB_BIN, 'serve', '--port', 'eighty'], { reject: false });
    expect(result.exitCode).toBe(1);
    expect(result.stderr).toMatch(/--port/);
    expect(result.stderr).not.toMatch(/\n\s+at /);
  });

  it('SIGTERM finishes an in-flight request, closes the database and exits 0', async () => {
    const dir = tempDir();
    const db = join(dir, 'kvb.db');
    const server = await startServer({ dataDir: dir, db });
    const id = await createBucket(server.api);
    const { hostname, port } = new URL(server.url);
    // A set whose body is only half sent when the signal arrives.
    const socket = connect(Number(port), hostname);
    let response = '';
    socket.setEncoding('utf8').on('data', (chunk: string) => (response += chunk));
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    socket.write(`POST /api/v1/${id}/in-flight HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\nhello`);
    await new Promise((r) => setTimeout(r, 200));
    server.process.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 300));
    expect(server.process.exitCode).toBeNull(); // still waiting for the request to finish
    const answered = new Promise<void>((resolve) => socket.on('data', () => response.includes('helloworld') && resolve()));
    socket.write('world');
    await answered;
    socket.end();
    // No second signal: it would cut the shutdown short on purpose.
    const exitCode = (await server.process).exitCode;
    expect(response).toMatch(/^HTTP\/1\.1 200 /);
    expect(response).toMatch(/helloworld$/);
    expect(exitCode).toBe(0);
    expect(server.logs()).toContain('stopped');

    const again = await startServer({ dataDir: dir, db });
    try {
      expect((await call(`${again.api}/${id}/in-flight`)).text).toBe('helloworld');
    } finally {
      await again.stop();
    }
  });

  it('SIGINT also exits 0', async () => {
    const server = await startServer();
    expect(await server.stop({ signal: 'SIGINT' })).toBe(0);
  });

  it('a second server on the same SQLite file fails to start instead of sharing it', async () => {
    const dir = tempDir();
    const db = join(dir, 'kvb.db');
    const first = await startServer({ dataDir: dir, db });
    try {
      await expect(startServer({ dataDir: dir, db })).rejects.toThrow(/exited early \((?!0\))/);
    } finally {
      await first.stop();
    }
  });
});
