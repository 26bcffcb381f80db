import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { StandbyReadError } from '../../src/store/postgres/postgres-primary-reads.js';
import { StorageUnavailableError } from '../../src/store/storage-errors.js';
import type { Store } from '../../src/store/store.js';
import { POSTGRES_URL } from '../helpers/backend.js';
import { bucketRecord, postgresTestSchema, text } from '../helpers/store-backends.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';
import { setEntry, commit } from '../helpers/store-writes.js';

/**
 * A node a failover demoted still answers through the pooler pinned to it, as a standby. Here two
 * TCP proxies stand for two such poolers in front of one real PostgreSQL, and a proxy's node is
 * "demoted" by answering, on every connection through it, what a standby answers: in recovery,
 * read-only. (Its data cannot be older here, so the tests check who answered each read.)
 */
const demoted = new Set<number>();
/** Per read of the `entries` table: the proxy port of the connection that ran it. */
const answeredBy: number[] = [];

type Query = (this: pg.Client, config: unknown, ...rest: unknown[]) => unknown;
const realQuery = pg.Client.prototype.query as unknown as Query;

function asStandby(text: string): string {
  return text
    .replace(/pg_catalog\.pg_is_in_recovery\(\)/g, 'true')
    .replace(/^show transaction_read_only$/, "select 'on'::text as transaction_read_only");
}

function standIn(this: pg.Client, config: unknown, ...rest: unknown[]): unknown {
  const text = typeof config === 'string' ? config : (config as { text?: string } | null)?.text;
  if (typeof text === 'string' && /^\s*select\b[\s\S]*"entries"/i.test(text)) answeredBy.push(this.port);
  if (typeof text !== 'string' || !demoted.has(this.port)) return realQuery.call(this, config, ...rest);
  const changed = asStandby(text);
  if (changed === text) return realQuery.call(this, config, ...rest);
  if (typeof config === 'string') return realQuery.call(this, changed, ...rest);
  // Another text under the same prepared-statement name would be refused by node-postgres.
  const named = config as { name?: string };
  return realQuery.call(this, { ...named, text: changed, ...(named.name && { name: `${named.name}_standby` }) }, ...rest);
}

const record = (id: string) => bucketRecord(id, 's@test');
const NOW = 1_800_000_000_000;
const everyKey = { prefix: '', reverse: false, columns: 'keys' as const, offset: 0, limit: 10 };

describe.skipIf(!POSTGRES_URL)(
  `reads answered by a standby are never served${POSTGRES_URL ? '' : ' (SKIPPED: KVB_TEST_POSTGRES_URL is not set)'}`,
  () => {
    const target = new URL(POSTGRES_URL ?? 'postgres://localhost');
    const proxies = [
      new TcpProxy(target.hostname, Number(target.port || 5432)),
      new TcpProxy(target.hostname, Number(target.port || 5432)),
    ] as const;
    const own = postgresTestSchema('kvb_standby', POSTGRES_URL);
    const { schema } = own;
    const stores: Store[] = [];
    const urlThrough = (ports: number[], query: string) =>
      `postgres://${target.username}${target.password ? `:${target.password}` : ''}@${ports.map((p) => `127.0.0.1:${p}`).join(',')}${target.pathname}?schema=${schema}${query}`;
    const open = async (ports: number[], query = '') => {
      const store = await own.open({ url: urlThrough(ports, query), pgPrepare: 'on' });
      stores.push(store);
      await store.buckets.create(record('b')).catch(() => {});
      return store;
    };

    beforeAll(async () => {
      await Promise.all(proxies.map((p) => p.open()));
      pg.Client.prototype.query = standIn as unknown as typeof pg.Client.prototype.query;
    });
    afterEach(() => {
      demoted.clear();
    });
    afterAll(async () => {
      pg.Client.prototype.query = realQuery as unknown as typeof pg.Client.prototype.query;
      await own.drop(...stores);
      await Promise.all(proxies.map((p) => p.close()));
    });

    it('after the first host turns standby, every read (hits, misses, lists, a transaction check) is answered by the writable host, and its old connections are not used again', async () => {
      const [first, second] = [proxies[0].port, proxies[1].port];
      const store = await open([first, second], '&target_session_attrs=read-write');
      await setEntry(store, 'b', 'k', text('v1'), null, NOW);
      // Every pooled connection open, all to the first host (listings: concurrent GETs would share one statement).
      await Promise.all(Array.from({ length: 8 }, () => store.listEntries('b', everyKey, NOW)));
      expect(store.poolStats?.().total).toBe(4);
      expect(new Set(answeredBy)).toEqual(new Set([first]));

      demoted.add(first);
      answeredBy.length = 0;
      // A miss first: a standby's "absent" is as stale as any other answer.
      expect(await store.getEntry('b', 'absent', NOW)).toBeUndefined();
      expect(answeredBy.at(-1)).toBe(second);
      expect((await store.getEntry('b', 'k', NOW))?.data.toString()).toBe('v1');
      const listed = await store.listEntries('b', everyKey, NOW);
      expect(listed.map((e) => e.key)).toEqual(['k']);
      const outcome = await commit(
        store,
        'b',
        [
          { op: 'check', key: 'k', rev: 1 },
          { op: 'set', key: 'k2', value: text('v2'), expiresAt: null },
        ],
        NOW,
      );
      expect(outcome).toMatchObject({ revision: 2 });
      // The first host answered at most once (the read that found it a standby, discarded); after that only the second.
      expect(answeredBy.filter((p) => p === first).length).toBeLessThanOrEqual(1);
      expect(answeredBy.slice(1).every((p) => p === second)).toBe(true);
    });

    it('with no writable host, a read a standby answered fails as unavailable (503), after one more try on a new connection; it is served again once the host is a primary', async () => {
      const only = proxies[0].port;
      const store = await open([only]);
      await setEntry(store, 'b', 'one', text('x'), null, NOW);
      await Promise.all(Array.from({ length: 8 }, () => store.listEntries('b', everyKey, NOW)));

      demoted.add(only);
      answeredBy.length = 0;
      const err = await store.getEntry('b', 'one', NOW).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(StorageUnavailableError);
      expect((err as StorageUnavailableError).cause).toBeInstanceOf(StandbyReadError);
      expect(answeredBy).toEqual([only, only]);

      demoted.delete(only);
      expect((await store.getEntry('b', 'one', NOW))?.data.toString()).toBe('x');
    });
  },
);
