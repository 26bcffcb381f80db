import { describe, expect, it } from 'vitest';
import {
  HostSelector,
  NoUsableHostError,
  type PostgresHost,
  needsSelection,
  parsePostgresHosts,
} from '../../src/store/postgres/postgres-hosts.js';
import { parsePostgresUrl } from '../../src/store/postgres/postgres-url.js';
import { isPostgresConnectionError } from '../../src/store/storage-errors.js';

describe('multi-host PostgreSQL URLs (libpq form)', () => {
  it('splits the host list, keeps each port, and hands node-postgres one host with everything else unchanged', () => {
    const parsed = parsePostgresHosts(
      'postgres://kvb:p%40ss@db1:5433,db2,[::1]:5435/kvb?target_session_attrs=read-write&sslmode=require&connect_timeout=3',
    );
    expect(parsed.hosts).toEqual([
      { host: 'db1', port: 5433 },
      { host: 'db2', port: undefined },
      { host: '::1', port: 5435 },
    ]);
    expect(parsed.targetSessionAttrs).toBe('read-write');
    expect(parsed.connectTimeoutMs).toBe(3000);
    expect(parsed.urlFor(parsed.hosts[0]!)).toBe('postgres://kvb:p%40ss@db1:5433/kvb?sslmode=require&connect_timeout=3');
    expect(parsed.urlFor(parsed.hosts[1]!)).toBe('postgres://kvb:p%40ss@db2/kvb?sslmode=require&connect_timeout=3');
    expect(parsed.urlFor(parsed.hosts[2]!)).toBe('postgres://kvb:p%40ss@[::1]:5435/kvb?sslmode=require&connect_timeout=3');
    expect(needsSelection(parsed)).toBe(true);
  });

  it('a one-host URL without target_session_attrs is left to node-postgres as before', () => {
    const parsed = parsePostgresHosts('postgresql://u@h:5432/db?schema=s');
    expect(parsed.hosts).toEqual([{ host: 'h', port: 5432 }]);
    expect(parsed.targetSessionAttrs).toBe('any');
    expect(needsSelection(parsed)).toBe(false);
    expect(parsed.urlFor(parsed.hosts[0]!)).toBe('postgresql://u@h:5432/db?schema=s');
    // One host with target_session_attrs=read-write is still checked (a standby behind a DNS name or VIP).
    expect(needsSelection(parsePostgresHosts('postgres://h/db?target_session_attrs=read-write'))).toBe(true);
  });

  it('takes target_session_attrs out wherever it stands in the query', () => {
    expect(parsePostgresHosts('postgres://a,b/db?target_session_attrs=primary').urlFor({ host: 'b', port: undefined })).toBe(
      'postgres://b/db',
    );
    expect(parsePostgresHosts('postgres://a,b/db?x=1&target_session_attrs=any&y=2').urlFor({ host: 'a', port: 1 })).toBe(
      'postgres://a:1/db?x=1&y=2',
    );
  });

  it.each([
    ['postgres://h1,,h2/db', /empty host/],
    ['postgres://h1:0,h2/db', /invalid port/],
    ['postgres://h1:70000/db', /invalid port/],
    ['postgres://h1:5x/db', /cannot read host/],
    ['postgres://h1,h2/db?target_session_attrs=standby', /kvb writes/],
    ['postgres://h1,h2/db?target_session_attrs=read-only', /kvb writes/],
    ['postgres://h1,h2/db?connect_timeout=soon', /whole seconds/],
  ])('refuses %s with a clear reason', (url, reason) => {
    expect(() => parsePostgresHosts(url)).toThrow(reason);
  });

  it('never puts the password in an error', () => {
    expect(() => parsePostgresHosts('postgres://u:secret@h1:99999,h2/db')).toThrow(/^(?!.*secret)/);
  });

  it('kvb’s schema and application_name still work with several hosts; connect_timeout follows libpq (0 is none, at least 2 s)', () => {
    const { connectionString, schema, hosts } = parsePostgresUrl(
      'postgres://u@h1:1,h2:2/db?schema=tenant&target_session_attrs=read-write&connect_timeout=1',
    );
    expect(schema).toBe('tenant');
    const first = new URL(connectionString);
    expect(first.host).toBe('h1:1');
    expect(first.searchParams.get('schema')).toBeNull();
    expect(first.searchParams.get('target_session_attrs')).toBeNull();
    expect(first.searchParams.get('application_name')).toBe('kvb');
    expect(new URL(hosts.urlFor(hosts.hosts[1]!)).host).toBe('h2:2');
    expect(hosts.connectTimeoutMs).toBe(2000);
    expect(parsePostgresHosts('postgres://h/db?connect_timeout=0').connectTimeoutMs).toBeUndefined();
  });
});

describe('choosing the host', () => {
  const a: PostgresHost = { host: 'a', port: 1 };
  const b: PostgresHost = { host: 'b', port: 2 };

  it('tries the hosts in order, keeps the first that fits, and searches again only after forget()', async () => {
    const fits = new Map([
      ['a', 'is read-only'],
      ['b', undefined],
    ]);
    const checked: string[] = [];
    const selector = new HostSelector([a, b], 'read-write', async (h) => {
      checked.push(h.host);
      return fits.get(h.host);
    });
    expect(await selector.pick()).toBe(b);
    expect(await selector.pick()).toBe(b);
    expect(checked).toEqual(['a', 'b']);
    // A failover: a is the primary now. Forgetting another host changes nothing.
    fits.set('a', undefined).set('b', 'is a standby (in recovery)');
    selector.forget(a);
    expect(await selector.pick()).toBe(b);
    selector.forget(b);
    expect(await selector.pick()).toBe(a);
    expect(checked).toEqual(['a', 'b', 'a']);
  });

  it('connects waiting together share one search', async () => {
    let checks = 0;
    const selector = new HostSelector([a, b], 'read-write', async () => {
      checks++;
      // A check that takes a turn of the event loop, so every pick below arrives while it runs.
      await new Promise((resolve) => setImmediate(resolve));
      return undefined;
    });
    const picked = await Promise.all(Array.from({ length: 20 }, () => selector.pick()));
    expect(picked.every((h) => h === a)).toBe(true);
    expect(checks).toBe(1);
  });

  it('with no host fitting, fails with every reason as a connection error (answered 503), and finds one later', async () => {
    let up = false;
    const selector = new HostSelector([a, b], 'read-write', async (h) => {
      if (h === a) throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
      return up ? undefined : 'is read-only';
    });
    const err = await selector.pick().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NoUsableHostError);
    expect(String(err)).toMatch(/no read-write PostgreSQL server among the hosts \(a:1: connect ECONNREFUSED .*; b:2: is read-only\)/);
    expect(isPostgresConnectionError(err)).toBe(true);
    up = true;
    expect(await selector.pick()).toBe(b);
  });
});
