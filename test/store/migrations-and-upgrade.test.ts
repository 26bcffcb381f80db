import BetterSqlite3 from 'better-sqlite3';
import { execa } from 'execa';
import { createHash } from 'node:crypto';
import { copyFileSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Kysely, PostgresDialect, SqliteDialect, sql } from 'kysely';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { verifyCredential } from '../../src/auth/credential-hash.js';
import { type MigrationStep, kvbMigrations } from '../../src/store/kvb-migrations.js';
import { runMigrations } from '../../src/store/migration-runner.js';
import { openStore } from '../../src/store/open-store.js';
import { POSTGRES_URL, dropSchema, postgresUrl, uniqueName, withAdminClient } from '../helpers/backend.js';
import { KVB_BIN } from '../helpers/server.js';
import { setEntry } from '../helpers/store-writes.js';
import { bucketRecord } from '../helpers/store-backends.js';

const FIXTURES = new URL('../fixtures/', import.meta.url).pathname;
const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'kvb-migrate-'));
  dirs.push(dir);
  return dir;
};
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A migration that creates a table and then fails, as a full disk would halfway through 0001. */
const failing: MigrationStep = {
  name: '0002_fails_halfway',
  async up(db) {
    await db.schema.createTable('half_done').addColumn('id', 'integer').execute();
    throw new Error('disk full (simulated)');
  },
};

const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

