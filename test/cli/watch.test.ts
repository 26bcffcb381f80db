import { execa } from 'execa';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { connect as connectBucket } from '../../src/client/index.js';
import { kvb, tempConfigHome } from '../helpers/cli.js';
import { call, createBucket } from '../helpers/http.js';
import { KVB_BIN, startServer } from '../helpers/server.js';

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

let debugOut = () => '';
let logs = () => '';
const until = async (probe: () => boolean, ms = 15_000) => {
  const start = Date.now();
  while (!probe()) {
    if (Date.now() - start > ms) throw new Error(`timed out; ${debugOut()} ${logs()}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
};

describe('kvb watch', () => {
  it('prints each change once, reconnects after the server restarts and resumes where it left off; Ctrl-C exits 0; reset exits 7', { timeout: 60_000 }, async () => {
    const port = await freePort();
    // A second server keeps changes for 1 s only, for the reset case.
    const [first, brief] = await Promise.all([
      startServer({ args: ['--port', String(port)] }),
      startServer({ args: ['--watch-retention', '1', '--sweep-interval', '1'] }),
    ]);
    logs = () => first.logs();
    const bucket = await createBucket(first.api);
    const old = await createBucket(brief.api);
    await call(`${brief.api}/${old}/gone`, { method: 'PUT', body: 'x' });
    const env = { KVB_URL: first.url, KVB_BUCKET: bucket, XDG_CONFIG_HOME: tempConfigHome() };
    const child = execa('node', [KVB_BIN, 'watch', 'k', '--format', 'jsonl', '--values'], { env, reject: false, buffer: false, stdin: 'ignore' });
    let out = '';
    let err = '';
    child.stdout?.on('data', (c: Buffer) => (out += c.toString('utf8')));
    child.stderr?.on('data', (c: Buffer) => (err += c.toString('utf8')));
    debugOut = () => `${out} | stderr: ${err}`;
    const lines = () => out.split('\n').filter(Boolean).map((l) => JSON.parse(l) as { type: string; key?: string; rev?: number; value?: string });
    await until(() => lines().some((e) => e.type === 'sync'));
    for (let i = 1; i <= 5; i++) expect((await call(`${first.api}/${bucket}/k${i}`, { method: 'PUT', body: `v${i}` })).status).toBe(200);
    await call(`${first.api}/${bucket}/other`, { method: 'PUT', body: 'not under k' });
    await until(() => lines().filter((e) => e.type === 'set').length === 5);

    // `since` older than what the server keeps: exit 7 and what to do.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    const reset = await kvb(['watch', '--since', '0'], { env: { KVB_URL: brief.url, KVB_BUCKET: old } });
    await brief.stop();
    expect(reset.exitCode, reset.stderr).toBe(7);
    expect(reset.stderr).toContain('kvb ls');

    const lastPrinted = lines().filter((e) => e.type === 'set').at(-1)!.rev;
    await first.stop({ keepData: true });
    const second = await startServer({ dataDir: first.dataDir, args: ['--port', String(port)] });
    try {
      for (let i = 6; i <= 10; i++) await call(`${second.api}/${bucket}/k${i}`, { method: 'PUT', body: `v${i}` });
      await until(() => lines().filter((e) => e.type === 'set').length >= 10);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const sets = lines().filter((e) => e.type === 'set');
      expect(sets.map((e) => [e.key, e.value])).toEqual(Array.from({ length: 10 }, (_, i) => [`k${i + 1}`, `v${i + 1}`]));
      expect(err).toContain(`reconnecting and resuming after revision ${lastPrinted}, the last change printed`);
      child.kill('SIGINT');
      expect((await child).exitCode).toBe(0);

      const help = await kvb(['watch', '--help']);
      expect(help.out).toContain('exits 7');
    } finally {
      child.kill('SIGKILL');
      await second.stop();
    }
  });
});

describe('kvb watch --exec', () => {
  it('a key or value containing U+0000 is still handled: the event on stdin, the variable named in KVB_OMITTED, never skipped', { timeout: 60_000 }, async () => {
    const server = await startServer();
    const dir = mkdtempSync(join(tmpdir(), 'kvb-exec-'));
    logs = () => server.logs();
    const bucket = await createBucket(server.api);
    const env = { KVB_URL: server.url, KVB_BUCKET: bucket, XDG_CONFIG_HOME: tempConfigHome(), OUT: dir };
    // Each change leaves two files named after its revision: the stdin it got, and KVB_KEY|KVB_OMITTED.
    const handler = 'cat > "$OUT/$KVB_REVISION.in"; printf "%s|%s" "$KVB_KEY" "${KVB_OMITTED-}" > "$OUT/$KVB_REVISION.env"';
    const child = execa('node', [KVB_BIN, 'watch', 'n/', '--values', '--exec', handler], { env, reject: false, buffer: false, stdin: 'ignore' });
    let err = '';
    child.stderr?.on('data', (c: Buffer) => (err += c.toString('utf8')));
    debugOut = () => `stderr: ${err}`;
    try {
      // Connected once a first change is handled (no output to wait for with --exec).
      await expect
        .poll(async () => {
          await call(`${server.api}/${bucket}/n%2Fready`, { method: 'PUT', body: 'ready', headers: { 'content-type': 'text/plain' } });
          return readdirSync(dir).length;
        }, { timeout: 20_000, interval: 200 })
        .toBeGreaterThan(0);
      const put = (key: string, body: string) =>
        call(`${server.api}/${bucket}/${encodeURIComponent(key)}`, { method: 'PUT', body, headers: { 'content-type': 'text/plain' } });
      const nulValue = await put('n/value', 'a\u0000b');
      const nulKey = await put('n/k\u0000ey', 'plain');
      const after = await put('n/after', 'z');
      const revisions = [nulValue, nulKey, after].map((r) => r.headers.get('kvb-revision'));
      await expect.poll(() => revisions.every((rev) => readdirSync(dir).includes(`${rev}.env`)), { timeout: 20_000 }).toBe(true);
      const handled = (rev: string | null) => ({
        event: JSON.parse(readFileSync(join(dir, `${rev}.in`), 'utf8')) as { key: string; value: string },
        env: readFileSync(join(dir, `${rev}.env`), 'utf8'),
      });
      expect(handled(revisions[0]!)).toEqual({ event: expect.objectContaining({ key: 'n/value', value: 'a\u0000b' }), env: 'n/value|KVB_VALUE' });
      expect(handled(revisions[1]!)).toEqual({ event: expect.objectContaining({ key: 'n/k\u0000ey', value: 'plain' }), env: '|KVB_KEY' });
      expect(handled(revisions[2]!)).toEqual({ event: expect.objectContaining({ key: 'n/after', value: 'z' }), env: 'n/after|' });
      expect(err).toContain('KVB_VALUE of set "n/value" at revision');
      expect(err).toContain('contains U+0000');
      expect(err).not.toContain('connection lost');
    } finally {
      child.kill('SIGKILL');
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('kvb watch and kvb/client when the server drains', () => {
  it('SIGTERM ends both feeds with closed at once: the server exits long before its shutdown timeout, kvb watch says why', { timeout: 120_000 }, async () => {
    // A shutdown timeout of 100 s: a watcher that held the drain would hold the exit that long.
    const server = await startServer({ args: ['--shutdown-timeout', '100'] });
    logs = () => server.logs();
    const bucket = await createBucket(server.api);
    const env = { KVB_URL: server.url, KVB_BUCKET: bucket, XDG_CONFIG_HOME: tempConfigHome() };
    const child = execa('node', [KVB_BIN, 'watch', 'w/', '--format', 'jsonl'], { env, reject: false, buffer: false, stdin: 'ignore' });
    let out = '';
    let err = '';
    child.stdout?.on('data', (c: Buffer) => (out += c.toString('utf8')));
    child.stderr?.on('data', (c: Buffer) => (err += c.toString('utf8')));
    debugOut = () => `${out} | stderr: ${err}`;
    const controller = new AbortController();
    const seen: string[] = [];
    const client = connectBucket({ url: server.url, bucket });
    const feed = (async () => {
      try {
        for await (const event of client.watch({ prefix: 'w/', signal: controller.signal, maxBackoffMs: 500 })) seen.push(event.key);
      } catch (e) {
        if (!controller.signal.aborted) throw e;
      }
    })();
    try {
      // Both connected: a change written now reaches both.
      await expect
        .poll(async () => {
          await call(`${server.api}/${bucket}/w%2F1`, { method: 'PUT', body: '1' });
          return seen.includes('w/1') && out.includes('"key":"w/1"');
        }, { timeout: 20_000, interval: 300 })
        .toBe(true);
      process.kill(server.process.pid!, 'SIGTERM');
      const result = await server.process;
      expect(result.exitCode, server.logs().slice(-2000)).toBe(0);
      expect(server.logs()).not.toContain('did not finish within');
      await until(() => err.includes('the server ended the watch: the server is shutting down'));
      expect(err).toContain('reconnecting and resuming after revision');
      expect(err).not.toContain('connection lost');
      expect(child.exitCode).toBeNull();
    } finally {
      controller.abort();
      await feed;
      child.kill('SIGKILL');
      await server.stop();
    }
  });
});
