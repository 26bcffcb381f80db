import { execa } from 'execa';
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kvb, tempConfigHome } from '../helpers/cli.js';
import { exportFile } from '../helpers/export-file.js';
import { call, createBucket } from '../helpers/http.js';
import { KVB_BIN, type RunningServer, startServer } from '../helpers/server.js';

const KEYS = 100_000;
let server: RunningServer;
let bucket: string;
let dir: string;

beforeAll(async () => {
  server = await startServer();
  bucket = await createBucket(server.api);
  dir = mkdtempSync(join(tmpdir(), 'kvb-cli-export-'));
  const value = JSON.stringify('v'.repeat(300));
  const res = await call(`${server.api}/${bucket}`, {
    method: 'POST',
    body: exportFile(Array.from({ length: KEYS }, (_, i) => ({ key: `key/${String(i).padStart(6, '0')}`, type: 'text' as const, value }))),
    headers: { 'content-type': 'application/x-ndjson' },
  });
  expect(res.status, res.text).toBe(200);
}, 60_000);
afterAll(async () => {
  await server.stop();
});

/** Runs the real CLI under /usr/bin/time; returns its output and peak RSS in MiB. */
async function measured(args: string[], env: Record<string, string> = {}) {
  const result = await execa('/usr/bin/time', ['-f', 'peak-rss-kb %M', 'node', KVB_BIN, ...args], {
    env: { XDG_CONFIG_HOME: tempConfigHome(), KVB_URL: server.url, ...env },
    reject: false,
    stripFinalNewline: false,
    timeout: 60_000,
    maxBuffer: 256 * 1024 * 1024,
  });
  const peak = Number(/peak-rss-kb (\d+)/.exec(result.stderr)?.[1]) / 1024;
  return { exitCode: result.exitCode, stdout: result.stdout as string, stderr: result.stderr as string, peakMiB: peak };
}

describe('kvb ls follows cursors', () => {
  it(`lists all ${KEYS.toLocaleString('en')} keys with values by default, in bounded memory`, async () => {
    const { exitCode, stdout, peakMiB } = await measured(['ls', '--values', '--bucket', bucket]);
    expect(exitCode).toBe(0);
    const lines = stdout.split('\n');
    expect(lines.pop()).toBe('');
    expect(lines).toHaveLength(KEYS);
    expect(lines[0]).toBe(`key/000000=${'v'.repeat(300)}`);
    expect(lines.at(-1)).toMatch(/^key\/099999=/);
    // 35 MiB of listing; a CLI that held it would need far more than this.
    console.log(`kvb ls --values of ${KEYS} keys: peak RSS ${peakMiB.toFixed(0)} MiB`);
    expect(peakMiB).toBeLessThan(110);
  }, 60_000);

  it('--limit caps it; json pages join into one array; reverse and skip work across pages', async () => {
    const limited = await kvb(['ls', '--bucket', bucket, '--limit', '12345'], { env: { KVB_URL: server.url } });
    expect(limited.out.split('\n').filter(Boolean)).toHaveLength(12345);
    const json = await kvb(['ls', '--bucket', bucket, '--format', 'json', '--limit', '25000', '--skip', '5', '--reverse'], {
      env: { KVB_URL: server.url },
    });
    const keys = JSON.parse(json.out) as string[];
    expect(keys).toHaveLength(25_000);
    expect(keys[0]).toBe('key/099994');
    expect(new Set(keys).size).toBe(25_000);
    expect(keys.at(-1)).toBe('key/074995');
    const empty = await kvb(['ls', 'nothing/', '--bucket', bucket, '--format', 'json'], { env: { KVB_URL: server.url } });
    expect(JSON.parse(empty.out)).toEqual([]);
  }, 60_000);
});

describe('kvb export and kvb import', () => {
  it(`moves ${KEYS.toLocaleString('en')} keys between buckets through files and pipes, in bounded memory`, async () => {
    const file = join(dir, 'all.ndjson');
    const exported = await measured(['export', '--bucket', bucket, '-o', file]);
    expect(exported.exitCode, exported.stderr).toBe(0);
    expect(exported.stdout).toBe('');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const lines = readFileSync(file, 'utf8').split('\n');
    expect(JSON.parse(lines.at(-2)!)).toMatchObject({ kvb: 'end', count: KEYS });
    console.log(`kvb export of ${KEYS} keys: peak RSS ${exported.peakMiB.toFixed(0)} MiB`);
    expect(exported.peakMiB).toBeLessThan(110);

    const target = await createBucket(server.api);
    const imported = await measured(['import', file, '--bucket', target]);
    expect(imported.exitCode, imported.stderr).toBe(0);
    expect(imported.stdout).toBe('');
    expect(imported.stderr).toContain(`imported ${KEYS} keys, skipped 0`);
    console.log(`kvb import of ${KEYS} keys: peak RSS ${imported.peakMiB.toFixed(0)} MiB`);
    expect(imported.peakMiB).toBeLessThan(120);
    expect((await call(`${server.api}/${target}/key%2F099999`)).text).toBe('v'.repeat(300));

    // Through a pipe, a prefix only.
    const piped = await execa(
      'sh',
      [
        '-c',
        `node ${KVB_BIN} export key/0000 --bucket ${bucket} | node ${KVB_BIN} import - --bucket ${target} --mode replace --prefix key/0000`,
      ],
      {
        env: { XDG_CONFIG_HOME: tempConfigHome(), KVB_URL: server.url },
        reject: false,
      },
    );
    expect(piped.exitCode, piped.stderr).toBe(0);
    expect(piped.stderr).toContain('imported 100 keys');
  }, 120_000);

  it('a file cut short changes nothing and exits 1 naming the problem; a missing file is a usage error', async () => {
    const target = await createBucket(server.api);
    const whole = exportFile([
      { key: 'a', type: 'text', value: '"1"' },
      { key: 'b', type: 'text', value: '"2"' },
    ]);
    const cut = join(dir, 'cut.ndjson');
    writeFileSync(cut, whole.slice(0, whole.lastIndexOf('{"kvb":"end"')));
    const res = await kvb(['import', cut, '--bucket', target], { env: { KVB_URL: server.url } });
    expect(res.exitCode).toBe(1);
    expect(res.stderr).toMatch(/no end line/);
    expect((await call(`${server.api}/${target}/`)).text).toBe('');
    const missing = await kvb(['import', join(dir, 'nope.ndjson'), '--bucket', target], { env: { KVB_URL: server.url } });
    expect(missing.exitCode).toBe(1);
    expect(missing.stderr).toMatch(/cannot read/);
    const bad = await kvb(['import', cut, '--bucket', target, '--mode', 'overwrite'], { env: { KVB_URL: server.url } });
    expect(bad.exitCode).toBe(1);
  });
});
