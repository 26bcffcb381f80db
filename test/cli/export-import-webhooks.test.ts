import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kvb } from '../helpers/cli.js';
import { call, createBucket, json } from '../helpers/http.js';
import { type RunningServer, startServer } from '../helpers/server.js';

const ADMIN = 'cli-hooks-admin';
const auth = { authorization: `Bearer ${ADMIN}` };

/**
 * `kvb export` / `kvb import` carry a bucket's webhooks (a secret-key holder's export), and
 * `kvb db dump|restore` every webhook with its secret sealed by --secrets-key-file (or left out).
 */
describe("kvb export, import, db dump and restore carry a bucket's webhooks", () => {
  let server: RunningServer;
  let dir: string;
  let source: string;
  const cli = (args: string[], bucket: string) => kvb([...args, '--bucket', bucket], { env: { KVB_URL: server.url, KVB_TOKEN: ADMIN } });
  const listed = async (bucket: string, api = server.api) =>
    (await call(`${api}/webhooks/${bucket}`, { headers: auth })).json() as Array<{
      id: string;
      url: string;
      state: string;
      paused_reason: string | null;
    }>;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kvb-cli-hooks-'));
    server = await startServer({ args: ['--max-webhooks-per-bucket', '2'] });
    source = await createBucket(server.api, { secret_key: ADMIN });
    expect((await call(`${server.api}/${source}/k`, { method: 'PUT', body: 'v', headers: auth })).status).toBe(200);
    for (const url of ['https://example.com/a', 'https://example.com/b'])
      expect((await call(`${server.api}/webhooks/${source}`, { method: 'POST', ...json({ url }, auth) })).status).toBe(201);
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });

  it("kvb import prints each added webhook's id and new secret on stdout, once; past the limit it is refused and changes nothing", async () => {
    const file = join(dir, 'bucket.ndjson');
    const exported = await cli(['export', '-o', file], source);
    expect(exported.exitCode, exported.stderr).toBe(0);
    expect(readFileSync(file, 'utf8')).toContain('"kvb":"webhook"');
    expect(readFileSync(file, 'utf8')).not.toContain('whsec_');

    const target = await createBucket(server.api, { secret_key: ADMIN });
    const imported = await cli(['import', file], target);
    expect(imported.exitCode, imported.stderr).toBe(0);
    const printed = imported.out
      .trim()
      .split('\n')
      .map((l) => l.split(' '));
    expect(printed.map(([id, secret]) => [id?.slice(0, 3), secret?.slice(0, 6)])).toEqual([
      ['wh_', 'whsec_'],
      ['wh_', 'whsec_'],
    ]);
    expect((await listed(target)).map((w) => w.id)).toEqual(printed.map(([id]) => id));
    expect(imported.stderr).toMatch(/added webhook wh_\S+ \(active\) for https:\/\/example\.com\/a/);

    // A bucket with one webhook of its own has room for one more, not two.
    const full = await createBucket(server.api, { secret_key: ADMIN });
    await call(`${server.api}/webhooks/${full}`, { method: 'POST', ...json({ url: 'https://example.com/own' }, auth) });
    const refused = await cli(['import', file], full);
    expect(refused.exitCode).not.toBe(0);
    expect(refused.stderr).toMatch(/limit of 2 webhooks/);
    expect((await listed(full)).map((w) => w.url)).toEqual(['https://example.com/own']);
    expect((await call(`${server.api}/${full}/k`, { headers: auth })).status).toBe(404);
  }, 60_000);

  it('kvb db dump seals the secrets with --secrets-key-file; restore with the key gives them back active, without it paused', async () => {
    const keyFile = join(dir, 'dump.key');
    writeFileSync(keyFile, `${'ab'.repeat(32)}\n`);
    const bad = join(dir, 'bad.key');
    writeFileSync(bad, 'short');
    const dumpFile = join(dir, 'all.dump');
    const db = server.db;
    const refused = await kvb(['db', 'dump', '--db', db, '--secrets-key-file', bad, '-o', dumpFile]);
    expect(refused.exitCode).toBe(1);
    expect(refused.stderr).toMatch(/64 hex digits/);
    const dumped = await kvb(['db', 'dump', '--db', db, '--secrets-key-file', keyFile, '-o', dumpFile]);
    expect(dumped.exitCode, dumped.stderr).toBe(0);
    expect(dumped.stderr).toMatch(/\d+ webhooks \(secrets sealed\)/);
    expect(readFileSync(dumpFile, 'utf8')).not.toContain('whsec_');

    for (const withKey of [true, false]) {
      const restored = await startServer();
      const target = restored.db;
      await restored.stop({ keepData: true });
      const res = await kvb(['db', 'restore', dumpFile, '--db', target, ...(withKey ? ['--secrets-key-file', keyFile] : [])]);
      expect(res.exitCode, res.stderr).toBe(0);
      if (!withKey) expect(res.stderr).toMatch(/without their secret are paused until it is rotated/);
      const again = await startServer({ db: target });
      try {
        const back = await listed(source, again.api);
        expect(back.map((w) => w.id)).toEqual((await listed(source)).map((w) => w.id));
        expect(back.map((w) => w.state)).toEqual(withKey ? ['active', 'active'] : ['paused', 'paused']);
        if (!withKey) expect(back[0]!.paused_reason).toMatch(/rotate the secret/);
      } finally {
        await again.stop();
      }
    }
  }, 120_000);
});
