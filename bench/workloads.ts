/**
 * What the bench asks of each server: the cases, the request plans that implement them for kvb,
 * the baseline and the peers, and the data each server holds before it is measured.
 */
import BetterSqlite3 from 'better-sqlite3';
import type { KeySpace, PlannedRequest } from './load-generator.js';
import { httpRequest } from './processes.js';

export const KEYS = 1000;
/** 100-byte values: text, and a JSON object of the same length. */
export const TEXT_VALUE = 'v'.repeat(100);
export const JSON_VALUE = `{"v":"${'j'.repeat(92)}"}`;

export type CaseName =
  | 'get_hit'
  | 'get_miss'
  | 'set_text'
  | 'set_json'
  | 'counter'
  | 'list_100'
  | 'txn_10'
  | 'auth_get'
  | 'set_spread'
  | 'txn_spread';

/** The `*_spread` cases write to this many buckets in turn (the others write to one hot bucket). */
export const SPREAD_BUCKETS = 100;

export interface CaseInfo {
  title: string;
  /** The bare Fastify route this case is compared with. */
  baseline: 'get' | 'post';
  meaning: string;
}

export const CASES: Record<CaseName, CaseInfo> = {
  get_hit: { title: 'GET hit', baseline: 'get', meaning: 'read one of 1,000 keys holding 100-byte text (anonymous, public bucket)' },
  get_miss: { title: 'GET miss', baseline: 'get', meaning: 'read a key that does not exist (404)' },
  set_text: { title: 'SET text', baseline: 'post', meaning: 'POST 100 bytes of text/plain to one of 1,000 keys' },
  set_json: { title: 'SET JSON', baseline: 'post', meaning: 'POST a 100-byte application/json object (validated) to one of 1,000 keys' },
  counter: { title: 'counter PATCH', baseline: 'post', meaning: 'PATCH +1 on one of 1,000 counters' },
  list_100: { title: 'list 100 + values', baseline: 'get', meaning: 'GET ?values=true&limit=100&format=json' },
  txn_10: { title: 'txn of 10', baseline: 'post', meaning: 'POST a transaction of 10 sets (100-byte values)' },
  auth_get: {
    title: 'GET with token',
    baseline: 'get',
    meaning: 'GET hit with a temporary token (JWT) as Bearer, in a bucket with a read key',
  },
  set_spread: {
    title: 'SET over 100 buckets',
    baseline: 'post',
    meaning: 'set_text, but each request to the next of 100 buckets (no single hot bucket)',
  },
  txn_spread: { title: 'txn of 10 over 100 buckets', baseline: 'post', meaning: 'txn_10, but each transaction to the next of 100 buckets' },
};

export interface Workload {
  plan: PlannedRequest[];
  keySpace?: KeySpace;
}

const range = (n: number) => Array.from({ length: n }, (_, i) => i);
const text = { 'content-type': 'text/plain' };
const json = { 'content-type': 'application/json' };

/** The baseline's two routes. */
export const baselineWorkloads: Record<'get' | 'post', Workload> = {
  get: { plan: range(KEYS).map((i) => ({ method: 'GET', path: `/k${i}` })) },
  post: { plan: range(KEYS).map((i) => ({ method: 'POST', path: `/k${i}`, headers: text, body: TEXT_VALUE })) },
};

export interface KvbFixture {
  bucket: string;
  authBucket: string;
  token: string;
  /** SPREAD_BUCKETS buckets for the `*_spread` cases. */
  spread: string[];
}

