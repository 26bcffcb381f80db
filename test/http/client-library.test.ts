import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type FetchInit,
  type FetchLike,
  type KvbBucket,
  KvbHttp,
  KvbNetworkError,
  KvbTimeoutError,
  NotFoundError,
  PreconditionFailedError,
  UnauthorizedError,
  ForbiddenError,
  UnavailableError,
  WatchResetError,
  type WatchEvent,
  connect,
  connectFromEnv,
  createBucket,
} from '../../src/client/index.js';
import { deadUrl } from '../helpers/cli.js';
import { type RunningServer, startServer } from '../helpers/server.js';

/**
 * The typed client (`kvb/client`, src/client) against a real server, run by the sqlite, postgres
 * and pgbouncer projects alike: every method, exact types, cursors, contention, a resumed watch.
 * test/runtimes/client-runtimes.test.ts (`npm run test:runtimes`) runs this same file again under
 * Deno and Bun, where the client is under test and not the server: there the server is spawned
 * under Node, here it runs in this process.
 */
let server: Pick<RunningServer, 'url' | 'api' | 'stop'>;
const SECRET = 'client-secret';
const underNode = !('Deno' in globalThis) && !process.versions.bun;

beforeAll(async () => {
  server = underNode ? await (await import('../helpers/app-server.js')).startAppServer() : await startServer();
});
afterAll(async () => {
  await server?.stop();
});

async function newBucket(fields: Record<string, string | number> = {}): Promise<KvbBucket> {
  // default_ttl 0: keys never expire unless a test says so (the server's default is 7 days).
  const id = await createBucket({ url: server.url }, { email: 'client@example.com', secret_key: SECRET, default_ttl: 0, ...fields });
  return connect({ url: server.url, bucket: id, token: SECRET });
}

const INT64_MIN = -9223372036854775808n;
const INT64_MAX = 9223372036854775807n;

