import { execa } from 'execa';
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
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
