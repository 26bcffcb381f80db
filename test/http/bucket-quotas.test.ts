import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_BACKEND } from '../helpers/backend.js';
import { exportFile } from '../helpers/export-file.js';
import { type Answer, call, createBucket, expectError, json } from '../helpers/http.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';
import { recountUsage } from '../helpers/usage.js';
import { testClock } from '../helpers/test-clock.js';

/**
 * Per-bucket quotas. Usage is keys and bytes (each key's and value's length);
 * a write that would take a bucket over quota gets 507 and writes nothing; one that shrinks usage
 * or replaces a key with one no larger always passes. Runs on every backend.
 */
const bearer = (credential: string) => ({ authorization: `Bearer ${credential}` });
const MAX_KEYS = 5;
const MAX_BYTES = 200;

let server: AppServer;
// The server's time: a TTL runs out when a test moves it on.
const clock = testClock();
beforeAll(async () => {
  server = await startAppServer({
    config: { maxKeysPerBucket: MAX_KEYS, maxBytesPerBucket: MAX_BYTES, sweepIntervalSeconds: 1 },
    clock: clock.now,
  });
});
afterAll(async () => {
  await server?.stop();
});

const put = (bucket: string, key: string, body: string, query = '') =>
  call(`${server.api}/${bucket}/${key}${query}`, { method: 'PUT', body, headers: { ...bearer('w'), 'content-type': 'text/plain' } });

/** The usage the admin sees on the policy GET. */
async function usage(bucket: string): Promise<{ keys: number; bytes: number }> {
  const answer = await call(`${server.api}/${bucket}`, { headers: bearer('admin') });
  expect(answer.status).toBe(200);
  return { keys: Number(answer.headers.get('kvb-usage-keys')), bytes: Number(answer.headers.get('kvb-usage-bytes')) };
}

function expectOverQuota(answer: Answer, what: RegExp): void {
  expectError(answer, 507, 'insufficient_storage');
  expect((answer.json() as { error: { detail: string } }).error.detail).toMatch(what);
}

const recount = recountUsage;

