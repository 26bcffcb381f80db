import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { connect as connectBucket } from '../../src/client/index.js';
import { inTerminal, kvb, kvbRunning } from '../helpers/cli.js';
import { call, createBucket } from '../helpers/http.js';
import { type RunningServer, startServer } from '../helpers/server.js';

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** The history floor of a bucket open to anyone: the oldest revision a watch can still resume after. */
const historyFloor = async (api: string, bucket: string) => Number((await call(`${api}/${bucket}`)).headers.get('kvb-history-floor'));

describe('kvb watch', () => {
  it('a since older than what the server keeps exits 7 and says what to do', { timeout: 60_000 }, async () => {
    // This server keeps changes for 1 s only.
    const brief = await startServer({ args: ['--history-retention', '1', '--sweep-interval', '1'] });
    try {
      const old = await createBucket(brief.api);
      await call(`${brief.api}/${old}/gone`, { method: 'PUT', body: 'x' });
      // The sweep raises the floor past revision 0 once the change is older than the retention.
      await expect.poll(() => historyFloor(brief.api, old), { timeout: 20_000, interval: 250 }).toBeGreaterThan(0);
      const reset = await kvb(['watch', '--since', '0'], { env: { KVB_URL: brief.url, KVB_BUCKET: old } });
      expect(reset.exitCode, reset.stderr).toBe(7);
      expect(reset.stderr).toContain('kvb ls');
      expect((await kvb(['watch', '--help'])).out).toContain('exits 7');
    } finally {
      await brief.stop();
    }
  });

  it('prints each change once, reconnects after the server restarts and resumes where it left off; Ctrl-C exits 0', {
    timeout: 60_000,
  }, async () => {
    const port = await freePort();
    const first = await startServer({ args: ['--port', String(port)] });
    const bucket = await createBucket(first.api);
    const watch = kvbRunning(['watch', 'k', '--format', 'jsonl', '--values'], { env: { KVB_URL: first.url, KVB_BUCKET: bucket } });
    let second: RunningServer | undefined;
    try {
      const sets = () => watch.events().filter((e) => e.type === 'set');
      const poll = { timeout: 20_000 };
      await expect.poll(() => watch.events().some((e) => e.type === 'sync'), poll).toBe(true);
      for (let i = 1; i <= 5; i++) expect((await call(`${first.api}/${bucket}/k${i}`, { method: 'PUT', body: `v${i}` })).status).toBe(200);
      await call(`${first.api}/${bucket}/other`, { method: 'PUT', body: 'not under k' });
      await expect.poll(() => sets().length, poll).toBe(5);

      const lastPrinted = sets().at(-1)!.rev;
      await first.stop({ keepData: true });
      second = await startServer({ dataDir: first.dataDir, args: ['--port', String(port)] });
      for (let i = 6; i <= 11; i++) await call(`${second.api}/${bucket}/k${i}`, { method: 'PUT', body: `v${i}` });
      // Changes arrive in revision order: once k11 is printed, a repeated k1..k10 would have been too.
      await expect.poll(() => sets().some((e) => e.key === 'k11'), poll).toBe(true);
      expect(sets().map((e) => [e.key, e.value])).toEqual(Array.from({ length: 11 }, (_, i) => [`k${i + 1}`, `v${i + 1}`]));
      expect(watch.err()).toContain(`reconnecting and resuming after revision ${lastPrinted}, the last change printed`);
      expect(await watch.stop('SIGINT')).toBe(0);
    } finally {
      watch.child.kill('SIGKILL');
      // The restarted server runs on the first one's data directory, which the first stop() removes.
      await second?.stop();
      await first.stop();
    }
  });
});