describe('values come back as what they are', () => {
  it('text, json, int64 (extremes exact), float64 and bytes round-trip with their type, revision and expiry', async () => {
    const kv = await newBucket();
    const text = await kv.set('t', 'héllo, 42');
    expect(text).toMatchObject({ key: 't', value: 'héllo, 42', type: 'text', expiresAt: null });
    expect(text.revision).toBeGreaterThan(0);
    await kv.set('j', { a: [1, 'x', null], b: true });
    await kv.set('min', INT64_MIN);
    await kv.set('max', INT64_MAX);
    await kv.set('f', 3, { type: 'float64' });
    await kv.set('f2', 0.1);
    await kv.set('num-as-json', 7, { type: 'json' });
    await kv.set('str-as-json', '"quoted"', { type: 'text' });
    expect(await kv.get('j')).toMatchObject({ value: { a: [1, 'x', null], b: true }, type: 'json' });
    expect(await kv.get('min')).toMatchObject({ value: INT64_MIN, type: 'int64' });
    expect(await kv.get('max')).toMatchObject({ value: INT64_MAX, type: 'int64' });
    expect(await kv.get('f')).toMatchObject({ value: 3, type: 'float64' });
    expect(await kv.get('f2')).toMatchObject({ value: 0.1, type: 'float64' });
    expect(await kv.get('num-as-json')).toMatchObject({ value: 7, type: 'json' });
    expect(await kv.get('str-as-json')).toMatchObject({ value: '"quoted"', type: 'text' });
    // A string that looks like a number stays text: nothing is guessed.
    await kv.set('digits', '12345');
    expect(await kv.get('digits')).toMatchObject({ value: '12345', type: 'text' });

    const all = Uint8Array.from({ length: 256 }, (_, i) => i);
    await kv.set('bytes', all);
    const bytes = await kv.get('bytes');
    expect(bytes?.type).toBe('bytes');
    expect(bytes?.value).toEqual(all);

    const expiring = await kv.set('soon', 'x', { ttl: 3600 });
    expect(expiring.expiresAt).toBeInstanceOf(Date);
    expect(Math.abs(expiring.expiresAt!.getTime() - Date.now() - 3_600_000)).toBeLessThan(120_000);

    // The same exactness in a listing (meta=true: int64 as its exact text, bytes from base64).
    const listed = new Map<string, unknown>();
    for await (const entry of kv.list({ values: true })) listed.set(entry.key, entry.value);
    expect(listed.get('min')).toBe(INT64_MIN);
    expect(listed.get('max')).toBe(INT64_MAX);
    expect(listed.get('bytes')).toEqual(all);
    expect(listed.get('j')).toEqual({ a: [1, 'x', null], b: true });
    expect(listed.get('f')).toBe(3);
  });

  it('a number is typed as the CLI and the server type it: integral int64, fractional float64, in set and in atomic().set alike', async () => {
    const kv = await newBucket();
    expect(await kv.set('a', 100)).toMatchObject({ value: 100n, type: 'int64', text: '100' });
    expect(await kv.set('neg', -7)).toMatchObject({ value: -7n, type: 'int64' });
    expect(await kv.set('half', 1.5)).toMatchObject({ value: 1.5, type: 'float64', text: '1.5' });
    // Past 2^53 a JS number is not an exact integer any more: float64, never a silently wrong int64.
    expect(await kv.set('huge', 2 ** 60)).toMatchObject({ type: 'float64' });
    const done = await kv
      .atomic()
      .set('t/int', 90)
      .set('t/float', 2.5)
      .set('t/three', 3, { type: 'float64' })
      .set('t/big', INT64_MAX)
      .set('t/text', '90')
      .set('t/doc', { n: 90 })
      .set('t/bytes', Uint8Array.from([0, 255]))
      .set('t/quoted', 'q', { type: 'json' })
      .commit();
    expect(done.ok).toBe(true);
    const { entries } = await kv.getMany(['t/int', 't/float', 't/three', 't/big', 't/text', 't/doc', 't/bytes', 't/quoted']);
    expect(entries.map((e) => e && [e.key, e.type, e.value])).toEqual([
      ['t/int', 'int64', 90n],
      ['t/float', 'float64', 2.5],
      ['t/three', 'float64', 3],
      ['t/big', 'int64', INT64_MAX],
      ['t/text', 'text', '90'],
      ['t/doc', 'json', { n: 90 }],
      ['t/bytes', 'bytes', Uint8Array.from([0, 255])],
      ['t/quoted', 'json', 'q'],
    ]);
    expect((await kv.get('t/three'))?.text).toBe('3.0');
  });

  it('entry.text is the stored text exactly: a JSON integer past 2^53 and a float64 3.0 keep their digits', async () => {
    const kv = await newBucket();
    const big = '99999999999999999999';
    await kv.http.set(kv.id, 'big', new TextEncoder().encode(big), {});
    await kv.http.set(kv.id, 'doc', new TextEncoder().encode(`{"id": ${big}, "x": 1.50}`), { contentType: 'application/json' });
    await kv.set('three', 3, { type: 'float64' });
    await kv.set('bin', Uint8Array.from([1, 2]));
    await kv.set('word', 'héllo');
    const big1 = await kv.get('big');
    expect(big1).toMatchObject({ type: 'json', text: big });
    // value is JSON.parse's: a double, which is why text exists.
    expect(big1?.value).toBe(1e20);
    expect((await kv.get('doc'))?.text).toBe(`{"id": ${big}, "x": 1.50}`);
    expect((await kv.get('three'))?.text).toBe('3.0');
    expect((await kv.get('bin'))?.text).toBeNull();
    expect((await kv.get('word'))?.text).toBe('héllo');
    const listed = new Map<string, string | null>();
    for await (const entry of kv.list({ values: true })) listed.set(entry.key, entry.text);
    expect(Object.fromEntries(listed)).toEqual({ big, bin: null, doc: `{"id":${big},"x":1.50}`, three: '3.0', word: 'héllo' });
  });

  it('history gives an int64 exactly (it is a JSON number in the history lines)', async () => {
    const kv = await newBucket();
    await kv.set('max', INT64_MAX);
    await kv.set('max', INT64_MIN);
    expect((await kv.history('max', { values: true })).map((h) => h.value)).toEqual([INT64_MIN, INT64_MAX]);
  });

  it('refuses values it cannot store exactly, before sending anything', async () => {
    const kv = await newBucket();
    await expect(kv.set('big', INT64_MAX + 1n)).rejects.toThrow(RangeError);
    await expect(kv.set('nan', Number.NaN)).rejects.toThrow(RangeError);
    await expect(kv.set('n', 5 as unknown as string, { type: 'text' })).rejects.toThrow(TypeError);
    expect(await kv.get('big')).toBeNull();
  });
});

