import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { NO_SECRET_REASON } from '../../src/store/dump-webhooks.js';
import { dumpStore, restoreDump, verifyDump } from '../../src/store/dump.js';
import type { Store } from '../../src/store/store.js';
import { uniqueName } from '../helpers/backend.js';
import { type StoreBackend, bucketRecord, describeEachBackend, openTestStore, text } from '../helpers/store-backends.js';
import { setEntry } from '../helpers/store-writes.js';

const NOW = Date.now();
const KEY = randomBytes(32);
/** Each test opens fresh stores (a SQLite file and its writer thread, or a PostgreSQL schema): slow on a busy machine. */
const OPENS = { timeout: 120_000 };
const openDumpStore = (backend: StoreBackend, url: string) => openTestStore(backend, url, { prefix: 'kvb_dumphooks', poolSize: 4 });

async function dumped(store: Store, key?: Buffer): Promise<string> {
  let out = '';
  await dumpStore(store, async (chunk) => void (out += chunk), NOW, key);
  return out;
}

async function* linesOf(text: string) {
  yield* text.split('\n').slice(0, -1);
}

/** A full view of a bucket's webhooks, secrets and positions included (what a restore must give back). */
const stored = async (store: Store, bucket: string) =>
  (await store.webhooks.all()).filter((w) => w.bucket === bucket).map(({ holder: _, leaseUntil: __, ...w }) => w);

/**
 * A dump carries every bucket's webhooks whole (id, position, retry state), and their signing
 * secrets never in clear: sealed with the operator's key, or left out and restored paused.
 */
describeEachBackend('dump and restore of webhooks', (backend, url) => {
  let store: Store;
  let cleanup: () => Promise<void>;
  let bucket: string;
  beforeAll(async () => {
    ({ store, cleanup } = await openDumpStore(backend, url));
    bucket = uniqueName('hooks');
    await store.buckets.create(bucketRecord(bucket));
    await setEntry(store, bucket, 'a', text('1'), null, NOW);
    for (const [id, prefix] of [
      ['wh_first', ''],
      ['wh_second', 'user/'],
    ] as const)
      expect(
        await store.webhooks.add(
          { id, bucket, url: `https://example.com/${id}`, prefix, kinds: ['set', 'delete'], secret: `whsec_${id}` },
          10,
          NOW,
        ),
      ).toBe(true);
    await setEntry(store, bucket, 'b', text('2'), null, NOW);
    await store.webhooks.pause(bucket, 'wh_second', 'paused by request');
  });
  afterAll(async () => {
    await store.close();
    await cleanup();
  });

  it('with a key: secrets sealed (never in clear), and a restore gives every webhook back as it was', OPENS, async () => {
    const text_ = await dumped(store, KEY);
    expect(text_).not.toContain('whsec_');
    expect(text_).toMatch(/"secret":"aes-256-gcm:/);
    expect(JSON.parse(text_.trimEnd().split('\n').at(-1)!)).toMatchObject({ kvb: 'end', webhooks: expect.any(Number) });
    expect((await verifyDump(linesOf(text_), KEY)).withoutSecret).toBe(0);
    const target = await openDumpStore(backend, url);
    try {
      const restored = await restoreDump(target.store, linesOf(text_), { force: false, now: NOW, secretsKey: KEY });
      expect(restored.webhooks).toBeGreaterThanOrEqual(2);
      expect(await stored(target.store, bucket)).toEqual(await stored(store, bucket));
    } finally {
      await target.store.close();
      await target.cleanup();
    }
  });

  it('a wrong key is refused by the check, before anything is written', async () => {
    const text_ = await dumped(store, KEY);
    await expect(verifyDump(linesOf(text_), randomBytes(32))).rejects.toThrow(/does not open webhook wh_\w+'s secret/);
    // An altered sealed secret fails the same way (GCM authenticates it, and the webhook id with it).
    const moved = text_.replace('"id":"wh_first"', '"id":"wh_other"');
    await expect(verifyDump(linesOf(moved), KEY)).rejects.toThrow(/line \d+: (the secrets key does not open|sha256)/);
  });

  it('without a key (at dump or at restore): secrets left out, each webhook restored paused with a new secret', OPENS, async () => {
    const plain = await dumped(store);
    expect(plain).not.toContain('whsec_');
    expect(plain).toContain('"secret":null');
    for (const [text_, key] of [
      [plain, KEY],
      [await dumped(store, KEY), undefined],
    ] as const) {
      expect((await verifyDump(linesOf(text_), key)).withoutSecret).toBe(2);
      const target = await openDumpStore(backend, url);
      try {
        await restoreDump(target.store, linesOf(text_), { force: false, now: NOW, ...(key && { secretsKey: key }) });
        const back = await stored(target.store, bucket);
        const before = await stored(store, bucket);
        expect(back.map((w) => [w.id, w.state, w.pausedReason, w.position])).toEqual(
          before.map((w) => [w.id, 'paused', NO_SECRET_REASON, w.position]),
        );
        for (const [i, w] of back.entries()) expect(w.secret).not.toBe(before[i]!.secret);
      } finally {
        await target.store.close();
        await target.cleanup();
      }
    }
  });

  it('a dump from before webhooks (version 3) still restores, with none', OPENS, async () => {
    const text_ = (await dumped(store, KEY))
      .split('\n')
      .filter((l) => !l.startsWith('{"kvb":"webhook"'))
      .join('\n');
    const header = text_.replace('"version":4', '"version":3');
    // Rewritten lines need their end line again: the check must accept only a consistent file.
    const { createHash } = await import('node:crypto');
    const lines = header.split('\n').slice(0, -2);
    const body = `${lines.join('\n')}\n`;
    const end = JSON.parse(header.split('\n').at(-2)!) as { buckets: number; count: number };
    const v3 = `${body}${JSON.stringify({ kvb: 'end', buckets: end.buckets, count: end.count, sha256: createHash('sha256').update(body).digest('hex') })}\n`;
    const target = await openDumpStore(backend, url);
    try {
      const restored = await restoreDump(target.store, linesOf(v3), { force: false, now: NOW });
      expect(restored).toMatchObject({ webhooks: 0 });
      expect(await target.store.buckets.get(bucket)).toBeDefined();
      expect(await stored(target.store, bucket)).toEqual([]);
    } finally {
      await target.store.close();
      await target.cleanup();
    }
  });
});
