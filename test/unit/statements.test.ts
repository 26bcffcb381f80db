import { describe, expect, it } from 'vitest';
import {
  LIST_SHAPES,
  bind,
  compileAll,
  compileStatement,
  listShapeName,
  listStatement,
  param,
  portabilityStatements,
  queryBuilder,
  sharedStatements,
  sqliteStatements,
} from '../../src/store/statements.js';
import { postgresBatchStatements, postgresStatements } from '../../src/store/postgres/postgres-statements.js';

/** Each statement's SQL, per dialect, spelled out: a change to a query shows here, on both dialects at once. */
describe('statements compile once per dialect, with named parameters', () => {
  const sqlite = compileAll({ ...sharedStatements(queryBuilder('sqlite')), ...sqliteStatements(queryBuilder('sqlite')) });
  const pg = compileAll({
    ...sharedStatements(queryBuilder('postgres', 'kvb')),
    ...postgresStatements(queryBuilder('postgres', 'kvb')),
    ...postgresBatchStatements('kvb'),
  });
  const shared: Array<[string, string, string, string[]]> = [
    ['getBucket', 'select * from "buckets" where "id" = ?', 'select * from "kvb"."buckets" where "id" = $1', ['id']],
    [
      'bucketRevision',
      'select "revision" from "buckets" where "id" = ?',
      'select "revision" from "kvb"."buckets" where "id" = $1',
      ['bucket'],
    ],
    [
      'bumpBucket',
      'update "buckets" set "revision" = revision + 1 where "id" = ? returning "revision", "usage_keys", "usage_bytes"',
      'update "kvb"."buckets" set "revision" = revision + 1 where "id" = $1 returning "revision", "usage_keys", "usage_bytes"',
      ['bucket'],
    ],
    [
      'recountUsage',
      'update "buckets" set "usage_keys" = (select count(*) as "n" from "entries" where "entries"."bucket_id" = "buckets"."id"), "usage_bytes" = (select coalesce(sum(length(key) + length(value)), 0) as "n" from "entries" where "entries"."bucket_id" = "buckets"."id") where "id" = ?',
      'update "kvb"."buckets" set "usage_keys" = (select count(*) as "n" from "kvb"."entries" where "kvb"."entries"."bucket_id" = "kvb"."buckets"."id"), "usage_bytes" = (select coalesce(sum(length(key) + length(value)), 0) as "n" from "kvb"."entries" where "kvb"."entries"."bucket_id" = "kvb"."buckets"."id") where "id" = $1',
      ['bucket'],
    ],
    ['deleteBucket', 'delete from "buckets" where "id" = ?', 'delete from "kvb"."buckets" where "id" = $1', ['bucket']],
    [
      'deleteBucketEntries',
      'delete from "entries" where "bucket_id" = ?',
      'delete from "kvb"."entries" where "bucket_id" = $1',
      ['bucket'],
    ],
    [
      'getEntry',
      'select "type", "value", "expires_at", "revision", "create_revision" from "entries" where "bucket_id" = ? and "key" = ?',
      'select "type", "value", "expires_at", "revision", "create_revision" from "kvb"."entries" where "bucket_id" = $1 and "key" = $2',
      ['bucket', 'key'],
    ],
    [
      'putEntry',
      'insert into "entries" ("bucket_id", "key", "type", "value", "expires_at", "revision", "create_revision") values (?, ?, ?, ?, ?, ?, ?) on conflict ("bucket_id", "key") do update set "type" = "excluded"."type", "value" = "excluded"."value", "expires_at" = "excluded"."expires_at", "revision" = "excluded"."revision", "create_revision" = case when "entries"."expires_at" <= ? then "excluded"."create_revision" else "entries"."create_revision" end',
      'insert into "kvb"."entries" ("bucket_id", "key", "type", "value", "expires_at", "revision", "create_revision") values ($1, $2, $3, $4, $5, $6, $7) on conflict ("bucket_id", "key") do update set "type" = "excluded"."type", "value" = "excluded"."value", "expires_at" = "excluded"."expires_at", "revision" = "excluded"."revision", "create_revision" = case when "kvb"."entries"."expires_at" <= $8 then "excluded"."create_revision" else "kvb"."entries"."create_revision" end',
      // A new key is created at the write's revision; a replaced row keeps its create revision while live at `now`.
      ['bucket', 'key', 'type', 'value', 'expiresAt', 'revision', 'revision', 'now'],
    ],
    [
      'removeEntry',
      'delete from "entries" where "bucket_id" = ? and "key" = ? returning "type", "value", "expires_at", "revision", "create_revision"',
      'delete from "kvb"."entries" where "bucket_id" = $1 and "key" = $2 returning "type", "value", "expires_at", "revision", "create_revision"',
      ['bucket', 'key'],
    ],
    [
      'expiredEntries',
      'select "bucket_id", "key" from "entries" where "expires_at" <= ? limit ?',
      'select "bucket_id", "key" from "kvb"."entries" where "expires_at" <= $1 limit $2',
      ['now', 'batch'],
    ],
    ['countEntries', 'select count(*) as "n" from "entries"', 'select count(*) as "n" from "kvb"."entries"', []],
  ];
  for (const [name, sqliteSql, pgSql, params] of shared) {
    it(name, () => {
      expect(sqlite[name as keyof typeof sqlite]).toEqual({ name, sql: sqliteSql, params });
      expect(pg[name as keyof typeof pg]).toEqual({ name, sql: pgSql, params });
    });
  }

  it('createBucket names all ten columns (token_salt included)', () => {
    expect(sqlite.createBucket.sql).toBe(
      'insert into "buckets" ("id", "email", "secret_key_hash", "read_key_hash", "write_key_hash", "signing_key", "signing_key_generation", "token_salt", "default_ttl", "created_at") values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
    );
    expect(pg.createBucket.sql).toBe(
      'insert into "kvb"."buckets" ("id", "email", "secret_key_hash", "read_key_hash", "write_key_hash", "signing_key", "signing_key_generation", "token_salt", "default_ttl", "created_at") values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)',
    );
  });

  it("SQLite only: setRevision writes a batch's final revision", () => {
    expect(sqlite.setRevision.sql).toBe('update "buckets" set "revision" = ? where "id" = ?');
  });

  it('every write bumps the bucket row first, which returns the usage a quota is checked against; usage changes by delta', () => {
    expect(pg.addUsage.sql).toBe(
      'update "kvb"."buckets" set "usage_keys" = usage_keys + $1, "usage_bytes" = usage_bytes + $2 where "id" = $3',
    );
    expect(pg.entrySize.sql).toBe(
      'select length(key) + length(value) as "size" from "kvb"."entries" where "bucket_id" = $1 and "key" = $2',
    );
  });

  it("PostgreSQL write batches: one guarded statement writes every bucket's bump, usage, entries and change log; nothing of a bucket whose row moved", () => {
    // The guard: each bucket row's version as the batch read it (or, for plain SETs, as the statement's snapshot saw it).
    expect(pg.applyBatch.sql).toMatch(
      /update "kvb"\."buckets" x set revision = u\.revision, usage_keys = x\.usage_keys \+ u\.usage_keys, usage_bytes = x\.usage_bytes \+ u\.usage_bytes\s+from u join lk on lk\.id = u\.id where x\.id = u\.id and x\.xmin = u\.version returning/,
    );
    expect(pg.setsFresh.sql).toMatch(/where x\.id = s\.id and x\.xmin = s\.xmin returning/);
    for (const name of ['applyBatch', 'setsFresh'] as const) {
      // The bucket rows are locked first, in id order: two statements over the same buckets never deadlock.
      expect(pg[name].sql).toContain('lk as (select id from "kvb"."buckets" where id = any($');
      expect(pg[name].sql).toMatch(/order by id for update\)/);
      // Every write the statement makes depends on its bucket's guarded update's row.
      expect(pg[name].sql).toMatch(/insert into "kvb"\."entries" .* from f join b on b\.id = f\.bucket_id /s);
      expect(pg[name].sql).toMatch(/insert into "kvb"\."changes" .* from w join b on b\.id = w\.bucket_id\)/s);
    }
    expect(pg.applyBatch.sql).toMatch(/delete from "kvb"\."entries" x using f join b on b\.id = f\.bucket_id /s);
    expect(pg.readBatch.sql).toContain('b.xmin::text as version');
    expect(pg.lockBucket.sql).toBe('select 1 from "kvb"."buckets" where id = $1 for update');
  });

  it('PostgreSQL point reads: one statement reads any (bucket, key) pairs, each row numbered by the pair it answers', () => {
    expect(pg.readEntries.sql).toBe(
      'select q.i, e.type, e.value, e.expires_at, e.revision, e.create_revision\n      from unnest($1::text[], $2::bytea[]) with ordinality as q(bucket_id, key, i)\n      join "kvb"."entries" e on e.bucket_id = q.bucket_id and e.key = q.key',
    );
    expect(pg.readEntries.params).toEqual(['buckets', 'keys']);
  });

  it('PostgreSQL only: leases', () => {
    expect(pg.takeLease.sql).toBe(
      'insert into "kvb"."kvb_leases" ("name", "holder", "expires_at") values ($1, $2, $3) on conflict ("name") do update set "holder" = "excluded"."holder", "expires_at" = "excluded"."expires_at" where ("kvb"."kvb_leases"."expires_at" <= $4 or "kvb"."kvb_leases"."holder" = $5) returning "holder"',
    );
  });

  it('no statement uses advisory locks, ctid or SKIP LOCKED', () => {
    for (const statement of Object.values(pg)) expect(statement.sql).not.toMatch(/advisory|ctid|skip locked/i);
  });

  it('every listing shape compiles on both dialects with the same parameter names', () => {
    for (const shape of LIST_SHAPES) {
      const a = compileStatement(listShapeName(shape), listStatement(queryBuilder('sqlite'), shape));
      const b = compileStatement(listShapeName(shape), listStatement(queryBuilder('postgres', 'kvb'), shape));
      expect(a.params).toEqual(b.params);
      expect(b.sql.replace(/"kvb"\./g, '').replace(/\$\d+/g, '?')).toBe(a.sql);
    }
    expect(
      compileStatement('x', listStatement(queryBuilder('postgres', 'kvb'), { reverse: true, columns: 'values', upper: true, after: true }))
        .sql,
    ).toBe(
      'select "key", "type", "value", "expires_at", "revision", "create_revision" from "kvb"."entries" where "bucket_id" = $1 and "key" > $2 and ("expires_at" is null or "expires_at" > $3) and "key" < $4 order by "key" desc limit $5 offset $6',
    );
    // Metadata without the value: the value's length in bytes (BLOB on SQLite, bytea on PostgreSQL).
    expect(
      compileStatement('x', listStatement(queryBuilder('sqlite'), { reverse: false, columns: 'meta', upper: false, after: false })).sql,
    ).toBe(
      'select "key", "type", length("value") as "size", "expires_at", "revision" from "entries" where "bucket_id" = ? and "key" >= ? and ("expires_at" is null or "expires_at" > ?) order by "key" asc limit ? offset ?',
    );
    expect(
      compileStatement('x', listStatement(queryBuilder('postgres', 'kvb'), { reverse: false, columns: 'meta', upper: true, after: true }))
        .sql,
    ).toBe(
      'select "key", "type", length("value") as "size", "expires_at", "revision" from "kvb"."entries" where "bucket_id" = $1 and "key" > $2 and ("expires_at" is null or "expires_at" > $3) and "key" < $4 order by "key" asc limit $5 offset $6',
    );
    expect(LIST_SHAPES.map(listShapeName)).toContain('list_desc_m_u_a');
    expect(new Set(LIST_SHAPES.map(listShapeName)).size).toBe(24);
    // One lower and one upper bound: a page after a cursor is a seek to the cursor.
    expect(
      compileStatement('x', listStatement(queryBuilder('sqlite'), { reverse: false, columns: 'keys', upper: true, after: true })).sql,
    ).toBe(
      'select "key" from "entries" where "bucket_id" = ? and "key" > ? and ("expires_at" is null or "expires_at" > ?) and "key" < ? order by "key" asc limit ? offset ?',
    );
  });

  it('export, import, dump and check statements are written once: the import copies with one revision, or (a restore) with each staged one', () => {
    const lite = compileAll(portabilityStatements(queryBuilder('sqlite'), 'kvb_import.staged'));
    const post = compileAll(portabilityStatements(queryBuilder('postgres', 'kvb'), 'pg_temp.kvb_import'));
    expect(lite.copyStaged.sql).toBe(
      'insert into "entries" ("bucket_id", "key", "type", "value", "expires_at", "revision", "create_revision") select cast(? as text) as "bucket_id", "s"."key" as "key", "s"."type" as "type", "s"."value" as "value", "s"."expires_at" as "expires_at", cast(? as bigint) as "revision", cast(? as bigint) as "create_revision" from "kvb_import"."staged" as "s" where true on conflict ("bucket_id", "key") do update set "type" = "excluded"."type", "value" = "excluded"."value", "expires_at" = "excluded"."expires_at", "revision" = "excluded"."revision", "create_revision" = case when "entries"."expires_at" <= ? then "excluded"."create_revision" else "entries"."create_revision" end',
    );
    // An import is a write: a key live before it keeps its create revision.
    expect(post.copyStaged.params).toEqual(['bucket', 'revision', 'revision', 'now']);
    // A restore keeps each staged revision and create revision (a version 2 dump has none: its revision).
    expect(post.copyStagedKeepRevisions.sql).toContain(
      '"s"."revision" as "revision", coalesce("s"."create_revision", "s"."revision") as "create_revision" from "pg_temp"."kvb_import" as "s"',
    );
    expect(post.copyStagedKeepRevisions.sql).toContain('"create_revision" = "excluded"."create_revision"');
    expect(post.copyStagedKeepRevisions.params).toEqual(['bucket']);
    expect(post.snapshotEntriesUpper.sql).toBe(
      'select "key", "type", "value", "expires_at", "revision", "create_revision" from "kvb"."entries" where "bucket_id" = $1 and "key" >= $2 and ("expires_at" is null or "expires_at" > $3) and "key" < $4 order by "key"',
    );
    expect(lite.clearRangeUpper.sql).toBe('delete from "entries" where "bucket_id" = ? and "key" >= ? and "key" < ?');
    expect(post.listBuckets.sql).toBe('select * from "kvb"."buckets" where "id" > $1 order by "id" limit $2');
    expect(post.orphanEntries.sql).toBe(
      'select count(*) as "n" from "kvb"."entries" where not exists (select "id" from "kvb"."buckets" where "kvb"."buckets"."id" = "kvb"."entries"."bucket_id")',
    );
    for (const name of Object.keys(lite) as Array<keyof typeof lite>) {
      expect(post[name].params).toEqual(lite[name].params);
      expect(post[name].sql).not.toMatch(/advisory|ctid|skip locked|search_path/i);
    }
  });

  it('bind orders named arguments for the dialect, repeats included, and refuses a missing one', () => {
    expect(bind(pg.takeLease, { name: 'n', holder: 'h', until: 2, now: 1 })).toEqual(['n', 'h', 2, 1, 'h']);
    expect(() => bind(pg.getEntry, { bucket: 'b' })).toThrow('no value for parameter key');
    expect(() =>
      compileStatement(
        'literal',
        queryBuilder('sqlite')
          .selectFrom('entries')
          .select('key')
          .where('key', '=', 'x' as never),
      ),
    ).toThrow('not a named parameter');
    expect(
      compileStatement('named', queryBuilder('sqlite').selectFrom('entries').select('key').where('key', '=', param('k'))).params,
    ).toEqual(['k']);
  });
});
