import { describe, expect, it } from 'vitest';
import { isPostgresUrl } from '../../src/store/open-store.js';
import { parsePostgresUrl } from '../../src/store/postgres/postgres-url.js';
import {
  isPostgresConnectionError,
  isStorageUnavailable,
  mayHaveReachedServer,
  StorageUnavailableError,
} from '../../src/store/storage-errors.js';

describe('--db URL', () => {
  it('postgres:// and postgresql:// select PostgreSQL; paths and sqlite: URLs do not', () => {
    expect(isPostgresUrl('postgres://u@h/db')).toBe(true);
    expect(isPostgresUrl('postgresql://u@h:5433/db')).toBe(true);
    for (const other of ['./kvb.db', '/var/lib/kvb/kvb.db', 'sqlite:/tmp/x.db', ':memory:', 'postgres.db'])
      expect(isPostgresUrl(other)).toBe(false);
  });

  it('takes kvb’s schema parameter out and sends no options (no search_path: statements name their schema); application_name defaults to kvb', () => {
    const { connectionString, schema } = parsePostgresUrl('postgres://u:p%40ss@h:5432/db?schema=tenant_1&sslmode=require');
    expect(schema).toBe('tenant_1');
    const url = new URL(connectionString);
    expect(url.searchParams.get('schema')).toBeNull();
    // PgBouncer refuses the `options` startup parameter, so kvb never adds one.
    expect(url.searchParams.get('options')).toBeNull();
    expect(url.searchParams.get('application_name')).toBe('kvb');
    expect(url.searchParams.get('sslmode')).toBe('require');
    expect(url.password).toBe('p%40ss');
  });

  it('passes the caller’s own options and application_name through unchanged; the schema defaults to public', () => {
    const { connectionString, schema } = parsePostgresUrl('postgresql://h/db?options=-c%20statement_timeout%3D5000&application_name=kvb-a');
    expect(schema).toBe('public');
    const url = new URL(connectionString);
    expect(url.searchParams.get('options')).toBe('-c statement_timeout=5000');
    expect(url.searchParams.get('application_name')).toBe('kvb-a');
  });

  it.each(['Upper', '1abc', 'a-b', 'a;drop', '"x"', 'a'.repeat(64)])('refuses the schema name %s', (name) => {
    expect(() => parsePostgresUrl(`postgres://h/db?schema=${encodeURIComponent(name)}`)).toThrow(/invalid schema name/);
  });
});

describe('storage errors', () => {
  it('connection failures of node-postgres count as storage unavailable; query errors do not', () => {
    for (const err of [
      Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
      Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }),
      Object.assign(new Error('server conn crashed?'), { code: '08P01', severity: 'FATAL' }),
      new Error('Connection terminated unexpectedly'),
      new Error('timeout exceeded when trying to connect'),
      new Error('Client has encountered a connection error and is not queryable'),
      new AggregateError([Object.assign(new Error(''), { code: 'ECONNREFUSED' })], ''),
    ]) {
      expect(isPostgresConnectionError(err), String(err)).toBe(true);
      expect(isStorageUnavailable(new StorageUnavailableError(err))).toBe(true);
    }
    expect(isPostgresConnectionError(Object.assign(new Error('duplicate key'), { code: '23505' }))).toBe(false);
    expect(isStorageUnavailable(new Error('boom'))).toBe(false);
  });

  it('a connection lost midway may have applied the statement; one that was never made cannot have', () => {
    for (const err of [
      new Error('Connection terminated unexpectedly'),
      Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }),
      Object.assign(new Error('server conn crashed?'), { code: '08P01' }),
    ]) {
      expect(mayHaveReachedServer(err), String(err)).toBe(true);
    }
    for (const err of [
      Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
      new Error('timeout exceeded when trying to connect'),
      Object.assign(new Error('no read-write PostgreSQL server among the hosts (…)'), { code: '08001' }),
      Object.assign(new Error('server login has been failing, try again later (server_login_retry)'), { code: '08P01' }),
      Object.assign(new Error('duplicate key'), { code: '23505' }),
    ]) {
      expect(mayHaveReachedServer(err), String(err)).toBe(false);
    }
  });
});
