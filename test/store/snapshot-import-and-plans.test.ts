import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CompiledStatement, bind } from '../../src/store/statements.js';
import type { KeyedEntry, Store } from '../../src/store/store.js';
import { POSTGRES_URL, TEST_BACKEND } from '../helpers/backend.js';
import { bucketRecord, openTestStore } from '../helpers/store-backends.js';
import { setEntry, deleteEntry } from '../helpers/store-writes.js';

/** Export snapshots, import staging and the list query's plan, straight on the store, on every backend. */
let store: Store;
let cleanup: () => Promise<void>;
const NOW = Date.now();
const BUCKET = 'plans';
const entry = (key: string, text = key): KeyedEntry => ({ key, entry: { type: 'text', data: Buffer.from(text), expiresAt: null } });

beforeAll(async () => {
  const postgres = TEST_BACKEND === 'postgres';
  ({ store, cleanup } = await openTestStore(postgres ? 'postgres' : 'sqlite', postgres ? POSTGRES_URL! : 'sqlite', {
    prefix: 'kvb_plans',
    poolSize: 4,
  }));
  for (const id of [BUCKET, 'other']) await store.buckets.create(bucketRecord(id, 'e@x'));
  const staging = await store.beginImport(BUCKET);
  for (let i = 0; i < 25; i++)
    await staging.add(Array.from({ length: 1000 }, (_, j) => entry(`k${String(i * 1000 + j).padStart(6, '0')}`)));
  await staging.apply({ replace: false, prefix: '' });
  await setEntry(store, 'other', 'k000001', { type: 'text', data: Buffer.from('other') }, null, NOW);
}, 60_000);
afterAll(async () => {
  await store.close();
  await cleanup();
});

describe(`Listing query plan (${TEST_BACKEND})`, () => {
  // Keys only, and keys with their metadata (type, size, expiry, revision; the console's badges).
  it.each([
    ['keys', 'list_asc_k_u_a'],
    ['meta', 'list_asc_m_u_a'],
  ] as const)('a page after a cursor (%s) is a key-range seek on the primary key, never a scan with an offset', async (columns, name) => {
    const rows = await store.listEntries(BUCKET, { prefix: 'k01', reverse: false, columns, offset: 0, limit: 10, after: 'k012345' }, NOW);
    expect(rows.map((r) => r.key)).toEqual(Array.from({ length: 10 }, (_, i) => `k0123${46 + i}`));
    if (columns === 'meta') expect(rows[0]!.meta).toMatchObject({ type: expect.any(String), size: expect.any(Number) });
    // The exact SQL the store runs for this page, taken from its compiled statements.
    const compiled = (store as unknown as { sql: Record<string, CompiledStatement> }).sql[name]!;
    const args = { bucket: BUCKET, lower: Buffer.from('k012345'), now: NOW, limit: 10, offset: 0, upper: Buffer.from('k02') };
    expect(compiled.sql.match(/"key" >/g)).toHaveLength(1);
    if (TEST_BACKEND === 'postgres') {
      const pool = (store as unknown as { runner: { pool: import('pg').Pool } }).runner.pool;
      const schema = compiled.sql.match(/from "([^"]+)"\."entries"/)![1];
      await pool.query(`analyze "${schema}".entries`);
      const { rows: plan } = await pool.query<{ 'QUERY PLAN': string }>(`explain ${compiled.sql}`, bind(compiled, args));
      const lines = plan.map((r) => r['QUERY PLAN']).join('\n');
      expect(lines).toMatch(/Index (Only )?Scan using entries_pkey/);
      expect(lines).toMatch(/Index Cond: .*key > /);
      expect(lines).not.toMatch(/Seq Scan/);
    } else {
      const raw = (store as unknown as { raw: import('better-sqlite3').Database }).raw;
      const plan = raw.prepare(`explain query plan ${compiled.sql}`).all(bind(compiled, args)) as Array<{ detail: string }>;
      const details = plan.map((r) => r.detail).join('\n');
      expect(details).toMatch(/SEARCH entries USING (PRIMARY KEY|INDEX sqlite_autoindex_entries_1) \(bucket_id=\? AND key>\? AND key<\?\)/);
      expect(details).not.toMatch(/SCAN entries/);
    }
    // One lower bound only, and it is the cursor's position (not the prefix, which would make
    // SQLite walk every key before the position).
    expect(compiled.params).toEqual(['bucket', 'lower', 'now', 'upper', 'limit', 'offset']);
  });
});

describe(`Export snapshot (${TEST_BACKEND})`, () => {
  it('reads the bucket as it was when opened, in key order, whatever is written meanwhile', async () => {
    const snapshot = (await store.openSnapshot(BUCKET, 'k00000', NOW))!;
    await setEntry(store, BUCKET, 'k00000-new', { type: 'text', data: Buffer.from('late') }, null, NOW);
    await deleteEntry(store, BUCKET, 'k000005', NOW);
    await setEntry(store, BUCKET, 'k000006', { type: 'text', data: Buffer.from('changed') }, null, NOW);
    const seen: Array<{ key: string; entry: { data: Buffer } }> = [];
    for (let batch = await snapshot.read(3); batch.length > 0; batch = await snapshot.read(3)) seen.push(...batch);
    await snapshot.close();
    expect(seen.map((e) => e.key)).toEqual(Array.from({ length: 10 }, (_, i) => `k00000${i}`));
    expect(seen[6]!.entry.data.toString()).toBe('k000006');
    // Closing twice is harmless; the writes made meanwhile are there afterwards.
    await snapshot.close();
    expect((await store.getEntry(BUCKET, 'k000006', NOW))?.data.toString()).toBe('changed');
    await setEntry(store, BUCKET, 'k000006', { type: 'text', data: Buffer.from('k000006') }, null, NOW);
    await setEntry(store, BUCKET, 'k000005', { type: 'text', data: Buffer.from('k000005') }, null, NOW);
    await deleteEntry(store, BUCKET, 'k00000-new', NOW);
  });

  it('leaves out expired entries and other buckets', async () => {
    await setEntry(store, 'other', 'gone', { type: 'text', data: Buffer.from('x') }, NOW - 1, NOW);
    const snapshot = (await store.openSnapshot('other', '', NOW))!;
    const rows = await snapshot.read(100);
    await snapshot.close();
    expect(rows.map((r) => [r.key, r.entry.data.toString()])).toEqual([['k000001', 'other']]);
  });
});

describe(`Import staging (${TEST_BACKEND})`, () => {
  it('nothing is visible before apply; abort leaves the bucket untouched', async () => {
    const staging = await store.beginImport('other');
    await staging.add([entry('staged/1'), entry('staged/1', 'last wins'), entry('staged/2')]);
    expect(await store.getEntry('other', 'staged/1', NOW)).toBeUndefined();
    await staging.abort();
    expect(await store.getEntry('other', 'staged/1', NOW)).toBeUndefined();
    const again = await store.beginImport('other');
    await again.add([entry('staged/1'), entry('staged/1', 'last wins'), entry('staged/2')]);
    await again.apply({ replace: false, prefix: '' });
    expect((await store.getEntry('other', 'staged/1', NOW))?.data.toString()).toBe('last wins');
  });

  it('replace deletes what the import does not hold under the prefix, and only there', async () => {
    const staging = await store.beginImport('other');
    await staging.add([entry('staged/3')]);
    await staging.apply({ replace: true, prefix: 'staged/' });
    const rows = await store.listEntries('other', { prefix: '', reverse: false, columns: 'keys', offset: 0, limit: 100 }, NOW);
    expect(rows.map((r) => r.key)).toEqual(['k000001', 'staged/3']);
  });
});