export function kvbWorkloads(f: KvbFixture): Record<CaseName, Workload> {
  const key = (i: number) => `/api/v1/${f.bucket}/k${i}`;
  return {
    get_hit: { plan: range(KEYS).map((i) => ({ method: 'GET', path: key(i) })) },
    get_miss: { plan: range(KEYS).map((i) => ({ method: 'GET', path: `/api/v1/${f.bucket}/missing${i}` })) },
    set_text: { plan: range(KEYS).map((i) => ({ method: 'POST', path: key(i), headers: text, body: TEXT_VALUE })) },
    set_json: { plan: range(KEYS).map((i) => ({ method: 'POST', path: key(i), headers: json, body: JSON_VALUE })) },
    counter: { plan: range(KEYS).map((i) => ({ method: 'PATCH', path: `/api/v1/${f.bucket}/c${i}`, headers: text, body: '+1' })) },
    list_100: { plan: [{ method: 'GET', path: `/api/v1/${f.bucket}/?values=true&limit=100&format=json` }] },
    txn_10: {
      plan: range(KEYS / 10).map((t) => ({
        method: 'POST',
        path: `/api/v1/${f.bucket}`,
        headers: json,
        body: JSON.stringify({ txn: range(10).map((j) => ({ set: `t${t * 10 + j}`, value: TEXT_VALUE })) }),
      })),
    },
    auth_get: {
      plan: range(KEYS).map((i) => ({
        method: 'GET',
        path: `/api/v1/${f.authBucket}/k${i}`,
        headers: { authorization: `Bearer ${f.token}` },
      })),
    },
    set_spread: {
      plan: range(KEYS).map((i) => ({
        method: 'POST',
        path: `/api/v1/${f.spread[i % f.spread.length]}/k${i}`,
        headers: text,
        body: TEXT_VALUE,
      })),
    },
    txn_spread: {
      plan: range(KEYS / 10).map((t) => ({
        method: 'POST',
        path: `/api/v1/${f.spread[t % f.spread.length]}`,
        headers: json,
        body: JSON.stringify({ txn: range(10).map((j) => ({ set: `t${t * 10 + j}`, value: TEXT_VALUE })) }),
      })),
    },
  };
}

/** The size series: keys drawn uniformly from the whole bucket, so most reads at 1M miss the entry cache. */
export function sizeWorkloads(bucket: string, size: number): Partial<Record<CaseName, Workload>> {
  const keySpace = { size, random: true };
  return {
    get_hit: { plan: [{ method: 'GET', path: `/api/v1/${bucket}/k{n}` }], keySpace },
    set_text: { plan: [{ method: 'POST', path: `/api/v1/${bucket}/k{n}`, headers: text, body: TEXT_VALUE }], keySpace },
    // k1000..k9999 each start 111 keys (k1234, k12340-k12349, k123400-k123499) in a 1M bucket.
    list_100: {
      plan: [{ method: 'GET', path: `/api/v1/${bucket}/?values=true&limit=100&format=json&prefix=k{n}` }],
      keySpace: { size: 9000, random: true },
    },
  };
}

/** Redis through webdis: GET/SET/INCR as URLs; the value is the PUT body. */
export const webdisWorkloads: Partial<Record<CaseName, Workload>> = {
  get_hit: { plan: range(KEYS).map((i) => ({ method: 'GET', path: `/GET/k${i}` })) },
  get_miss: { plan: range(KEYS).map((i) => ({ method: 'GET', path: `/GET/missing${i}` })) },
  set_text: { plan: range(KEYS).map((i) => ({ method: 'PUT', path: `/SET/k${i}`, headers: text, body: TEXT_VALUE })) },
  set_json: { plan: range(KEYS).map((i) => ({ method: 'PUT', path: `/SET/k${i}`, headers: json, body: JSON_VALUE })) },
  counter: { plan: range(KEYS).map((i) => ({ method: 'GET', path: `/INCR/c${i}` })) },
};

const b64 = (s: string) => Buffer.from(s).toString('base64');

/** etcd's v3 JSON gateway: range and put, keys and values base64. */
export const etcdWorkloads: Partial<Record<CaseName, Workload>> = {
  get_hit: {
    plan: range(KEYS).map((i) => ({ method: 'POST', path: '/v3/kv/range', headers: json, body: JSON.stringify({ key: b64(`k${i}`) }) })),
  },
  get_miss: {
    plan: range(KEYS).map((i) => ({
      method: 'POST',
      path: '/v3/kv/range',
      headers: json,
      body: JSON.stringify({ key: b64(`missing${i}`) }),
    })),
  },
  set_text: {
    plan: range(KEYS).map((i) => ({
      method: 'POST',
      path: '/v3/kv/put',
      headers: json,
      body: JSON.stringify({ key: b64(`k${i}`), value: b64(TEXT_VALUE) }),
    })),
  },
};

