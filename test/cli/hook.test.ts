import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyDelivery } from '../../src/server/webhooks/webhook-signature.js';
import { type CliOptions, kvb } from '../helpers/cli.js';
import { createBucket } from '../helpers/http.js';
import { type RunningServer, startServer } from '../helpers/server.js';
import { startReceiver } from '../helpers/webhook-receiver.js';

const SECRET = 'hook-cli-admin';
let server: RunningServer;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
let bucket: string;

const on = (args: string[], options: CliOptions = {}) =>
  kvb(args, { ...options, env: { KVB_URL: server.url, KVB_BUCKET: bucket, KVB_TOKEN: SECRET, ...options.env } });

beforeAll(async () => {
  [server, receiver] = await Promise.all([startServer({ args: ['--webhook-allow-private', '--webhook-timeout', '2'] }), startReceiver()]);
  bucket = await createBucket(server.api, { secret_key: SECRET });
});
afterAll(async () => {
  await Promise.all([server?.stop(), receiver?.close()]);
});

describe('kvb hook', () => {
  it('adds a webhook (the secret alone on stdout), lists, tests, shows deliveries and removes it', async () => {
    const added = await on(['hook', 'add', receiver.url, '--prefix', 'cli/']);
    expect(added.exitCode, added.stderr).toBe(0);
    const secret = added.out.trim();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9_-]+$/);
    const id = /added webhook (wh_[\w-]+)/.exec(added.stderr)![1]!;

    const listed = await on(['hook', 'ls', '--json']);
    expect(JSON.parse(listed.out)).toEqual([expect.objectContaining({ id, prefix: 'cli/', state: 'active' })]);
    expect(listed.out).not.toContain(secret);

    expect((await on(['set', 'cli/a', '1'])).exitCode).toBe(0);
    await expect.poll(() => receiver.acknowledged().map((e) => e.key)).toEqual(['cli/a']);
    const [first] = receiver.received;
    expect(verifyDelivery(secret, String(first!.headers['kvb-signature']), first!.body, Math.floor(Date.now() / 1000))).toBe(true);

    const tested = await on(['hook', 'test', id, '--json']);
    expect(tested.exitCode, tested.stderr).toBe(0);
    expect(JSON.parse(tested.out)).toMatchObject({ ok: true, status: 200 });

    const log = await on(['hook', 'deliveries', id, '--limit', '5']);
    expect(JSON.parse(log.out).map((a: { status: number }) => a.status)).toEqual([200, 200]);

    expect((await on(['hook', 'pause', id])).stderr).toMatch(/paused/);
    expect((await on(['hook', 'resume', id])).stderr).toMatch(/active/);
    const rotated = await on(['hook', 'rotate', id]);
    expect(rotated.out.trim()).toMatch(/^whsec_/);
    expect(rotated.out.trim()).not.toBe(secret);

    expect((await on(['hook', 'rm', id])).exitCode).toBe(0);
    const gone = await on(['hook', 'rm', id]);
    expect(gone.exitCode).toBe(2);
  });

  it('refuses a wrong --kinds and a bad URL with a clear message', async () => {
    const kinds = await on(['hook', 'add', receiver.url, '--kinds', 'set,nope']);
    expect(kinds.exitCode).not.toBe(0);
    expect(kinds.stderr).toMatch(/--kinds/);
    const url = await on(['hook', 'add', 'ftp://example.com/']);
    expect(url.exitCode).not.toBe(0);
    expect(url.stderr).toMatch(/url must be/);
  });
});