describe('keys: get, set with conditions, delete, increment', () => {
  it('get of an absent key is null; delete says whether there was one', async () => {
    const kv = await newBucket();
    expect(await kv.get('nope')).toBeNull();
    expect(await kv.delete('nope')).toBe(false);
    await kv.set('k', 'v');
    expect(await kv.delete('k')).toBe(true);
    expect(await kv.get('k')).toBeNull();
  });

  it('ifRevision and ifAbsent write only in that state, else PreconditionFailedError with the current revision', async () => {
    const kv = await newBucket();
    const created = await kv.set('c', 'v1', { ifAbsent: true });
    const err = await kv.set('c', 'again', { ifAbsent: true }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PreconditionFailedError);
    expect((err as PreconditionFailedError).status).toBe(412);
    expect((err as PreconditionFailedError).currentRevision).toBe(created.revision);
    const second = await kv.set('c', 'v2', { ifRevision: created.revision });
    await expect(kv.set('c', 'v3', { ifRevision: created.revision })).rejects.toBeInstanceOf(PreconditionFailedError);
    await expect(kv.delete('c', { ifRevision: created.revision })).rejects.toBeInstanceOf(PreconditionFailedError);
    expect(await kv.delete('c', { ifRevision: second.revision })).toBe(true);
  });

  it('KvbHttp.set sends POST when asked (the primary method): the same write, conditions and all', async () => {
    const id = await createBucket({ url: server.url }, { email: 'client@example.com', secret_key: SECRET, default_ttl: 0 });
    const methods: string[] = [];
    const fetch: FetchLike = (url, init) => {
      methods.push(init.method);
      return globalThis.fetch(url, init as RequestInit);
    };
    const http = new KvbHttp({ url: server.url, token: SECRET, fetch });
    const made = await http.set(id, 'p', new TextEncoder().encode('v1'), { method: 'POST', condition: { ifAbsent: true } });
    const err = await http.set(id, 'p', 'again', { method: 'POST', condition: { ifAbsent: true } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PreconditionFailedError);
    await http.set(id, 'p', 'v2', { method: 'POST', contentType: 'text/plain', condition: { ifRevision: made.revision! } });
    const read = await http.get(id, 'p');
    expect(new TextDecoder().decode(read.data)).toBe('v2');
    expect(read.type).toBe('text');
    expect(methods).toEqual(['POST', 'POST', 'POST', 'GET']);
  });

  it('increment: int64 stays exact at the top of its range; a float delta makes a float64', async () => {
    const kv = await newBucket();
    expect(await kv.increment('n')).toMatchObject({ value: 1n, type: 'int64' });
    expect(await kv.increment('n', 41)).toMatchObject({ value: 42n, type: 'int64' });
    expect(await kv.increment('n', -2n)).toMatchObject({ value: 40n });
    await kv.set('top', INT64_MAX - 1n);
    expect((await kv.increment('top', 1n)).value).toBe(INT64_MAX);
    const float = await kv.increment('x', 2.5);
    expect(float).toMatchObject({ value: 2.5, type: 'float64' });
    expect(float.revision).toBeGreaterThan(0);
  });
});

describe('list follows cursors', () => {
  it('lists 25,000 keys (written by transactions of 1,000) exactly once each, in byte order, both ways', { timeout: 240_000 }, async () => {
    const kv = await newBucket();
    const keys = Array.from({ length: 25_000 }, (_, i) => `item/${String(i).padStart(5, '0')}`);
    for (let start = 0; start < keys.length; start += 1000) {
      const txn = kv.atomic();
      for (const key of keys.slice(start, start + 1000)) txn.set(key, key.length);
      expect((await txn.commit()).ok).toBe(true);
    }
    await kv.set('other', 'not under the prefix');
    const listing = kv.list({ prefix: 'item/' });
    const listed: string[] = [];
    for await (const { key } of listing) listed.push(key);
    expect(listed).toEqual(keys);
    expect(listing.revision).toBeGreaterThanOrEqual(25);

    const reversed: string[] = [];
    for await (const { key } of kv.list({ prefix: 'item/', reverse: true, pageSize: 7000 })) reversed.push(key);
    expect(reversed).toEqual([...keys].reverse());

    let withValues = 0;
    for await (const entry of kv.list({ prefix: 'item/1', values: true })) {
      expect(entry).toMatchObject({ type: 'int64', value: 10n, size: 2, expiresAt: null });
      withValues++;
    }
    expect(withValues).toBe(10_000);

    const limited: string[] = [];
    for await (const { key } of kv.list({ prefix: 'item/', limit: 2500, pageSize: 1000 })) limited.push(key);
    expect(limited).toEqual(keys.slice(0, 2500));
  });
});

describe('atomic and update', () => {
  it('commit answers ok with the revision, or the failed checks with nothing written', async () => {
    const kv = await newBucket();
    const a = await kv.set('a', 100n);
    const b = await kv.set('b', 'x');
    const done = await kv
      .atomic()
      .check('a', a.revision)
      .check('b', b.revision)
      .check('new', null)
      .set('a', 90)
      .set('new', 'hi')
      .delete('b')
      .commit();
    expect(done.ok).toBe(true);
    if (!done.ok) return;
    expect(done.revision).toBeGreaterThan(b.revision);
    expect(await kv.get('a')).toMatchObject({ value: 90n, type: 'int64', revision: done.revision });
    expect(await kv.get('b')).toBeNull();

    const refused = await kv.atomic().check('a', a.revision).checkExists('new', true).check('new', null).set('a', 1).commit();
    expect(refused).toEqual({
      ok: false,
      failedChecks: [
        { index: 0, key: 'a' },
        { index: 2, key: 'new' },
      ],
    });
    expect((await kv.get('a'))?.value).toBe(90n);
    expect(() => kv.atomic().set('k', null)).toThrow(TypeError);
    expect(() => kv.atomic().set('k', 5, { type: 'text' })).toThrow(TypeError);
  });

  it('update under 16-way contention loses nothing', { timeout: 120_000 }, async () => {
    const kv = await newBucket();
    await kv.set('counter', { n: 0 });
    const writers = Array.from({ length: 16 }, () =>
      kv.update('counter', (current) => ({ n: (current as { n: number }).n + 1 }), { retries: 100 }),
    );
    const results = await Promise.all(writers);
    expect((await kv.get('counter'))?.value).toEqual({ n: 16 });
    // Every writer's success is a distinct revision: sixteen separate, ordered commits.
    expect(new Set(results.map((r) => r.revision)).size).toBe(16);
    expect(results.map((r) => (r.value as { n: number }).n).sort((x, y) => x - y)).toEqual(Array.from({ length: 16 }, (_, i) => i + 1));
  });

  it('update creates an absent key, and keeps an existing key’s type and expiry', async () => {
    const kv = await newBucket();
    expect((await kv.update('fresh', (current) => (current === undefined ? 'first' : 'again'))).value).toBe('first');
    const set = await kv.set('doc', [1], { ttl: 600 });
    const updated = await kv.update('doc', (current) => [...(current as number[]), 2]);
    expect(updated).toMatchObject({ value: [1, 2], type: 'json' });
    expect(Math.abs(updated.expiresAt!.getTime() - set.expiresAt!.getTime())).toBeLessThan(2000);
  });
});

describe('watch', () => {
  it('yields sets (with values), deletes; resumes across a killed connection without loss or duplicates', { timeout: 60_000 }, async () => {
    // A fetch that lets the test cut the watch's connection from underneath the client.
    const watchConnections: AbortController[] = [];
    const cuttable: FetchLike = (url: string, init: FetchInit) => {
      const controller = new AbortController();
      init.signal?.addEventListener('abort', () => controller.abort(init.signal?.reason), { once: true });
      if (url.includes('watch=true')) watchConnections.push(controller);
      return fetch(url, { ...init, signal: controller.signal } as RequestInit);
    };
    const id = await createBucket({ url: server.url }, { email: 'w@example.com', secret_key: SECRET, default_ttl: 0 });
    const kv = connect({ url: server.url, bucket: id, token: SECRET, fetch: cuttable });
    const start = await kv.set('w/first', 'before');
    const stop = new AbortController();
    const seen: WatchEvent[] = [];
    let markCut!: () => void;
    const cutDone = new Promise<void>((resolve) => (markCut = resolve));
    const feed = (async () => {
      try {
        for await (const event of kv.watch({ prefix: 'w/', since: start.revision, values: true, signal: stop.signal })) {
          seen.push(event);
          // Cut the connection in the middle of a transaction's events (after its 2nd of 5 keys).
          if (event.key === 'w/t1' && watchConnections.length === 1) {
            watchConnections[0]!.abort();
            markCut();
          }
          if (event.key === 'w/end') break;
        }
      } catch (err) {
        if (!stop.signal.aborted) throw err;
      }
    })();
    const txn = kv.atomic();
    for (let i = 0; i < 5; i++) txn.set(`w/t${i}`, { i });
    await txn.commit();
    // The later writes wait for the cut, so the client cannot have them buffered from the first
    // connection (a busy machine can deliver the whole feed in one chunk): it must reconnect.
    await Promise.race([cutDone, feed]);
    await kv.set('w/big', INT64_MAX);
    await kv.delete('w/t4');
    await kv.set('outside', 'not watched');
    await kv.set('w/end', 'done');
    const timer = setTimeout(() => stop.abort(), 30_000);
    await feed;
    clearTimeout(timer);
    expect(watchConnections.length).toBeGreaterThanOrEqual(2);
    expect(seen.map((e) => `${e.type} ${e.key}`)).toEqual([
      'set w/t0',
      'set w/t1',
      'set w/t2',
      'set w/t3',
      'set w/t4',
      'set w/big',
      'delete w/t4',
      'set w/end',
    ]);
    const big = seen.find((e) => e.key === 'w/big');
    expect(big).toMatchObject({ type: 'set', valueType: 'int64', value: INT64_MAX, expiresAt: null });
    expect(seen.find((e) => e.key === 'w/t3')).toMatchObject({ valueType: 'json', value: { i: 3 } });
    // A transaction's keys share its revision; revisions only go up.
    const revisions = seen.map((e) => e.revision);
    expect(new Set(revisions.slice(0, 5)).size).toBe(1);
    expect([...revisions].sort((x, y) => x - y)).toEqual(revisions);
  });

  it('an import ends the feed with WatchResetError', { timeout: 30_000 }, async () => {
    const kv = await newBucket();
    await kv.set('k', 'v');
    const file = await collect(await kv.export());
    const seen: string[] = [];
    const feed = (async () => {
      for await (const change of kv.watch()) seen.push(change.key);
    })().catch((e: unknown) => e);
    // The event: the watch is connected once it delivers a write made after it started (written
    // again until one arrives, since a feed from now has nothing written before it connected).
    await expect
      .poll(
        async () => {
          await kv.set('ready', 'x');
          return seen.length;
        },
        { timeout: 15_000, interval: 100 },
      )
      .toBeGreaterThan(0);
    await kv.import(file);
    const err = await feed;
    expect(err).toBeInstanceOf(WatchResetError);
    expect((err as WatchResetError).revision).toBeGreaterThan(0);
  });
});

async function collect(body: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const chunk of body) parts.push(chunk);
  return Buffer.concat(parts);
}