async function ok(url: string, init: Parameters<typeof httpRequest>[1], expect: number[] = [200, 201, 204]): Promise<string> {
  const res = await httpRequest(url, init);
  if (!expect.includes(res.status)) throw new Error(`${init?.method ?? 'GET'} ${url}: ${res.status} ${res.body}`);
  return res.body;
}

const form = { 'content-type': 'application/x-www-form-urlencoded' };

export async function createBucket(url: string, fields = ''): Promise<string> {
  return (await ok(`${url}/api/v1/`, { method: 'POST', headers: form, body: `email=bench%40example.com${fields}` })).trim();
}

/** Sets keys k{from}..k{to-1} through transactions of 1,000 operations, `parallel` at a time. */
export async function loadKeysOverHttp(url: string, bucket: string, from: number, to: number, auth?: string, parallel = 4): Promise<void> {
  const batches: number[] = [];
  for (let start = from; start < to; start += 1000) batches.push(start);
  const headers = { ...json, ...(auth && { authorization: `Bearer ${auth}` }) };
  const worker = async () => {
    for (let start = batches.shift(); start !== undefined; start = batches.shift()) {
      const txn = range(Math.min(1000, to - start)).map((j) => ({ set: `k${start + j}`, value: TEXT_VALUE }));
      await ok(`${url}/api/v1/${bucket}`, { method: 'POST', headers, body: JSON.stringify({ txn }) });
    }
  };
  await Promise.all(range(parallel).map(worker));
}

/** The main kvb fixture: a public bucket with 1,000 keys, and a keyed bucket with a read token. */
export async function prepareKvb(url: string): Promise<KvbFixture> {
  const bucket = await createBucket(url);
  await loadKeysOverHttp(url, bucket, 0, KEYS);
  const authBucket = await createBucket(url, '&secret_key=bench-secret&read_key=bench-read&signing_key=bench-signing');
  await loadKeysOverHttp(url, authBucket, 0, KEYS, 'bench-secret');
  const minted = await ok(`${url}/api/v1/${authBucket}/tokens/`, {
    method: 'POST',
    headers: { ...form, authorization: 'Bearer bench-secret' },
    body: 'prefix=k&permissions=read&ttl=86400',
  });
  const spread: string[] = [];
  for (let i = 0; i < SPREAD_BUCKETS; i++) spread.push(await createBucket(url));
  return { bucket, authBucket, token: (JSON.parse(minted) as { access_token: string }).access_token, spread };
}

/**
 * Writes keys straight into a stopped server's SQLite file: one transaction of plain inserts,
 * far faster than the API (1M keys in seconds). Rows match what a SET with the bucket's
 * default TTL (7 days) would store.
 */
export function loadKeysIntoSqlite(file: string, bucket: string, from: number, to: number): void {
  const db = new BetterSqlite3(file);
  db.pragma('journal_mode = WAL');
  const insert = db.prepare('insert into entries (bucket_id, key, type, value, expires_at) values (?, ?, ?, ?, ?)');
  const value = Buffer.from(TEXT_VALUE);
  const expiresAt = Date.now() + 7 * 86400 * 1000;
  db.transaction(() => {
    for (let i = from; i < to; i++) insert.run(bucket, Buffer.from(`k${i}`), 'text', value, expiresAt);
  })();
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
}

export async function prepareWebdis(url: string): Promise<void> {
  for (let i = 0; i < KEYS; i += 100) {
    const path = range(100)
      .map((j) => `k${i + j}/${TEXT_VALUE}`)
      .join('/');
    await ok(`${url}/MSET/${path}`, {});
  }
}

export async function prepareEtcd(url: string): Promise<void> {
  for (let i = 0; i < KEYS; i++) {
    await ok(`${url}/v3/kv/put`, { method: 'POST', headers: json, body: JSON.stringify({ key: b64(`k${i}`), value: b64(TEXT_VALUE) }) });
  }
}