describe(`per-bucket quotas (${TEST_BACKEND})`, () => {
  it('at the key limit a new key gets 507 and nothing is written; replacing a key within the budget works; a delete frees room', async () => {
    const bucket = await createBucket(server.api, { secret_key: 'admin', write_key: 'w' });
    for (let i = 0; i < MAX_KEYS; i++) expect((await put(bucket, `k${i}`, 'abc')).status).toBe(200);
    expect(await usage(bucket)).toEqual({ keys: MAX_KEYS, bytes: MAX_KEYS * (2 + 3) });
    expectOverQuota(await put(bucket, 'new', 'abc'), /quota of 5 keys/);
    expect((await call(`${server.api}/${bucket}/new`)).status).toBe(404);
    // Replacing an existing key adds no key, and a value no larger adds no byte.
    expect((await put(bucket, 'k0', 'xyz')).status).toBe(200);
    expect((await put(bucket, 'k0', 'x')).status).toBe(200);
    expect((await put(bucket, 'k0', 'longer value')).status).toBe(200);
    expect((await call(`${server.api}/${bucket}/k0`)).text).toBe('longer value');
    // A counter on a new key is a new key too.
    expectOverQuota(
      await call(`${server.api}/${bucket}/hits`, {
        method: 'PATCH',
        body: '+1',
        headers: { ...bearer('w'), 'content-type': 'text/plain' },
      }),
      /keys/,
    );
    expect((await call(`${server.api}/${bucket}/k1`, { method: 'DELETE', headers: bearer('w') })).status).toBe(204);
    expect((await put(bucket, 'new', 'abc')).status).toBe(200);
    expect(await usage(bucket)).toEqual({ keys: MAX_KEYS, bytes: 2 + 12 + 3 * 5 + (3 + 3) });
  });

  it('the byte limit counts keys and values; a write that grows past it gets 507, one that shrinks passes', async () => {
    const bucket = await createBucket(server.api, { secret_key: 'admin', write_key: 'w' });
    expect((await put(bucket, 'big', 'v'.repeat(150))).status).toBe(200);
    expectOverQuota(await put(bucket, 'more', 'v'.repeat(50)), /quota of 200 bytes/);
    expect((await call(`${server.api}/${bucket}/more`)).status).toBe(404);
    expectOverQuota(await put(bucket, 'big', 'v'.repeat(198)), /bytes/);
    expect((await call(`${server.api}/${bucket}/big`)).text).toBe('v'.repeat(150));
    expect((await put(bucket, 'big', 'v'.repeat(10))).status).toBe(200);
    expect((await put(bucket, 'more', 'v'.repeat(50))).status).toBe(200);
    expect(await usage(bucket)).toEqual({ keys: 2, bytes: 3 + 10 + 4 + 50 });
  });

  it('a transaction is counted as a whole: room made by its deletes is usable, and one over quota writes nothing', async () => {
    const bucket = await createBucket(server.api, { secret_key: 'admin', write_key: 'w' });
    const txn = (ops: unknown[]) => call(`${server.api}/${bucket}`, { method: 'POST', ...json({ txn: ops }, bearer('w')) });
    expect((await txn([0, 1, 2, 3].map((i) => ({ set: `t${i}`, value: 'x' })))).status).toBe(204);
    expectOverQuota(
      await txn([
        { set: 'a', value: 'x' },
        { set: 'b', value: 'x' },
      ]),
      /quota of 5 keys \(it holds 4; the write adds 2\)/,
    );
    expect((await call(`${server.api}/${bucket}/a`)).status).toBe(404);
    expect((await txn([{ delete: 't0' }, { set: 'a', value: 'x' }, { set: 'b', value: 'x' }])).status).toBe(204);
    expect(await usage(bucket)).toEqual({ keys: 5, bytes: 3 * (2 + 1) + 2 * (1 + 1) });
  });

  it('an import is counted as a whole (merge and replace); one over quota writes nothing', async () => {
    const bucket = await createBucket(server.api, { secret_key: 'admin', write_key: 'w' });
    const lines = (n: number, prefix: string) =>
      exportFile(Array.from({ length: n }, (_, i) => ({ key: `${prefix}${i}`, type: 'text' as const, value: '"x"' })));
    const importBody = (body: string, mode = 'merge') =>
      call(`${server.api}/${bucket}?mode=${mode}`, {
        method: 'POST',
        body,
        headers: { ...bearer('admin'), 'content-type': 'application/x-ndjson' },
      });
    expect((await importBody(lines(3, 'a'))).status).toBe(200);
    expectOverQuota(await importBody(lines(3, 'b')), /quota of 5 keys/);
    expect((await call(`${server.api}/${bucket}/b0`)).status).toBe(404);
    expect(await usage(bucket)).toEqual({ keys: 3, bytes: 3 * 3 });
    // Replace: the bucket ends up as the file, so 5 new keys fit where 3 were.
    expect((await importBody(lines(5, 'c'), 'replace')).status).toBe(200);
    expect(await usage(bucket)).toEqual({ keys: 5, bytes: 5 * 3 });
  });

  it('expiry by the sweeper frees room', async () => {
    const bucket = await createBucket(server.api, { secret_key: 'admin', write_key: 'w' });
    for (let i = 0; i < MAX_KEYS; i++) expect((await put(bucket, `e${i}`, 'x', i === 0 ? '?ttl=1' : '')).status).toBe(200);
    expectOverQuota(await put(bucket, 'new', 'x'), /keys/);
    clock.advance(1000);
    // An expired key counts until it is removed. The event: the next sweep (every second) has removed it.
    await expect.poll(() => usage(bucket), { timeout: 15_000, interval: 100 }).toEqual({ keys: MAX_KEYS - 1, bytes: (MAX_KEYS - 1) * 3 });
    expect((await put(bucket, 'new', 'x')).status).toBe(200);
  });

  it('usage is shown to the bucket admin only, with the quotas the server sets', async () => {
    const bucket = await createBucket(server.api, { secret_key: 'admin', read_key: 'r', write_key: 'w' });
    await put(bucket, 'k', 'hello');
    const admin = await call(`${server.api}/${bucket}`, { headers: bearer('admin') });
    expect(admin.headers.get('kvb-usage-keys')).toBe('1');
    expect(admin.headers.get('kvb-usage-bytes')).toBe('6');
    expect(admin.headers.get('kvb-quota-keys')).toBe(String(MAX_KEYS));
    expect(admin.headers.get('kvb-quota-bytes')).toBe(String(MAX_BYTES));
    // The spec's policy body keeps its shape.
    expect(Object.keys(admin.json() as object).sort()).toEqual(
      [
        'anonymous_access',
        'default_ttl',
        'has_read_key',
        'has_secret_key',
        'has_signing_key',
        'has_write_key',
        'signing_key_generation',
      ].sort(),
    );
    for (const other of [bearer('r'), bearer('w'), {}]) {
      const answer = await call(`${server.api}/${bucket}`, { headers: other });
      expect(answer.status).not.toBe(200);
      expect(answer.headers.get('kvb-usage-keys')).toBeNull();
    }
    // Nor on key reads and listings.
    expect((await call(`${server.api}/${bucket}/k`, { headers: bearer('r') })).headers.get('kvb-usage-keys')).toBeNull();
  });

  it('after a random mix of 2,000 writes (some refused) the counters match a recount of what is stored', { timeout: 180_000 }, async () => {
    const bucket = await createBucket(server.api, { secret_key: 'admin', write_key: 'w' });
    let seed = 42;
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const keys = Array.from({ length: 8 }, (_, i) => `r/${'k'.repeat(i % 3)}${i}`);
    const statuses = new Map<number, number>();
    const one = async () => {
      const key = keys[random(keys.length)]!;
      const kind = random(10);
      let answer: Answer;
      if (kind < 4) answer = await put(bucket, key, 'v'.repeat(random(60)));
      else if (kind < 6) answer = await call(`${server.api}/${bucket}/${key}`, { method: 'DELETE', headers: bearer('w') });
      else if (kind < 7)
        answer = await call(`${server.api}/${bucket}/n${random(7)}`, {
          method: 'PATCH',
          body: '+1',
          headers: { ...bearer('w'), 'content-type': 'text/plain' },
        });
      else {
        const ops = [
          { set: keys[random(keys.length)], value: 'x'.repeat(random(40)) },
          { delete: keys[random(keys.length)] },
          { set: keys[random(keys.length)], value: 'y' },
        ];
        answer = await call(`${server.api}/${bucket}`, { method: 'POST', ...json({ txn: ops }, bearer('w')) });
      }
      statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
    };
    // Eight clients at once, 250 writes each.
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        for (let i = 0; i < 250; i++) await one();
      }),
    );
    expect(
      [...statuses.keys()].every((s) => [200, 204, 404, 507].includes(s)),
      JSON.stringify([...statuses]),
    ).toBe(true);
    expect(statuses.get(507), 'some writes met the quota').toBeGreaterThan(0);
    const counted = await recount(server.db, bucket);
    expect(counted.usage).toEqual({ keys: counted.keys, bytes: counted.bytes });
    expect(await usage(bucket)).toEqual({ keys: counted.keys, bytes: counted.bytes });
    expect(counted.keys).toBeLessThanOrEqual(MAX_KEYS);
    expect(counted.bytes).toBeLessThanOrEqual(MAX_BYTES);
  });
});

describe(`usage without quotas (${TEST_BACKEND})`, () => {
  it('is kept and shown when no quota is set, without Kvb-Quota-* headers; nothing is refused', async () => {
    const free = await startAppServer();
    try {
      const bucket = await createBucket(free.api, { secret_key: 'admin' });
      for (let i = 0; i < 20; i++)
        expect((await call(`${free.api}/${bucket}/k${i}`, { method: 'PUT', body: 'v'.repeat(100) })).status).toBe(200);
      const answer = await call(`${free.api}/${bucket}`, { headers: bearer('admin') });
      expect(answer.headers.get('kvb-usage-keys')).toBe('20');
      expect(answer.headers.get('kvb-quota-keys')).toBeNull();
      expect(answer.headers.get('kvb-quota-bytes')).toBeNull();
    } finally {
      await free.stop();
    }
  });
});