describe('migrations, SQLite', () => {
  it('each migration runs in its own transaction: a failed one leaves nothing, and the next start completes', async () => {
    const path = join(tempDir(), 'kvb.db');
    const raw = new BetterSqlite3(path);
    const db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: raw }) });
    const [initial] = kvbMigrations('sqlite');
    await expect(runMigrations(db, [initial!, failing])).rejects.toThrow('disk full');
    const tables = (raw.prepare("select name from sqlite_master where type = 'table' order by name").all() as Array<{ name: string }>).map(
      (r) => r.name,
    );
    expect(tables).toEqual(['buckets', 'entries', 'kysely_migration']);
    expect(raw.prepare('select name from kysely_migration').all()).toEqual([{ name: '0001_initial' }]);
    await db.destroy();
    // The real migrations then finish the job, and the database opens.
    const store = await openStore(path, { durability: 'normal', poolSize: 1 });
    await store.buckets.create(bucketRecord('b'));
    expect(await store.buckets.revision('b')).toBe(0);
    await store.close();
  });

  it("a file holding another application's tables is refused without a single byte written (no tables, no WAL switch)", async () => {
    const path = join(tempDir(), 'other.db');
    const other = new BetterSqlite3(path);
    other.exec("create table users (id integer primary key, name text); insert into users (name) values ('ada')");
    other.close();
    const before = sha256(path);
    await expect(openStore(path, { durability: 'normal', poolSize: 1 })).rejects.toThrow(/is not a kvb database \(it holds users\)/);
    expect(sha256(path)).toBe(before);
    const check = new BetterSqlite3(path, { readonly: true });
    expect(check.pragma('journal_mode', { simple: true })).toBe('delete');
    check.close();

    const serve = await execa('node', [KVB_BIN, 'serve', '--port', '0', '--db', path], { reject: false, timeout: 15_000 });
    expect(serve.exitCode).toBe(1);
    expect(serve.stderr).toContain('is not a kvb database');
    expect(sha256(path)).toBe(before);
    // Nothing beside it either: no lock file, no WAL.
    expect(readdirSync(dirname(path))).toEqual(['other.db']);
    // The operator commands refuse it with the error table's exit code (a configuration error, not "try again later").
    const dbCheck = await execa('node', [KVB_BIN, 'db', 'check', '--db', path], { reject: false, env: { KVB_DB: '' } });
    expect(dbCheck.stderr).toContain('is not a kvb database');
    expect(dbCheck.exitCode).toBe(1);
    expect(sha256(path)).toBe(before);
  });

  it('a database written by kvb 0.1.0 opens, migrates and keeps every key and credential', async () => {
    const path = join(tempDir(), 'old.db');
    copyFileSync(join(FIXTURES, 'kvb-0.1.0.sqlite'), path);
    const store = await openStore(path, { durability: 'normal', poolSize: 1 });
    const id = 'aee25870-221a-47be-921c-d4c26160684d';
    const bucket = (await store.buckets.get(id))!;
    expect(bucket).toMatchObject({ email: 'a@b.c', signingKey: 'sign1', defaultTtl: 0, signingKeyGeneration: 0 });
    expect(await verifyCredential('s3cret', bucket.secretKeyHash!)).toBe(true);
    expect(await verifyCredential('r3ad', bucket.readKeyHash!)).toBe(true);
    const now = Date.now();
    expect(await store.getEntry(id, 'greeting', now)).toMatchObject({ type: 'text', data: Buffer.from('hello'), revision: 0 });
    expect(await store.getEntry(id, 'n', now)).toMatchObject({ type: 'int64', data: Buffer.from('41') });
    expect(await store.getEntry(id, 'j', now)).toMatchObject({ type: 'json', data: Buffer.from('{"a":1}') });
    expect(await store.buckets.revision(id)).toBe(0);
    // 0005 counted the usage of what was stored: keys, and key + value bytes.
    const stored = new BetterSqlite3(path, { readonly: true });
    const counted = stored
      .prepare('select count(*) as keys, sum(length(key) + length(value)) as bytes from entries where bucket_id = ?')
      .get(id);
    stored.close();
    expect((counted as { keys: number }).keys).toBeGreaterThan(0);
    expect(await store.buckets.usage(id)).toEqual(counted);
    expect(await setEntry(store, id, 'greeting', { type: 'text', data: Buffer.from('hi') }, null, now)).toEqual({ revision: 1 });
    // Replacing "hello" with "hi" frees 3 bytes.
    expect(await store.buckets.usage(id)).toEqual({ ...(counted as object), bytes: (counted as { bytes: number }).bytes - 3 });
    // 0007 (history): every key's state at the upgrade is history's base, and history starts there.
    expect(await store.changes.bounds(id)).toEqual({ floor: 0, watchFloor: 0, revision: 1 });
    const before = await store.history.readAt(id, 'greeting', 0);
    expect(before.outcome === 'ok' && before.value).toMatchObject({ type: 'text', data: Buffer.from('hello'), revision: 0 });
    expect((await store.history.keyHistory(id, 'greeting', Number.MAX_SAFE_INTEGER, 10)).map((h) => [h.revision, h.operation])).toEqual([
      [1, 'set'],
      [0, 'set'],
    ]);
    const listed = await store.history.listAt(id, { prefix: '', reverse: false, columns: 'keys', offset: 0, limit: 10 }, 0);
    expect(listed.outcome === 'ok' && listed.value.map((e) => e.key)).toEqual(['greeting', 'j', 'n']);
    await store.close();
    const check = new BetterSqlite3(path, { readonly: true });
    expect((check.prepare("select sql from sqlite_master where name = 'entries'").get() as { sql: string }).sql).toMatch(/without rowid$/i);
    expect(check.prepare('select count(*) as n from entries').get()).toEqual({ n: 3 });
    check.close();
  });

  it('0006 rebuilds the entries table WITHOUT ROWID in place: every row, column and index kept', async () => {
    const path = join(tempDir(), 'before-0006.db');
    const raw = new BetterSqlite3(path);
    const db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: raw }) });
    const steps = kvbMigrations('sqlite');
    const upTo0004 = steps.slice(0, steps.findIndex((s) => s.name === '0004_change_log') + 1);
    await runMigrations(db, upTo0004);
    raw
      .prepare("insert into buckets (id, email, default_ttl, created_at, revision, changes_floor) values ('b', 'a@b.c', 0, 0, 2000, 2000)")
      .run();
    const insert = raw.prepare("insert into entries (bucket_id, key, type, value, expires_at, revision) values ('b', ?, 'text', ?, ?, ?)");
    raw.transaction(() => {
      for (let i = 0; i < 2000; i++) insert.run(Buffer.from(`k${i}`), Buffer.from(`v${i}`), i % 2 ? null : 4_000_000_000_000 + i, i + 1);
    })();
    const before = raw.prepare('select * from entries order by bucket_id, key').all();
    await db.destroy();
    raw.close();

    const store = await openStore(path, { durability: 'normal', poolSize: 1 });
    // 0009 gives rows from before create revisions their revision as their create revision.
    expect(await store.getEntry('b', 'k7', 0)).toEqual({
      type: 'text',
      data: Buffer.from('v7'),
      expiresAt: null,
      revision: 8,
      createRevision: 8,
    });
    await store.close();
    const check = new BetterSqlite3(path, { readonly: true });
    expect((check.prepare("select sql from sqlite_master where name = 'entries'").get() as { sql: string }).sql).toMatch(/without rowid$/i);
    // Every row and column kept; 0009 added the create revision, each row's revision.
    expect(check.prepare('select * from entries order by bucket_id, key').all()).toEqual(
      (before as Array<{ revision: number }>).map((row) => ({ ...row, create_revision: row.revision })),
    );
    expect(check.prepare("select name from sqlite_master where type = 'index' and tbl_name = 'entries' and sql is not null").all()).toEqual(
      [{ name: 'entries_expires_at' }],
    );
    expect(check.prepare("select name from sqlite_master where name = 'entries_rebuilt'").all()).toEqual([]);
    check.close();
  });
});

