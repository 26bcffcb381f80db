import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createBucket, json } from '../helpers/http.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';

/**
 * Every cell of the access matrix of docs/http-api.md, for each bucket configuration: who may do what,
 * and whether a refusal is 401 (no usable credential) or 403 (a valid one without the right).
 */
type Who = 'anonymous' | 'read_key' | 'write_key' | 'secret_key' | 'token';
type Op =
  | 'read'
  | 'list'
  | 'list_values'
  | 'set'
  | 'counter'
  | 'delete'
  | 'txn'
  | 'rollback_dry_run'
  | 'rollback'
  | 'policy'
  | 'patch'
  | 'mint'
  | 'delete_bucket';
type Config = 'none' | 'secret' | 'read' | 'write' | 'all';

const CONFIGS: Record<Config, Record<string, string>> = {
  none: {},
  secret: { secret_key: 'S', signing_key: 'K' },
  read: { secret_key: 'S', read_key: 'R', signing_key: 'K' },
  write: { secret_key: 'S', write_key: 'W', signing_key: 'K' },
  all: { secret_key: 'S', read_key: 'R', write_key: 'W', signing_key: 'K' },
};

const hasKey = (config: Config, who: Who) =>
  who === 'anonymous' || (who === 'token' ? config !== 'none' : CONFIGS[config][who] !== undefined);

/** Expected outcome: 'ok', 401, 403 or 503, from the docs/http-api.md matrix. */
function expected(config: Config, who: Who, op: Op): 'ok' | 401 | 403 | 503 {
  const allowed = allowedOutcome(config, who, op);
  // Minting in a bucket without a signing key is 503 once access is granted (spec: Mint token).
  return allowed === 'ok' && op === 'mint' && !CONFIGS[config].signing_key ? 503 : allowed;
}

function allowedOutcome(config: Config, who: Who, op: Op): 'ok' | 401 | 403 {
  const c = CONFIGS[config];
  const readOpen = !c.read_key;
  const writeOpen = !c.write_key;
  const manageOpen = !c.secret_key;
  const reads = (o: Op) => o === 'read' || o === 'list' || o === 'list_values' || o === 'rollback_dry_run';
  const writes = (o: Op) => o === 'set' || o === 'counter' || o === 'delete' || o === 'txn';
  const anonymousAllows = (o: Op) => (reads(o) ? readOpen : writes(o) ? writeOpen : o === 'rollback' ? readOpen && writeOpen : manageOpen);
  if (!hasKey(config, who)) return 401; // presenting a credential the bucket does not have
  switch (who) {
    case 'anonymous':
      return anonymousAllows(op) ? 'ok' : 401;
    case 'secret_key':
      return 'ok';
    case 'read_key':
      // A rollback reveals what a listing with meta does and writes: the read key needs the write side open.
      return reads(op) || (op === 'rollback' && writeOpen) || anonymousAllows(op) ? 'ok' : 403;
    case 'write_key':
      return writes(op) || (op === 'rollback' && readOpen) || anonymousAllows(op) ? 'ok' : 403;
    case 'token':
      // The token below: prefix "k", permissions read, enumerate, write, delete; never management.
      return ['policy', 'patch', 'mint', 'delete_bucket'].includes(op) ? 403 : 'ok';
  }
}

let server: AppServer;
beforeAll(async () => {
  server = await startAppServer();
});
afterAll(async () => {
  await server.stop();
});

const CREDENTIAL: Record<Exclude<Who, 'anonymous' | 'token'>, string> = { read_key: 'R', write_key: 'W', secret_key: 'S' };

