import { execa } from 'execa';
import { chmodSync, existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { call, createBucket } from '../helpers/http.js';
import { KVB_BIN, startServer } from '../helpers/server.js';
import { VERSION } from '../../src/version.js';
import { logged } from '../helpers/logged.js';
import { startRequest } from '../helpers/raw-socket.js';

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
  it('--help shows only what serve uses: no client flags or client exit codes', async () => {
    const { stdout } = await execa('node', [KVB_BIN, 'serve', '--help']);
    for (const clientOnly of [/--url/, /--token/, /--bucket /, /--profile/, /--timeout/, /Global Options/, /key or bucket not found/])
      expect(stdout).not.toMatch(clientOnly);
    expect(stdout).toContain('0  stopped cleanly (SIGTERM or SIGINT)');
    expect(stdout).toContain('port already in use');
  });

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
      expect(lines[0]).toContain(`kvb ${VERSION} listening on http://127.0.0.1:`);
      expect(lines[0]).toMatch(new RegExp(`listening on http://127\\.0\\.0\\.1:\\d+ \\(storage: sqlite ${join(dir, 'env.db')}\\)`));
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
    await startRequest(socket, `POST /api/v1/${id}/in-flight HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n`);
    response = '';
    socket.write('hello');
    server.process.kill('SIGTERM');
    await logged(server, /received SIGTERM, draining/);
    expect(server.process.exitCode).toBeNull(); // draining, and still waiting for the request to finish
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

  it('a second server on the same SQLite file fails to start at once, saying so, instead of sharing it', async () => {
    const dir = tempDir();
    const db = join(dir, 'kvb.db');
    const first = await startServer({ dataDir: dir, db });
    try {
      const second = await execa('node', [KVB_BIN, 'serve', '--port', '0', '--db', db], { reject: false, timeout: 15_000 });
      expect(second.exitCode).toBe(1);
      expect(second.stderr).toBe(
        `kvb: cannot open SQLite database ${db}: another process (another kvb serve?) has it open; one server per SQLite file`,
      );
    } finally {
      await first.stop();
    }
  });

  it('kill -9 of the server releases its SQLite lock: a new server starts on the file at once and serves it', async () => {
    const dir = tempDir();
    const db = join(dir, 'kvb.db');
    const first = await startServer({ dataDir: dir, db });
    const id = await createBucket(first.api);
    expect((await call(`${first.api}/${id}/k`, { method: 'PUT', body: 'kept' })).status).toBe(200);
    await first.stop({ keepData: true, signal: 'SIGKILL' });
    const second = await startServer({ dataDir: dir, db });
    try {
      expect((await call(`${second.api}/${id}/k`)).text).toBe('kept');
      // And it holds the lock in turn.
      const third = await execa('node', [KVB_BIN, 'serve', '--port', '0', '--db', db], { reject: false, timeout: 15_000 });
      expect(third.exitCode).toBe(1);
      expect(third.stderr).toMatch(/one server per SQLite file/);
    } finally {
      await second.stop({ keepData: true });
    }
  });

  it("the lock file beside the database (<db>-lock) gets the database file's permission bits", async () => {
    const dir = tempDir();
    const db = join(dir, 'kvb.db');
    await (await startServer({ dataDir: dir, db })).stop({ keepData: true });
    rmSync(`${db}-lock`);
    chmodSync(db, 0o600);
    await (await startServer({ dataDir: dir, db })).stop({ keepData: true });
    expect(statSync(`${db}-lock`).mode & 0o777).toBe(0o600);
  });

  it('a port in use is said in one line (exit 1), not as an unexpected error', async () => {
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const { port } = holder.address() as { port: number };
    try {
      const dir = tempDir();
      const result = await execa('node', [KVB_BIN, 'serve', '--port', String(port), '--host', '127.0.0.1', '--db', join(dir, 'kvb.db')], {
        reject: false,
        timeout: 15_000,
      });
      expect(result.exitCode).toBe(1);
      expect(result.stderr).toBe(`kvb: port ${port} is already in use (on 127.0.0.1)`);
    } finally {
      await new Promise((resolve) => holder.close(resolve));
    }
  });

  it('--db accepts only a path, sqlite:, file:, postgres:// and postgresql://; anything else, or an impossible path, fails in one line', async () => {
    const cwd = tempDir();
    const run = (db: string) => execa('node', [KVB_BIN, 'serve', '--port', '0', '--db', db], { reject: false, timeout: 15_000, cwd });
    const [mysql, proc, empty] = await Promise.all([run('mysql://x'), run('/proc/nope/x.db'), run('sqlite:')]);
    expect(mysql).toMatchObject({
      exitCode: 1,
      stderr: 'kvb: --db: unsupported database "mysql:": use a file path, sqlite:PATH, file:PATH, postgres:// or postgresql://',
    });
    expect(existsSync(join(cwd, 'mysql:'))).toBe(false);
    expect(proc).toMatchObject({
      exitCode: 1,
      stderr: 'kvb: cannot open SQLite database /proc/nope/x.db: cannot create directory /proc/nope: ENOENT',
    });
    expect(empty).toMatchObject({ exitCode: 1, stderr: 'kvb: --db: "sqlite:" names no file' });
  });

  it('file: and sqlite: paths open SQLite; missing parent directories are created and logged', async () => {
    const dir = tempDir();
    const nested = join(dir, 'a', 'b', 'kvb.db');
    const server = await startServer({ dataDir: dir, db: `file:${nested}` });
    try {
      expect(server.logs()).toContain(`created directory ${join(dir, 'a')} for the SQLite database`);
      expect(server.logs()).toContain(`created directory ${join(dir, 'a', 'b')} for the SQLite database`);
      expect(server.logs()).toContain(`(storage: sqlite ${nested})`);
      await createBucket(server.api);
    } finally {
      await server.stop();
    }
    expect(existsSync(nested)).toBe(true);
    const again = await startServer({ dataDir: dir, db: `sqlite://${nested}` });
    try {
      expect(again.logs()).not.toContain('created directory');
    } finally {
      await again.stop();
    }
  });

  it('boolean environment variables read 1/0, true/false, yes/no, on/off in any case, and refuse anything else', async () => {
    const start = (value: string) => startServer({ env: { KVB_REQUIRE_SECRET_KEY: value } });
    const servers = await Promise.all(['0', 'false', 'Off', 'YES', '1'].map(start));
    try {
      const statuses = await Promise.all(
        servers.map(
          async (server) =>
            (await call(`${server.api}/`, { method: 'POST', body: new URLSearchParams({ email: 'a@example.com' }) })).status,
        ),
      );
      expect(statuses).toEqual([201, 201, 201, 400, 400]);
    } finally {
      await Promise.all(servers.map((server) => server.stop()));
    }
    const bad = await execa('node', [KVB_BIN, 'serve', '--port', '0', '--db', ':memory:'], {
      reject: false,
      timeout: 15_000,
      env: { KVB_REQUIRE_SECRET_KEY: 'maybe' },
    });
    expect(bad).toMatchObject({
      exitCode: 1,
      stderr: 'kvb: KVB_REQUIRE_SECRET_KEY must be one of 1/0, true/false, yes/no, on/off, not "maybe"',
    });
  });
});