describe.skipIf(!POSTGRES_URL)(`migrations, PostgreSQL${POSTGRES_URL ? '' : ' (SKIPPED: KVB_TEST_POSTGRES_URL is not set)'}`, () => {
  const schemas: string[] = [];
  afterAll(async () => {
    for (const schema of schemas) await dropSchema(schema);
  });
  const newSchema = () => {
    const schema = uniqueName('kvb_migrate');
    schemas.push(schema);
    return schema;
  };

  it('a failed migration leaves nothing behind', async () => {
    const schema = newSchema();
    await withAdminClient((c) => c.query(`create schema "${schema}"`));
    const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 2 });
    const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
    try {
      await expect(runMigrations(db, [kvbMigrations('postgres')[0]!, failing], schema)).rejects.toThrow('disk full');
      const { rows } = await pool.query('select table_name from information_schema.tables where table_schema = $1 order by 1', [schema]);
      expect(rows.map((r) => r.table_name)).toEqual(['buckets', 'entries', 'kysely_migration']);
      const applied = await db
        .withSchema(schema)
        .selectFrom('kysely_migration' as never)
        .select(sql`name`.as('name'))
        .execute();
      expect(applied).toEqual([{ name: '0001_initial' }]);
    } finally {
      await db.destroy();
    }
  });

  it('four instances migrating one fresh schema at once all start, under the lease row (no advisory lock)', async () => {
    const schema = newSchema();
    const url = postgresUrl({ schema });
    const stores = await Promise.all(Array.from({ length: 4 }, () => openStore(url, { durability: 'normal', poolSize: 2 })));
    try {
      const { rows } = await withAdminClient((c) => c.query(`select name from "${schema}".kysely_migration order by name`));
      // Every migration once (0006 is recorded on PostgreSQL too, where it has nothing to change).
      expect(rows.map((r) => r.name)).toEqual(
        kvbMigrations('postgres')
          .map((m) => m.name)
          .sort(),
      );
      expect(rows.map((r) => r.name)).toContain('0006_entries_without_rowid');
      expect(rows.map((r) => r.name)).toContain('0005_bucket_usage');
      const leases = await withAdminClient((c) => c.query(`select name, expires_at from "${schema}".kvb_leases`));
      // Released when done.
      expect(leases.rows).toEqual([{ name: 'migrate', expires_at: '0' }]);
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
  });

  it('a schema written by kvb 0.1.0 opens, migrates and keeps every key and credential', async () => {
    const schema = newSchema();
    const dump = readFileSync(join(FIXTURES, 'kvb-0.1.0-postgres.sql'), 'utf8').replaceAll('kvb_fixture_v010', schema);
    await withAdminClient((c) => c.query(dump));
    const store = await openStore(postgresUrl({ schema }), { durability: 'normal', poolSize: 2 });
    try {
      const id = '55fe7b53-e621-4db3-9ddb-724cc40889cd';
      const bucket = (await store.buckets.get(id))!;
      expect(bucket).toMatchObject({ email: 'a@b.c', signingKey: 'sign1', defaultTtl: 604800 });
      expect(await verifyCredential('s3cret', bucket.secretKeyHash!)).toBe(true);
      expect(await verifyCredential('r3ad', bucket.readKeyHash!)).toBe(true);
      // The fixture's keys expire on 2026-11-30 (the bucket's 7-day default TTL): read them as of their creation.
      const then = 1_795_409_453_000;
      expect(await store.getEntry(id, 'greeting', then)).toMatchObject({ type: 'text', data: Buffer.from('hello'), revision: 0 });
      expect(await store.getEntry(id, 'n', then)).toMatchObject({ type: 'int64', data: Buffer.from('41'), revision: 0 });
      expect(await store.buckets.revision(id)).toBe(0);
      // 0005 counted the usage of what was stored: keys, and key + value bytes.
      const counted = await withAdminClient(async (c) => {
        const { rows } = await c.query(
          `select count(*) as keys, sum(length(key) + length(value)) as bytes from "${schema}".entries where bucket_id = $1`,
          [id],
        );
        return { keys: Number(rows[0].keys), bytes: Number(rows[0].bytes) };
      });
      expect(counted.keys).toBeGreaterThan(0);
      expect(await store.buckets.usage(id)).toEqual(counted);
      expect(await setEntry(store, id, 'greeting', { type: 'text', data: Buffer.from('hi') }, null, then)).toEqual({ revision: 1 });
      expect(await store.buckets.usage(id)).toEqual({ keys: counted.keys, bytes: counted.bytes - 3 });
    } finally {
      await store.close();
    }
  });
});