async function perform(bucket: string, op: Op, auth: Record<string, string>) {
  const base = `${server.api}/${bucket}`;
  switch (op) {
    case 'read':
      return call(`${base}/k1`, { headers: auth });
    case 'list':
      return call(`${base}/?prefix=k`, { headers: auth });
    case 'list_values':
      return call(`${base}/?prefix=k&values=true`, { headers: auth });
    case 'set':
      return call(`${base}/k2`, { method: 'POST', body: 'v', headers: auth });
    case 'counter':
      return call(`${base}/kc`, { method: 'PATCH', body: '+1', headers: auth });
    case 'delete':
      return call(`${base}/k1`, { method: 'DELETE', headers: auth });
    case 'txn':
      return call(base, { method: 'POST', ...json({ txn: [{ set: 'k3', value: 1 }] }, auth) });
    case 'rollback_dry_run':
      return call(`${base}?rollback=0&prefix=k&dry_run=true`, { method: 'POST', headers: auth });
    case 'rollback':
      return call(`${base}?rollback=0&prefix=k`, { method: 'POST', headers: auth });
    case 'policy':
      return call(base, { headers: auth });
    case 'patch':
      return call(base, { method: 'PATCH', ...json({ default_ttl: 100 }, auth) });
    case 'mint':
      return call(`${base}/tokens/`, {
        method: 'POST',
        body: new URLSearchParams({ prefix: 'k', permissions: 'read', ttl: '60' }),
        headers: auth,
      });
    case 'delete_bucket':
      return call(base, { method: 'DELETE', headers: auth });
  }
}

const OPS: Op[] = [
  'read',
  'list',
  'list_values',
  'set',
  'counter',
  'delete',
  'txn',
  'rollback_dry_run',
  'rollback',
  'policy',
  'patch',
  'mint',
  'delete_bucket',
];
const WHO: Who[] = ['anonymous', 'read_key', 'write_key', 'secret_key', 'token'];

const adminAuth = (config: Config): Record<string, string> => (CONFIGS[config].secret_key ? { authorization: 'Bearer S' } : {});

/** Sets `k1` with the admin credential. */
async function seed(config: Config, bucket: string) {
  const seeded = await call(`${server.api}/${bucket}/k1`, { method: 'POST', body: 'v', headers: adminAuth(config) });
  expect(seeded.status).toBe(200);
}

/** The Authorization header for `who` in `bucket` (a token is minted there, with the admin credential). */
async function authFor(config: Config, who: Who, bucket: string): Promise<Record<string, string>> {
  if (who === 'anonymous') return {};
  if (who !== 'token') return { authorization: `Bearer ${CREDENTIAL[who]}` };
  if (!CONFIGS[config].signing_key) return { authorization: 'Bearer eyJhbGciOiJIUzI1NiJ9.eyJ4IjoxfQ.c2ln' };
  const minted = await call(`${server.api}/${bucket}/tokens/`, {
    method: 'POST',
    headers: adminAuth(config),
    body: new URLSearchParams({ prefix: 'k', permissions: 'read,enumerate,write,delete', ttl: '60' }),
  });
  return { authorization: `Bearer ${(minted.json() as { access_token: string }).access_token}` };
}

/**
 * Creating a bucket hashes its keys with scrypt, and a bucket's first use of each credential runs
 * it again, so the cells of a configuration share one bucket, made before them. Only a DELETE of
 * the bucket that is allowed gets a bucket of its own (a refused one leaves the bucket in place).
 * Each cell first sets k1 again, with the admin credential (verified once), so whatever an earlier
 * cell did (a DELETE of k1, a rollback, a write) the next finds k1 there. PATCH only sets default_ttl.
 */
const buckets = new Map<string, Promise<string>>();
const credentials = new Map<string, Promise<Record<string, string>>>();
async function bucketFor(config: Config, who: Who, op: Op) {
  const own = op === 'delete_bucket' && expected(config, who, op) === 'ok';
  const id = own ? `${config}/${who}/own` : config;
  if (!buckets.has(id)) buckets.set(id, createBucket(server.api, CONFIGS[config]));
  const bucket = await buckets.get(id)!;
  if (!credentials.has(`${bucket}/${who}`)) credentials.set(`${bucket}/${who}`, authFor(config, who, bucket));
  return { bucket, auth: await credentials.get(`${bucket}/${who}`)! };
}