describe('export, import, tokens, policy, buckets', () => {
  it('export streams the NDJSON format; import into another bucket restores every type exactly', async () => {
    const from = await newBucket();
    await from.set('t', 'text');
    await from.set('i', INT64_MIN);
    await from.set('b', Uint8Array.from([0, 255, 10]));
    const exported = await collect(await from.export());
    const lines = new TextDecoder().decode(exported).trim().split('\n');
    expect(JSON.parse(lines[0]!)).toMatchObject({ kvb: 'export', bucket: from.id });
    expect(JSON.parse(lines.at(-1)!)).toMatchObject({ kvb: 'end', count: 3 });

    const to = await newBucket();
    // Streamed in: a ReadableStream of the exported chunks.
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(exported.subarray(0, 10));
        controller.enqueue(exported.subarray(10));
        controller.close();
      },
    });
    const result = await to.import(stream);
    expect(result).toMatchObject({ imported: 3, skipped: 0 });
    expect(result.revision).toBeGreaterThan(0);
    expect((await to.get('i'))?.value).toBe(INT64_MIN);
    expect((await to.get('b'))?.value).toEqual(Uint8Array.from([0, 255, 10]));
    expect(await to.get('t')).toMatchObject({ value: 'text', revision: result.revision });
  });

  it('mintToken gives a token limited to its prefix and permissions; typed 401, 403 and 404', async () => {
    const kv = await newBucket({ signing_key: 'a-long-signing-key-for-tests' });
    await kv.set('user/1', 'Ada');
    await kv.set('admin/1', 'root');
    const token = await kv.mintToken({ prefix: 'user/', permissions: ['read'], ttl: 600 });
    const reader = connect({ url: server.url, bucket: kv.id, token });
    expect((await reader.get('user/1'))?.value).toBe('Ada');
    const forbidden = await reader.get('admin/1').catch((e: unknown) => e);
    expect(forbidden).toBeInstanceOf(ForbiddenError);
    expect(forbidden).toMatchObject({ status: 403, kind: 'forbidden' });
    await expect(reader.set('user/2', 'x')).rejects.toBeInstanceOf(ForbiddenError);

    const wrong = connect({ url: server.url, bucket: kv.id, token: 'not-the-key' });
    const unauthorized = await wrong.get('user/1').catch((e: unknown) => e);
    expect(unauthorized).toBeInstanceOf(UnauthorizedError);
    expect((unauthorized as UnauthorizedError).detail).toEqual(expect.any(String));

    const gone = connect({ url: server.url, bucket: '00000000-0000-4000-8000-000000000000', token: SECRET });
    const notFound = await gone.get('k').catch((e: unknown) => e);
    expect(notFound).toBeInstanceOf(NotFoundError);
    expect(notFound).toMatchObject({ status: 404, detail: 'no such bucket' });
  });

  it('minting without a signing key is UnavailableError (503), not retried: a POST', async () => {
    const kv = await newBucket();
    const err = await kv.mintToken({ prefix: 'p/', permissions: ['read'], ttl: 60 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnavailableError);
    expect(err).toMatchObject({ status: 503 });
  });

  it('policy, updatePolicy and deleteBucket', async () => {
    const kv = await newBucket();
    expect(await kv.policy()).toMatchObject({ has_secret_key: true, has_read_key: false, default_ttl: expect.any(Number) });
    await kv.updatePolicy({ read_key: 'r', default_ttl: 60 });
    expect(await kv.policy()).toMatchObject({ has_read_key: true, default_ttl: 60 });
    const reader = connect({ url: server.url, bucket: kv.id, token: 'r' });
    await kv.set('k', 'v');
    expect((await reader.get('k'))?.value).toBe('v');
    await kv.deleteBucket();
    await expect(kv.policy()).rejects.toBeInstanceOf(NotFoundError);
  });

  it('connectFromEnv reads KVB_URL, KVB_BUCKET and KVB_TOKEN as the CLI does', async () => {
    const kv = await newBucket();
    await kv.set('k', 'from env');
    const fromEnv = connectFromEnv({ KVB_URL: server.url, KVB_BUCKET: kv.id, KVB_TOKEN: SECRET });
    expect((await fromEnv.get('k'))?.value).toBe('from env');
    expect(() => connectFromEnv({ KVB_URL: server.url })).toThrow(/KVB_BUCKET/);
  });
});