describe('kvb watch --exec', () => {
  it('a key or value containing U+0000 is still handled: the event on stdin, the variable named in KVB_OMITTED, never skipped', {
    timeout: 60_000,
  }, async () => {
    const server = await startServer();
    const dir = mkdtempSync(join(tmpdir(), 'kvb-exec-'));
    const bucket = await createBucket(server.api);
    const env = { KVB_URL: server.url, KVB_BUCKET: bucket, OUT: dir };
    // Each change leaves two files named after its revision: the stdin it got, and KVB_KEY|KVB_OMITTED.
    const handler = 'cat > "$OUT/$KVB_REVISION.in"; printf "%s|%s" "$KVB_KEY" "${KVB_OMITTED-}" > "$OUT/$KVB_REVISION.env"';
    const watch = kvbRunning(['watch', 'n/', '--values', '--exec', handler], { env });
    try {
      // Connected once a first change is handled (no output to wait for with --exec).
      await expect
        .poll(
          async () => {
            await call(`${server.api}/${bucket}/n%2Fready`, { method: 'PUT', body: 'ready', headers: { 'content-type': 'text/plain' } });
            return readdirSync(dir).length;
          },
          { timeout: 20_000, interval: 200 },
        )
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
      expect(handled(revisions[0]!)).toEqual({
        event: expect.objectContaining({ key: 'n/value', value: 'a\u0000b' }),
        env: 'n/value|KVB_VALUE',
      });
      expect(handled(revisions[1]!)).toEqual({ event: expect.objectContaining({ key: 'n/k\u0000ey', value: 'plain' }), env: '|KVB_KEY' });
      expect(handled(revisions[2]!)).toEqual({ event: expect.objectContaining({ key: 'n/after', value: 'z' }), env: 'n/after|' });
      expect(watch.err()).toContain('KVB_VALUE of set "n/value" at revision');
      expect(watch.err()).toContain('contains U+0000');
      expect(watch.err()).not.toContain('connection lost');
    } finally {
      watch.child.kill('SIGKILL');
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('kvb watch and kvb/client when the server drains', () => {
  it('SIGTERM ends both feeds with closed at once: the server exits long before its shutdown timeout, kvb watch says why', {
    timeout: 120_000,
  }, async () => {
    // A shutdown timeout of 100 s: a watcher that held the drain would hold the exit that long.
    const server = await startServer({ args: ['--shutdown-timeout', '100'] });
    const bucket = await createBucket(server.api);
    const watch = kvbRunning(['watch', 'w/', '--format', 'jsonl'], { env: { KVB_URL: server.url, KVB_BUCKET: bucket } });
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
        .poll(
          async () => {
            await call(`${server.api}/${bucket}/w%2F1`, { method: 'PUT', body: '1' });
            return seen.includes('w/1') && watch.events().some((e) => e.key === 'w/1');
          },
          { timeout: 20_000, interval: 300 },
        )
        .toBe(true);
      process.kill(server.process.pid!, 'SIGTERM');
      const result = await server.process;
      expect(result.exitCode, server.logs().slice(-2000)).toBe(0);
      expect(server.logs()).not.toContain('did not finish within');
      await expect.poll(() => watch.err(), { timeout: 20_000 }).toContain('the server ended the watch: the server is shutting down');
      expect(watch.err()).toContain('reconnecting and resuming after revision');
      expect(watch.err()).not.toContain('connection lost');
      expect(watch.child.exitCode).toBeNull();
    } finally {
      controller.abort();
      await feed;
      watch.child.kill('SIGKILL');
      await server.stop();
    }
  });

  it('at a terminal, each failed reconnection prints one line (attempt, reason, next try), so waiting is not silence', {
    timeout: 90_000,
  }, async () => {
    const server = await startServer();
    const bucket = await createBucket(server.api);
    await call(`${server.api}/${bucket}/w%2F1`, { method: 'PUT', body: 'one' });
    let stopped: Promise<unknown> | undefined;
    try {
      const result = await inTerminal(
        ['watch', 'w/', '--since', '0'],
        [
          // Connected and printing: then the server goes away for good.
          { expect: 'w/1', send: '' },
          { expect: 'still reconnecting (attempt 2', send: '\u0003' },
        ],
        { KVB_URL: server.url, KVB_BUCKET: bucket },
        (step) => {
          if (step === 0) {
            process.kill(server.process.pid!, 'SIGTERM');
            stopped = server.process;
          }
        },
      );
      expect(result.output).toContain('the server ended the watch: the server is shutting down');
      expect(result.output).toMatch(/still reconnecting \(attempt 1: cannot reach .+\); next try in \d+\.\d s/);
      expect(result.output).toContain('still reconnecting (attempt 2');
      expect(result.exitCode).toBe(0);
    } finally {
      await stopped;
      await server.stop();
    }
  });
});