describe.each(Object.keys(CONFIGS) as Config[])('bucket with %s credentials', (config) => {
  beforeAll(async () => {
    await Promise.all(WHO.flatMap((who) => [bucketFor(config, who, 'read'), bucketFor(config, who, 'delete_bucket')]));
  });
  const cells = WHO.flatMap((who) => OPS.map((op) => [who, op] as const));
  it.each(cells)('%s → %s', async (who, op) => {
    const { bucket, auth } = await bucketFor(config, who, op);
    await seed(config, bucket);
    const res = await perform(bucket, op, auth);
    const outcome = expected(config, who, op);
    if (outcome === 'ok') expect(res.status, res.text).toBeLessThan(300);
    else {
      expect(res.status, res.text).toBe(outcome);
      const message = { 401: 'unauthorized', 403: 'forbidden', 503: 'service_unavailable' }[outcome];
      expect(res.json()).toEqual({ error: { code: outcome, message, detail: expect.any(String) } });
      if (outcome === 401) expect(res.headers.get('www-authenticate')).toContain('Bearer');
    }
  });
});

describe('credential presentation', () => {
  let bucket: string;
  beforeAll(async () => {
    bucket = await createBucket(server.api, { secret_key: 'S', read_key: 'R', write_key: 'W' });
    await call(`${server.api}/${bucket}/k`, { method: 'POST', body: 'v', headers: { authorization: 'Bearer W' } });
  });
  const read = (init: { query?: string; headers?: Record<string, string> }) =>
    call(`${server.api}/${bucket}/k${init.query ?? ''}`, { headers: init.headers ?? {} });

  it('Bearer, Basic (username is the credential), access_token and key queries all work', async () => {
    expect((await read({ headers: { authorization: 'Bearer R' } })).status).toBe(200);
    expect((await read({ headers: { authorization: `Basic ${Buffer.from('R:ignored').toString('base64')}` } })).status).toBe(200);
    expect((await read({ headers: { authorization: `Basic ${Buffer.from('R:').toString('base64')}` } })).status).toBe(200);
    expect((await read({ query: '?access_token=R' })).status).toBe(200);
    expect((await read({ query: '?key=R' })).status).toBe(200);
  });
  it('only the first source present is used, in the spec order', async () => {
    expect((await read({ headers: { authorization: 'Bearer wrong' }, query: '?key=R' })).status).toBe(401);
    expect((await read({ query: '?access_token=wrong&key=R' })).status).toBe(401);
    expect((await read({ query: '?access_token=R&key=wrong' })).status).toBe(200);
    expect((await read({ headers: { authorization: `Basic ${Buffer.from('wrong:R').toString('base64')}` } })).status).toBe(401);
  });
  it.each(['Digest abc', 'Bearer', 'Basic !!!', 'garbage'])('a malformed Authorization %j is 401', async (header) => {
    const res = await read({ headers: { authorization: header } });
    expect(res.status).toBe(401);
    expect(res.json()).toEqual({ error: { code: 401, message: 'unauthorized', detail: expect.any(String) } });
  });
  it('the write key cannot read when a read key is set; the read key cannot write when a write key is set', async () => {
    expect((await read({ headers: { authorization: 'Bearer W' } })).status).toBe(403);
    expect((await call(`${server.api}/${bucket}/k`, { method: 'POST', body: 'x', headers: { authorization: 'Bearer R' } })).status).toBe(
      403,
    );
  });
  it('a key shared by two roles gets both', async () => {
    const b = await createBucket(server.api, { secret_key: 'S', read_key: 'RW', write_key: 'RW' });
    expect((await call(`${server.api}/${b}/k`, { method: 'POST', body: 'x', headers: { authorization: 'Bearer RW' } })).status).toBe(200);
    expect((await call(`${server.api}/${b}/k`, { headers: { authorization: 'Bearer RW' } })).status).toBe(200);
  });
});