describe('retries, timeouts and cancellation', () => {
  /** A fetch that answers the first `failures` requests matching `match` with `status` itself, then lets requests through. */
  function flaky(status: number, failures: number, match: (init: FetchInit) => boolean) {
    const calls: string[] = [];
    let left = failures;
    const fetchLike: FetchLike = async (url, init) => {
      calls.push(`${init.method} ${url}`);
      if (match(init) && left-- > 0) {
        return new Response(
          JSON.stringify({
            error: { code: status, message: status === 429 ? 'too_many_requests' : 'service_unavailable', detail: 'busy' },
          }),
          {
            status,
            headers: { 'retry-after': '0', 'content-type': 'application/json' },
          },
        );
      }
      return fetch(url, init as RequestInit);
    };
    return { fetchLike, calls };
  }

  it('idempotent calls (get, set by PUT, delete, list) retry after 503/429 honouring Retry-After; increment and transactions never do', async () => {
    const base = await newBucket();
    await base.set('k', 'v');
    const reads = flaky(503, 2, (init) => init.method === 'GET');
    const kv = connect({ url: server.url, bucket: base.id, token: SECRET, fetch: reads.fetchLike });
    expect((await kv.get('k'))?.value).toBe('v');
    expect(reads.calls.length).toBe(3);

    const limited = flaky(429, 1, (init) => init.method === 'PUT');
    const writer = connect({ url: server.url, bucket: base.id, token: SECRET, fetch: limited.fetchLike });
    expect((await writer.set('k', 'w')).value).toBe('w');
    expect(limited.calls.length).toBe(2);

    const counters = flaky(503, 1, (init) => init.method === 'PATCH');
    const once = connect({ url: server.url, bucket: base.id, token: SECRET, fetch: counters.fetchLike });
    await expect(once.increment('n')).rejects.toBeInstanceOf(UnavailableError);
    expect(counters.calls.length).toBe(1);
    expect(await base.get('n')).toBeNull();
    const txns = flaky(503, 1, (init) => init.method === 'POST');
    const txnClient = connect({ url: server.url, bucket: base.id, token: SECRET, fetch: txns.fetchLike });
    const refused = await txnClient
      .atomic()
      .set('a', 'b')
      .commit()
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(UnavailableError);
    expect(txns.calls.length).toBe(1);
    expect(await base.get('a')).toBeNull();

    const exhausted = flaky(503, 10, (init) => init.method === 'GET');
    const giveUp = connect({ url: server.url, bucket: base.id, token: SECRET, fetch: exhausted.fetchLike, retries: 2 });
    await expect(giveUp.get('k')).rejects.toMatchObject({ status: 503, detail: 'busy' });
    expect(exhausted.calls.length).toBe(3);
  });

  it('a timeout ends a call with KvbTimeoutError; an AbortSignal cancels it with its reason', async () => {
    const base = await newBucket();
    // A server that never answers: a fetch that waits for its signal.
    const silent: FetchLike = (_url, init) =>
      new Promise((_, reject) => init.signal?.addEventListener('abort', () => reject(init.signal?.reason), { once: true }));
    const slow = connect({ url: server.url, bucket: base.id, fetch: silent, timeoutMs: 100 });
    await expect(slow.get('k')).rejects.toBeInstanceOf(KvbTimeoutError);
    await expect(slow.get('k', { timeoutMs: 50 })).rejects.toThrow(/timed out after 50 ms/);

    const cancel = new AbortController();
    const pending = connect({ url: server.url, bucket: base.id, fetch: silent, timeoutMs: 0 }).get('k', { signal: cancel.signal });
    cancel.abort(new Error('user gave up'));
    await expect(pending).rejects.toThrow('user gave up');
    const aborted = AbortSignal.abort();
    await expect(base.get('k', { signal: aborted })).rejects.toMatchObject({ name: 'AbortError' });
  });

  it('a server that is not there is KvbNetworkError (connection refused) in every runtime, never a bare TypeError', async () => {
    const gone = connect({ url: await deadUrl(), bucket: 'b', token: SECRET, retries: 0 });
    const failure = await gone.get('k').catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(KvbNetworkError);
    expect((failure as KvbNetworkError).reason).toBe('connection refused');
    expect((failure as KvbNetworkError).exitCode).toBe(4);
  });
});

