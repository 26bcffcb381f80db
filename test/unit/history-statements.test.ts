import { describe, expect, it } from 'vitest';
import { type HistoryStatementName, LIST_AT_SHAPES, compileHistory, listAtShapeName } from '../../src/store/history-statements.js';
import { compileAll, queryBuilder, sharedStatements } from '../../src/store/statements.js';

/** History's statements, spelled out per dialect like statements.test.ts: written once, compiled twice. */
describe('history statements compile once per dialect, with named parameters', () => {
  const sqlite = compileHistory(queryBuilder('sqlite'), 'kvb_import.staged');
  const pg = compileHistory(queryBuilder('postgres', 'kvb'), 'pg_temp.kvb_import');
  const cases: Array<[HistoryStatementName, string, string, string[]]> = [
    [
      'readAt',
      'select "kind", "type", "value", "expires_at", "revision" from "changes" where "bucket_id" = ? and "key" = ? and "revision" <= ? order by "revision" desc limit 1',
      'select "kind", "type", "value", "expires_at", "revision" from "kvb"."changes" where "bucket_id" = $1 and "key" = $2 and "revision" <= $3 order by "revision" desc limit 1',
      ['bucket', 'key', 'revision'],
    ],
    [
      'keyHistory',
      'select "c"."revision", "c"."kind", "c"."type", "c"."value", "c"."expires_at", "c"."committed_at", "c"."actor_kind", "c"."actor_token", "c"."actor_address", "o"."operation" from "changes" as "c" left join "revision_ops" as "o" on "o"."bucket_id" = "c"."bucket_id" and "o"."revision" = "c"."revision" where "c"."bucket_id" = ? and "c"."key" = ? and "c"."revision" < ? order by "c"."revision" desc limit ?',
      'select "c"."revision", "c"."kind", "c"."type", "c"."value", "c"."expires_at", "c"."committed_at", "c"."actor_kind", "c"."actor_token", "c"."actor_address", "o"."operation" from "kvb"."changes" as "c" left join "kvb"."revision_ops" as "o" on "o"."bucket_id" = "c"."bucket_id" and "o"."revision" = "c"."revision" where "c"."bucket_id" = $1 and "c"."key" = $2 and "c"."revision" < $3 order by "c"."revision" desc limit $4',
      ['bucket', 'key', 'before', 'limit'],
    ],
    [
      'keyHistoryByToken',
      'select "c"."revision", "c"."kind", "c"."type", "c"."value", "c"."expires_at", "c"."committed_at", "c"."actor_kind", "c"."actor_token", "c"."actor_address", "o"."operation" from "changes" as "c" left join "revision_ops" as "o" on "o"."bucket_id" = "c"."bucket_id" and "o"."revision" = "c"."revision" where "c"."bucket_id" = ? and "c"."key" = ? and "c"."revision" < ? and "c"."actor_kind" = ? and "c"."actor_token" = ? order by "c"."revision" desc limit ?',
      'select "c"."revision", "c"."kind", "c"."type", "c"."value", "c"."expires_at", "c"."committed_at", "c"."actor_kind", "c"."actor_token", "c"."actor_address", "o"."operation" from "kvb"."changes" as "c" left join "kvb"."revision_ops" as "o" on "o"."bucket_id" = "c"."bucket_id" and "o"."revision" = "c"."revision" where "c"."bucket_id" = $1 and "c"."key" = $2 and "c"."revision" < $3 and "c"."actor_kind" = $4 and "c"."actor_token" = $5 order by "c"."revision" desc limit $6',
      ['bucket', 'key', 'before', 'actorKind', 'actorToken', 'limit'],
    ],
    [
      // The bucket-wide log walks the primary key (bucket_id, revision, key) from the previous page's position.
      'bucketLogByToken',
      'select "c"."key", "c"."revision", "c"."kind", "c"."type", "c"."value", "c"."expires_at", "c"."committed_at", "c"."actor_kind", "c"."actor_token", "c"."actor_address", "o"."operation" from "changes" as "c" left join "revision_ops" as "o" on "o"."bucket_id" = "c"."bucket_id" and "o"."revision" = "c"."revision" where "c"."bucket_id" = ? and ("c"."revision", "c"."key") > (?, ?) and "c"."revision" <= ? and "c"."committed_at" >= ? and "c"."committed_at" <= ? and "c"."key" >= ? and "c"."key" < ? and "c"."actor_kind" = ? and "c"."actor_token" = ? order by "c"."revision" asc, "c"."key" asc limit ?',
      'select "c"."key", "c"."revision", "c"."kind", "c"."type", "c"."value", "c"."expires_at", "c"."committed_at", "c"."actor_kind", "c"."actor_token", "c"."actor_address", "o"."operation" from "kvb"."changes" as "c" left join "kvb"."revision_ops" as "o" on "o"."bucket_id" = "c"."bucket_id" and "o"."revision" = "c"."revision" where "c"."bucket_id" = $1 and ("c"."revision", "c"."key") > ($2, $3) and "c"."revision" <= $4 and "c"."committed_at" >= $5 and "c"."committed_at" <= $6 and "c"."key" >= $7 and "c"."key" < $8 and "c"."actor_kind" = $9 and "c"."actor_token" = $10 order by "c"."revision" asc, "c"."key" asc limit $11',
      [
        'bucket',
        'afterRevision',
        'afterKey',
        'untilRevision',
        'sinceTime',
        'untilTime',
        'lower',
        'upper',
        'actorKind',
        'actorToken',
        'limit',
      ],
    ],
    [
      'compactChanges',
      'delete from "changes" where "bucket_id" = ? and "revision" <= ? and "key" in (select "k"."key" from "changes" as "k" where "k"."bucket_id" = ? and "k"."revision" > ? and "k"."revision" <= ?) and ("kind" <> \'set\' or exists (select 1 as "one" from "changes" as "n" where "n"."bucket_id" = ? and "n"."key" = "changes"."key" and "n"."revision" > "changes"."revision" and "n"."revision" <= ?))',
      'delete from "kvb"."changes" where "bucket_id" = $1 and "revision" <= $2 and "key" in (select "k"."key" from "kvb"."changes" as "k" where "k"."bucket_id" = $3 and "k"."revision" > $4 and "k"."revision" <= $5) and ("kind" <> \'set\' or exists (select 1 as "one" from "kvb"."changes" as "n" where "n"."bucket_id" = $6 and "n"."key" = "kvb"."changes"."key" and "n"."revision" > "kvb"."changes"."revision" and "n"."revision" <= $7))',
      ['bucket', 'revision', 'bucket', 'floor', 'revision', 'bucket', 'revision'],
    ],
    [
      'list_at_asc_u',
      'select "c"."key", "c"."type", "c"."value", "c"."expires_at", "c"."revision" from "changes" as "c" where "c"."bucket_id" = ? and "c"."key" >= ? and "c"."revision" <= ? and "c"."kind" = \'set\' and ("c"."expires_at" is null or "c"."expires_at" > ?) and "c"."revision" = (select max("n"."revision") as "r" from "changes" as "n" where "n"."bucket_id" = ? and "n"."key" = "c"."key" and "n"."revision" <= ?) and "c"."key" < ? order by "c"."key" asc limit ? offset ?',
      'select "c"."key", "c"."type", "c"."value", "c"."expires_at", "c"."revision" from "kvb"."changes" as "c" where "c"."bucket_id" = $1 and "c"."key" >= $2 and "c"."revision" <= $3 and "c"."kind" = \'set\' and ("c"."expires_at" is null or "c"."expires_at" > $4) and "c"."revision" = (select max("n"."revision") as "r" from "kvb"."changes" as "n" where "n"."bucket_id" = $5 and "n"."key" = "c"."key" and "n"."revision" <= $6) and "c"."key" < $7 order by "c"."key" asc limit $8 offset $9',
      ['bucket', 'lower', 'revision', 'at', 'bucket', 'revision', 'upper', 'limit', 'offset'],
    ],
  ];
  for (const [name, sqliteSql, pgSql, params] of cases) {
    it(name, () => {
      expect(sqlite[name]).toEqual({ name, sql: sqliteSql, params });
      expect(pg[name]).toEqual({ name, sql: pgSql, params });
    });
  }

  it('every statement compiles on both dialects with the same parameter names', () => {
    expect(Object.keys(pg).sort()).toEqual(Object.keys(sqlite).sort());
    for (const name of Object.keys(sqlite) as HistoryStatementName[]) expect(pg[name].params, name).toEqual(sqlite[name].params);
    for (const shape of LIST_AT_SHAPES) expect(sqlite[listAtShapeName(shape)]).toBeDefined();
  });

  it("an import logs its staged keys at its revision (a restore: at each key's own) and the keys it removes as deletes", () => {
    expect(sqlite.logStaged!.sql).toContain('from "kvb_import"."staged" as "s"');
    expect(sqlite.logStagedKeepRevisions!.sql).toContain('"s"."revision" as "revision"');
    expect(pg.logCleared!.sql).toContain('\'delete\' as "kind"');
    expect(pg.logClearedUpper!.params).toEqual([
      'bucket',
      'revision',
      'actorKind',
      'actorToken',
      'actorAddress',
      'now',
      'bucket',
      'prefix',
      'upper',
    ]);
    expect(sqlite.logStaged!.params).toEqual(['bucket', 'revision', 'actorKind', 'actorToken', 'actorAddress', 'now']);
  });

  it('pruning looks only at changes above the floor committed since its last pass', () => {
    const prunable = compileAll(sharedStatements(queryBuilder('postgres', 'kvb'))).prunable;
    expect(prunable.sql).toBe(
      'select "c"."bucket_id", max("c"."revision") as "revision" from "kvb"."changes" as "c" inner join "kvb"."buckets" as "b" on "b"."id" = "c"."bucket_id" where "c"."committed_at" < $1 and "c"."committed_at" >= $2 and "c"."revision" > "b"."changes_floor" group by "c"."bucket_id" limit $3',
    );
    expect(prunable.params).toEqual(['before', 'since', 'batch']);
  });
});
