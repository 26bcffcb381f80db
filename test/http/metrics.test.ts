import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VERSION } from '../../src/version.js';
import { TEST_BACKEND } from '../helpers/backend.js';
import { call, createBucket } from '../helpers/http.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';
import { testClock } from '../helpers/test-clock.js';

// One server, sweeping every second, for every metric /metrics documents. Keys expire when the
// test moves its clock on.
let server: AppServer;
const clock = testClock();
beforeAll(async () => {
  server = await startAppServer({ config: { sweepIntervalSeconds: 1 }, clock: clock.now });
});
afterAll(async () => {
  await server.stop();
});

async function scrape(): Promise<string> {
  const res = await call(`${server.url}/metrics`);
  expect(res.status).toBe(200);
  return res.text;
}

/** The value of an unlabelled (or exactly labelled) sample, or undefined when absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

const typeOf = (text: string, name: string) => new RegExp(`^# TYPE ${name} (\\w+)$`, 'm').exec(text)?.[1];

describe('GET /metrics', () => {
  it('kvb_build_info is a gauge of 1 labelled with the version', async () => {
    const text = await scrape();
    expect(typeOf(text, 'kvb_build_info')).toBe('gauge');
    expect(sample(text, `kvb_build_info{version="${VERSION}"}`)).toBe(1);
  });

  it('kvb_keys_expired_swept_total rises when the sweeper removes an expired key', async () => {
    const before = await scrape();
    expect(typeOf(before, 'kvb_keys_expired_swept_total')).toBe('counter');
    const start = sample(before, 'kvb_keys_expired_swept_total')!;
    expect(start).toBeGreaterThanOrEqual(0);
    const bucket = await createBucket(server.api);
    for (const k of ['a', 'b', 'c'])
      expect((await call(`${server.api}/${bucket}/${k}?ttl=1`, { method: 'POST', body: 'x' })).status).toBe(200);
    expect((await call(`${server.api}/${bucket}/kept`, { method: 'POST', body: 'x' })).status).toBe(200);
    clock.advance(1000);
    // The event: the next sweep (every second) has removed them.
    await expect
      .poll(async () => sample(await scrape(), 'kvb_keys_expired_swept_total'), { timeout: 15_000, interval: 100 })
      .toBe(start + 3);
  });

  it('kvb_store_operation_duration_seconds is one histogram by op, with no status label', async () => {
    const bucket = await createBucket(server.api);
    const before = await scrape();
    expect(typeOf(before, 'kvb_store_operation_duration_seconds')).toBe('histogram');
    const count = (text: string, op: string) => sample(text, `kvb_store_operation_duration_seconds_count{op="${op}"}`) ?? 0;
    await call(`${server.api}/${bucket}/k`, { method: 'POST', body: 'v' });
    await call(`${server.api}/${bucket}/k`);
    await call(`${server.api}/${bucket}/n`, { method: 'PATCH', body: '+1' });
    await call(`${server.api}/${bucket}/?format=json`);
    await call(`${server.api}/${bucket}/k`, { method: 'DELETE' });
    const after = await scrape();
    for (const op of ['set', 'get', 'update', 'list', 'delete']) expect(count(after, op), op).toBeGreaterThan(count(before, op));
    const series = after.split('\n').filter((l) => l.startsWith('kvb_store_operation_duration_seconds'));
    const ops = new Set(series.map((l) => /op="([^"]+)"/.exec(l)?.[1]));
    expect(
      [...ops].every((op) => ['get', 'set', 'delete', 'update', 'list', 'commit', 'bucket_read', 'bucket_write', 'count'].includes(op!)),
    ).toBe(true);
    expect(series.some((l) => l.includes('status='))).toBe(false);
    expect(after).not.toContain(bucket);
  });

  it.runIf(TEST_BACKEND === 'sqlite')('SQLite: entry-cache hits and misses are counters that GETs move', async () => {
    const bucket = await createBucket(server.api);
    await call(`${server.api}/${bucket}/cached`, { method: 'POST', body: 'v' });
    const before = await scrape();
    expect(typeOf(before, 'kvb_entry_cache_hits_total')).toBe('counter');
    expect(typeOf(before, 'kvb_entry_cache_misses_total')).toBe('counter');
    const hits = sample(before, 'kvb_entry_cache_hits_total')!;
    const misses = sample(before, 'kvb_entry_cache_misses_total')!;
    // A key read once is a miss and is not cached; missed again soon after, it is hot and cached,
    // so the reads after that are hits.
    for (let i = 0; i < 4; i++) await call(`${server.api}/${bucket}/never-written`);
    const after = await scrape();
    expect(sample(after, 'kvb_entry_cache_misses_total')).toBe(misses + 2);
    expect(sample(after, 'kvb_entry_cache_hits_total')).toBe(hits + 2);
    expect(after).not.toMatch(/^kvb_pg_pool/m);
  });

  it.runIf(TEST_BACKEND === 'postgres')('PostgreSQL: pool total/idle/waiting gauges, and no entry-cache counters', async () => {
    const text = await scrape();
    for (const name of ['kvb_pg_pool_connections', 'kvb_pg_pool_idle_connections', 'kvb_pg_pool_waiting_requests']) {
      expect(typeOf(text, name), name).toBe('gauge');
      expect(sample(text, name), name).toBeGreaterThanOrEqual(0);
    }
    expect(sample(text, 'kvb_pg_pool_connections')).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'kvb_pg_pool_connections')).toBeGreaterThanOrEqual(sample(text, 'kvb_pg_pool_idle_connections')!);
    expect(text).not.toMatch(/^kvb_entry_cache/m);
  });
});