describe('getMany, expire, deletePrefix and lock', () => {
  it('getMany reads keys at one revision, int64 exact; expire keeps the value; deletePrefix answers the count', async () => {
    const kv = await newBucket();
    await kv.set('a', 9223372036854775807n);
    await kv.set('b', 'text');
    const { revision, entries } = await kv.getMany(['a', 'missing', 'b']);
    expect(entries.map((e) => e && [e.key, e.value, e.type])).toEqual([['a', 9223372036854775807n, 'int64'], null, ['b', 'text', 'text']]);
    expect(entries.every((e) => e === null || e.revision <= revision)).toBe(true);
    expect(await kv.expire('b', 120)).toBe(true);
    const b = await kv.get('b');
    expect(b?.value).toBe('text');
    expect(b!.expiresAt!.getTime()).toBeGreaterThan(Date.now());
    expect(await kv.expire('missing', 5)).toBe(false);
    await kv.atomic().set('t/1', 1).set('t/2', 2).commit();
    expect((await kv.deletePrefix('t/')).deleted).toBe(2);
    await expect(kv.deletePrefix('')).rejects.toBeInstanceOf(RangeError);
  });
  it('lock: a second holder waits until the first releases, then gets it', async () => {
    const kv = await newBucket();
    const first = await kv.lock('lock/x', { ttl: 30 });
    let secondHeld = false;
    const second = kv.lock('lock/x', { ttl: 30 }).then((lock) => {
      secondHeld = true;
      return lock;
    });
    // The second is still waiting while the first holds the key (checked by reading it).
    expect((await kv.get('lock/x'))?.value).toBe(first.owner);
    expect(secondHeld).toBe(false);
    await first.release();
    const held = await second;
    expect((await kv.get('lock/x'))?.value).toBe(held.owner);
    expect(held.lost.aborted).toBe(false);
    await held.release();
    expect(await kv.get('lock/x')).toBeNull();
  });
});
