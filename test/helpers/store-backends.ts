import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'vitest';
import type { CounterUpdate } from '../../src/store/core/write-ops.js';
import { type OpenStoreOptions, openStore } from '../../src/store/open-store.js';
import type { Quota } from '../../src/store/quota.js';
import type { BucketRecord, Store } from '../../src/store/store.js';
import { PGBOUNCER_URL, POSTGRES_URL, dropSchema, postgresUrl, uniqueName } from './backend.js';

/** A backend the store suites (test/store) run on directly, all of them in one run. */
export type StoreBackend = 'sqlite' | 'postgres' | 'pgbouncer';

/** SQLite always; PostgreSQL when KVB_TEST_POSTGRES_URL is set; PostgreSQL through PgBouncer (transaction pooling) when KVB_TEST_PGBOUNCER_URL is set. */
const STORE_BACKENDS: Array<{ backend: StoreBackend; url: string | undefined; missing: string }> = [
  { backend: 'sqlite', url: 'sqlite', missing: '' },
  { backend: 'postgres', url: POSTGRES_URL, missing: 'KVB_TEST_POSTGRES_URL' },
  { backend: 'pgbouncer', url: PGBOUNCER_URL, missing: 'KVB_TEST_PGBOUNCER_URL' },
];

/** `describe(`${title} (${backend})`)` once per backend; a backend without its URL is reported as a skipped suite naming what to set. */
export function describeEachBackend(title: string, suite: (backend: StoreBackend, url: string) => void): void {
  for (const { backend, url, missing } of STORE_BACKENDS) {
    if (!url) {
      describe.skip(`${title} (${backend}): SKIPPED, set ${missing} to run it`, () => {
        it('needs a database', () => {});
      });
      continue;
    }
    describe(`${title} (${backend})`, () => suite(backend, url));
  }
}

export interface TestStoreOptions {
  /** Names the PostgreSQL schema (and application_name) or the SQLite temporary folder. */
  prefix: string;
  /** PostgreSQL's pool size (SQLite always opens one connection). */
  poolSize: number;
  pgBatchWrites?: boolean;
  /** Per-bucket quotas; none when absent. */
  quota?: Quota;
}

/**
 * A fresh PostgreSQL schema for a suite's own stores (two opened on it stand for two kvb
 * instances). `url` names it on `base` (with more URL parameters if given); `open` opens a store
 * on it, or at `url` when the suite builds its own (one that reaches the schema another way);
 * `drop` closes the stores given and drops the schema: a suite's afterAll.
 */
export function postgresTestSchema(prefix: string, base: string | undefined) {
  const schema = uniqueName(prefix);
  const url = (params: Record<string, string> = {}) => postgresUrl({ schema, ...params }, base);
  return {
    schema,
    url,
    open: (options: Partial<OpenStoreOptions> & { url?: string } = {}): Promise<Store> => {
      const { url: at = url(), ...rest } = options;
      return openStore(at, { durability: 'normal', poolSize: 4, ...rest });
    },
    async drop(...stores: Array<Store | undefined>): Promise<void> {
      await Promise.all(stores.map((s) => s?.close()));
      await dropSchema(schema);
    },
  };
}

/** A bucket's record with no credentials, as a store suite creates it. */
export const bucketRecord = (id: string, email = 'test@example.com'): BucketRecord => ({
  id,
  email,
  secretKeyHash: null,
  readKeyHash: null,
  writeKeyHash: null,
  signingKey: null,
  signingKeyGeneration: 0,
  tokenSalt: null,
  defaultTtl: 0,
});

/** A text value. */
export const text = (s: string) => ({ type: 'text' as const, data: Buffer.from(s) });

/** A store of its own on `backend` (a fresh schema or SQLite file), and how to remove it after closing. */
export async function openTestStore(
  backend: StoreBackend,
  url: string,
  { prefix, poolSize, pgBatchWrites, quota }: TestStoreOptions,
): Promise<{ store: Store; cleanup: () => Promise<void> }> {
  if (backend !== 'sqlite') {
    const own = postgresTestSchema(prefix, url);
    const store = await own.open({
      url: own.url({ application_name: own.schema }),
      poolSize,
      // Through PgBouncer, auto-detection must choose unnamed statements.
      pgPrepare: 'auto',
      pgBatchWrites,
      quota,
    });
    return { store, cleanup: () => own.drop() };
  }
  const dir = mkdtempSync(join(tmpdir(), `${prefix}-`));
  const store = await openStore(join(dir, 'kvb.db'), { durability: 'normal', poolSize: 1, quota });
  return { store, cleanup: async () => rmSync(dir, { recursive: true, force: true }) };
}

/** A counter update adding `n` (an absent key starts from it); keeps a live key's expiry, none for a new one. */
export const addCounter = (n: number | bigint): CounterUpdate => ({
  op: 'counter',
  delta: { kind: 'int64', value: BigInt(n) },
  expiresAt: null,
  keepExpiry: true,
});
