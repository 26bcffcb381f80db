/**
 * Store-level cost per operation, in process (CPU µs): 100,000 SETs of 100 B (group-committed, 500
 * at a time), the same keys replaced, then 100,000 reads that miss the 25k-entry cache. SQLite.
 * Usage: npm run build && npx tsx bench/store-ops.ts [KVB_DIR] [quota]   (KVB_DIR: a built kvb, default this one)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
const dir = process.argv[2] ?? new URL('..', import.meta.url).pathname;
const quota = process.argv[3];
const { openStore } = await import(`${dir}/dist/store/open-store.js`);
const path = join(mkdtempSync(join(tmpdir(), 'kvb-micro-')), 'kvb.db');
const store = await openStore(path, {
  durability: 'normal',
  poolSize: 1,
  ...(quota && { quota: { maxKeys: 10_000_000, maxBytes: 10_000_000_000 } }),
});
const bucket = 'b';
const value = { type: 'text', data: Buffer.alloc(100, 120) };
// A KVB_DIR built before the Store interface grouped its members has the flat methods.
const createBucket = store.buckets ? (b: unknown) => store.buckets.create(b) : (b: unknown) => store.createBucket(b);
const setEntry = (key: string) =>
  store.write
    ? store.write(bucket, { op: 'set', key, value, expiresAt: null, now: Date.now() })
    : store.setEntry(bucket, key, value, null, Date.now());
await createBucket({
  id: bucket,
  email: 'a@b.c',
  secretKeyHash: null,
  readKeyHash: null,
  writeKeyHash: null,
  signingKey: null,
  signingKeyGeneration: 0,
  tokenSalt: null,
  defaultTtl: 0,
});
const N = 100_000;
const cpu = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};
// Load N keys (new keys), then overwrite them (replace), timing both.
let t = cpu();
for (let i = 0; i < N; i += 500) await Promise.all(Array.from({ length: 500 }, (_, j) => setEntry(`k${i + j}`)));
const insertUs = (cpu() - t) / N;
t = cpu();
for (let i = 0; i < N; i += 500) await Promise.all(Array.from({ length: 500 }, (_, j) => setEntry(`k${i + j}`)));
const replaceUs = (cpu() - t) / N;
// Reads in an order that defeats the 25k-entry cache (every key read once, 100k distinct).
t = cpu();
let hits = 0;
for (let i = 0; i < N; i++) if (await store.getEntry(bucket, `k${(i * 7919) % N}`, Date.now())) hits++;
const getUs = (cpu() - t) / N;
// A figure for work that was not done is worse than none (a build whose API differs can answer
// every call without writing): every key must have been written and read back.
if (hits !== N) {
  console.error(`store-ops: ${hits} of ${N} keys read back; this build did not store what it was sent`);
  process.exit(1);
}
await store.close();
rmSync(dirname(path), { recursive: true, force: true });
console.log(
  JSON.stringify({ dir, quota: !!quota, insertUs: +insertUs.toFixed(2), replaceUs: +replaceUs.toFixed(2), getMissUs: +getUs.toFixed(2) }),
);
