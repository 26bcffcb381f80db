import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { StandbyReadError, checkingPrimary, isPlainRead, primaryResult } from '../../src/store/postgres/postgres-primary-reads.js';
import { LIST_SHAPES, listShapeName } from '../../src/store/statements.js';
import { compilePostgresStatements } from '../../src/store/postgres/postgres-statements.js';
import { StorageUnavailableError } from '../../src/store/storage-errors.js';

/** Every statement the PostgreSQL store compiles. */
const all = compilePostgresStatements('kvb');

const result = (rows: pg.QueryResultRow[], names: string[]): pg.QueryResult =>
  ({ command: 'SELECT', rowCount: rows.length, oid: 0, rows, fields: names.map((name) => ({ name })) }) as unknown as pg.QueryResult;

describe('reads only from a primary', () => {
  it('every statement that is not checked writes (a standby refuses it, 25006) or locks what it reads', () => {
    const unchecked = Object.values(all).filter((s) => !isPlainRead(s.sql));
    expect(unchecked.length).toBeGreaterThan(0);
    for (const s of unchecked) {
      const writes =
        /^\s*(insert|update|delete)\b/i.test(s.sql) ||
        (/^\s*with\b/i.test(s.sql) && /\b(insert\s+into|update\s+\S+\s+set|delete\s+from)\b/i.test(s.sql));
      const locks = /\bfor\s+update\b/i.test(s.sql);
      expect(writes || locks, `${s.name}: ${s.sql}`).toBe(true);
    }
    // The reads the HTTP API serves are all checked.
    for (const name of [
      'getEntry',
      'readEntries',
      'getBucket',
      'bucketRevision',
      'readBatch',
      'changesAfter',
      'readAt',
      'keyHistory',
      'bucketLog',
      listShapeName(LIST_SHAPES[0]!),
    ] as const) {
      expect(isPlainRead(all[name].sql), name).toBe(true);
    }
  });

  it('asks pg_is_in_recovery() in the same statement, keeping the read and its parameters as they are', () => {
    const checked = checkingPrimary(all.getEntry);
    expect(checked.params).toEqual(all.getEntry.params);
    expect(checked.sql).toBe(
      'select r.*, s.kvb_standby from (select pg_catalog.pg_is_in_recovery() as kvb_standby) as s left join (select true as kvb_row, q.* from (' +
        'select "type", "value", "expires_at", "revision", "create_revision" from "kvb"."entries" where "bucket_id" = $1 and "key" = $2' +
        ') as q) as r on true',
    );
  });

  it("a primary's answer gives the read's own rows in order; an empty read stays empty", () => {
    const rows = primaryResult<{ key: string }>(
      result(
        [
          { kvb_row: true, key: 'a', kvb_standby: false },
          { kvb_row: true, key: 'b', kvb_standby: false },
        ],
        ['kvb_row', 'key', 'kvb_standby'],
      ),
    );
    expect(rows.rows).toEqual([{ key: 'a' }, { key: 'b' }]);
    expect(rows.rowCount).toBe(2);
    expect(rows.fields.map((f) => f.name)).toEqual(['key']);
    const none = primaryResult(result([{ kvb_row: null, key: null, kvb_standby: false }], ['kvb_row', 'key', 'kvb_standby']));
    expect(none.rows).toEqual([]);
    expect(none.rowCount).toBe(0);
  });

  it("a standby's answer is refused as unavailable storage, whether it found rows or none", () => {
    for (const rows of [[{ kvb_row: true, key: 'a', kvb_standby: true }], [{ kvb_row: null, key: null, kvb_standby: true }]]) {
      let caught: unknown;
      try {
        primaryResult(result(rows, ['kvb_row', 'key', 'kvb_standby']));
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(StorageUnavailableError);
      expect((caught as StorageUnavailableError).cause).toBeInstanceOf(StandbyReadError);
      expect(((caught as StorageUnavailableError).cause as StandbyReadError).code).toBe('25006');
    }
  });
});
