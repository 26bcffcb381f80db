import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportFile, manyKeys } from '../helpers/export-file.js';
import { call, createBucket, expectError, json } from '../helpers/http.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';

let server: AppServer;
let bucket: string;

beforeAll(async () => {
  server = await startAppServer();
  bucket = await createBucket(server.api, { secret_key: 'admin-secret', signing_key: 'sign' });
});
afterAll(async () => {
  await server.stop();
});

const admin = { authorization: 'Bearer admin-secret' };
const txn = (ops: unknown, headers: Record<string, string> = admin) =>
  call(`${server.api}/${bucket}`, { method: 'POST', ...json({ txn: ops }, headers) });
const put = (key: string, body: string, query = '') =>
  call(`${server.api}/${bucket}/${encodeURIComponent(key)}${query}`, { method: 'POST', body: Buffer.from(body), headers: admin });
const get = (key: string) => call(`${server.api}/${bucket}/${encodeURIComponent(key)}`, { headers: admin });

interface Results {
  revision: number;
  results: Array<null | { deleted: number } | { key: string; type: string; value: unknown; expires_at: string | null; rev: number }>;
}

/** The watch feed's events after `since`, read until `count` have arrived (bounded by the test timeout). */
async function eventsAfter(since: number, count: number): Promise<Array<Record<string, unknown>>> {
  const controller = new AbortController();
  const res = await fetch(`${server.api}/${bucket}/?watch=true&values=true&format=jsonl&since=${since}`, {
    headers: admin,
    signal: controller.signal,
  });
  const events: Array<Record<string, unknown>> = [];
  let buffer = '';
  const decoder = new TextDecoder();
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    let at: number;
    while ((at = buffer.indexOf('\n')) !== -1) {
      const line = buffer.slice(0, at);
      buffer = buffer.slice(at + 1);
      const event = JSON.parse(line) as Record<string, unknown>;
      if (event.key !== undefined) events.push(event);
    }
    if (events.length >= count) break;
  }
  controller.abort();
  return events;
}

describe('Transaction get: several keys read at one revision', () => {
  it('answers 200 with each key as the export writes it (int64 as a decimal string), null when absent, and writes nothing', async () => {
    await put('m/a', '9223372036854775807');
    await put('m/b', 'hello', '?ttl=0');
    const before = Number((await txn([{ check: 'm/a', exists: true }])).headers.get('kvb-revision'));
    const res = await txn([{ get: 'm/a' }, { get: 'm/b' }, { get: 'm/none' }]);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const body = JSON.parse(res.text) as Results;
    expect(body.revision).toBe(before);
    expect(res.headers.get('kvb-revision')).toBe(String(before));
    expect(body.results[0]).toMatchObject({ key: 'm/a', type: 'int64', value: '9223372036854775807' });
    expect(body.results[1]).toMatchObject({ key: 'm/b', type: 'bytes', value: Buffer.from('hello').toString('base64'), expires_at: null });
    expect(body.results[2]).toBeNull();
    expect(Number((await txn([{ check: 'm/a', exists: true }])).headers.get('kvb-revision'))).toBe(before);
  });
  it('values read together come from one revision while writers change them in lockstep', async () => {
    await txn([
      { set: 'pair/x', value: 0 },
      { set: 'pair/y', value: 0 },
    ]);
    let stop = false;
    const writer = (async () => {
      for (let i = 1; !stop; i++)
        await txn([
          { set: 'pair/x', value: i },
          { set: 'pair/y', value: i },
        ]);
    })();
    for (let n = 0; n < 40; n++) {
      const body = JSON.parse((await txn([{ get: 'pair/x' }, { get: 'pair/y' }])).text) as Results;
      const [x, y] = body.results as Array<{ value: unknown; rev: number }>;
      expect(x!.value).toEqual(y!.value);
      expect(x!.rev).toBeLessThanOrEqual(body.revision);
    }
    stop = true;
    await writer;
  });
  it('a caller with read permission only may get; a token cannot get outside its prefix', async () => {
    const token = JSON.parse(
      (
        await call(`${server.api}/${bucket}/tokens/`, {
          method: 'POST',
          headers: { ...admin, 'content-type': 'application/x-www-form-urlencoded' },
          body: 'prefix=m/&permissions=read&ttl=60',
        })
      ).text,
    ).access_token as string;
    const reader = { authorization: `Bearer ${token}` };
    expect((await txn([{ get: 'm/a' }], reader)).status).toBe(200);
    expectError(await txn([{ get: 'other' }], reader), 403, 'forbidden');
    expectError(await txn([{ expire: 'm/a', ttl: 5 }], reader), 403, 'forbidden');
    expectError(await txn([{ delete_prefix: 'm/' }], reader), 403, 'forbidden');
  });
  it.each([
    [{ get: 1 }, 'the key must be a string'],
    [{ get: 'a', ttl: 3 }, 'unknown field ttl'],
    [{ expire: 'a' }, 'expire takes ttl'],
    [{ expire: 'a', ttl: -1 }, 'ttl'],
    [{ expire: 'a', ttl: '5' }, 'expire takes ttl'],
    [{ delete_prefix: '' }, 'non-empty prefix'],
    [{ delete_prefix: 'x'.repeat(129) }, '128'],
  ])('%j is 400 naming the problem', async (op, detail) => {
    const res = await txn([op]);
    expectError(res, 400, 'bad_request');
    expect(res.headers.get('kvb-error-detail')).toContain(detail);
  });
});

describe('Transaction expire: a new expiry, the same value, one revision', () => {
  it('sets and clears the expiry without touching the value; watchers see one set with the value and the new expiry', async () => {
    await put('e/k', '{"a":[1,2]}', '?ttl=0');
    const set = Number((await get('e/k')).headers.get('kvb-revision'));
    const res = await txn([{ expire: 'e/k', ttl: 300 }]);
    expect(res.status).toBe(204);
    const revision = Number(res.headers.get('kvb-revision'));
    expect(revision).toBeGreaterThan(set);
    const read = await get('e/k');
    expect(read.text).toBe('{"a":[1,2]}');
    expect(read.headers.get('kvb-type')).toBe('json');
    const expires = Date.parse(read.headers.get('kvb-expires-at') ?? '');
    expect(expires).toBeGreaterThan(Date.now() + 200_000);
    expect(expires).toBeLessThanOrEqual(Date.now() + 300_000);
    const [event] = await eventsAfter(revision - 1, 1);
    expect(event).toMatchObject({ type: 'set', key: 'e/k', rev: revision, value: { a: [1, 2] } });
    expect(event!.expires_at).not.toBeNull();
    expect((await txn([{ expire: 'e/k', ttl: 0 }])).status).toBe(204);
    expect((await get('e/k')).headers.get('kvb-expires-at')).toBeNull();
  });
  it('a key that is not live fails like a check: 409 naming it, nothing written', async () => {
    await put('e/other', 'x');
    const res = await txn([
      { set: 'e/other', value: 'y' },
      { expire: 'e/missing', ttl: 10 },
    ]);
    expectError(res, 409, 'conflict');
    expect(res.headers.get('kvb-failed-checks')).toBe('1');
    expect((await get('e/other')).text).toBe('x');
  });
});

describe('Transaction delete_prefix: every live key under a prefix in one revision', () => {
  it('deletes exactly the keys under the prefix, reports the count, and watchers see one revision', async () => {
    const keys = Array.from({ length: 120 }, (_, i) => ({ set: `d/${String(i).padStart(3, '0')}`, value: i }));
    await txn([...keys, { set: 'd', value: 'the prefix itself is a key' }, { set: 'e/keep', value: 1 }, { set: 'c/keep', value: 1 }]);
    const res = await txn([{ delete_prefix: 'd/' }]);
    expect(res.status).toBe(200);
    const body = JSON.parse(res.text) as Results;
    expect(body.results).toEqual([{ deleted: 120 }]);
    const list = JSON.parse((await call(`${server.api}/${bucket}/?format=json&prefix=d`, { headers: admin })).text) as string[];
    expect(list).toEqual(['d']);
    const events = await eventsAfter(body.revision - 1, 120);
    expect(events).toHaveLength(120);
    expect(new Set(events.map((e) => e.rev))).toEqual(new Set([body.revision]));
    expect(events.every((e) => e.type === 'delete')).toBe(true);
  });
  it('an empty prefix range deletes nothing and makes no revision', async () => {
    const before = Number((await txn([{ check: 'x', exists: false }])).headers.get('kvb-revision'));
    const res = await txn([{ delete_prefix: 'nothing-here/' }]);
    expect(JSON.parse(res.text)).toEqual({ revision: before, results: [{ deleted: 0 }] });
  });
  it('commits with the other operations or not at all', async () => {
    await txn([
      { set: 'f/1', value: 1 },
      { set: 'f/2', value: 2 },
    ]);
    expect((await txn([{ check: 'f/1', rev: 1 }, { delete_prefix: 'f/' }])).status).toBe(409);
    expect((await get('f/1')).status).toBe(200);
    const res = await txn([{ delete_prefix: 'f/' }, { set: 'f/3', value: 3 }, { get: 'f/1' }]);
    const body = JSON.parse(res.text) as Results;
    expect(body.results).toEqual([{ deleted: 2 }, null, expect.objectContaining({ key: 'f/1', value: 1 })]);
    const list = JSON.parse((await call(`${server.api}/${bucket}/?format=json&prefix=f/`, { headers: admin })).text) as string[];
    expect(list).toEqual(['f/3']);
  });
  it('a token may delete a prefix inside its own prefix only', async () => {
    const token = JSON.parse(
      (
        await call(`${server.api}/${bucket}/tokens/`, {
          method: 'POST',
          headers: { ...admin, 'content-type': 'application/x-www-form-urlencoded' },
          body: 'prefix=g/&permissions=delete,write&ttl=60',
        })
      ).text,
    ).access_token as string;
    await txn([
      { set: 'g/1', value: 1 },
      { set: 'h/1', value: 1 },
    ]);
    expectError(await txn([{ delete_prefix: 'g' }], { authorization: `Bearer ${token}` }), 403, 'forbidden');
    expect(JSON.parse((await txn([{ delete_prefix: 'g/' }], { authorization: `Bearer ${token}` })).text).results).toEqual([{ deleted: 1 }]);
    expect((await get('h/1')).status).toBe(200);
  });
  it("the bucket delete route is untouched: DELETE /api/v1/{bucket}/?prefix=… is still the spec's bucket delete, not a prefix delete", async () => {
    // Documented: a prefix delete only exists as a transaction operation in a JSON body.
    const other = await createBucket(server.api);
    await call(`${server.api}/${other}/k`, { method: 'POST', body: '1' });
    expect((await call(`${server.api}/${other}/`, { method: 'DELETE' })).status).toBe(204);
    expect((await call(`${server.api}/${other}/k`)).status).toBe(404);
  });
});

describe('Transaction delete_prefix: the work of a whole transaction is bounded', () => {
  const keysUnder = async (id: string, prefix: string) =>
    (
      JSON.parse(
        (await call(`${server.api}/${id}/?format=json&limit=30000&prefix=${encodeURIComponent(prefix)}`, { headers: admin })).text,
      ) as string[]
    ).length;

  it('prefix deletes that repeat or overlap are refused with a 400 naming both, before anything is deleted', async () => {
    await txn(Array.from({ length: 30 }, (_, i) => ({ set: `r/${i}`, value: i })));
    // The attack: one prefix delete a thousand times over, each one listing and deleting again.
    const repeated = await txn(Array.from({ length: 1000 }, () => ({ delete_prefix: 'r/' })));
    expectError(repeated, 400, 'bad_request');
    expect(repeated.json()).toMatchObject({
      error: { detail: expect.stringMatching(/txn\[1\]: prefix "r\/" repeats txn\[0\]'s prefix "r\/"/) },
    });
    const overlapping = await txn([{ delete_prefix: 'r/1' }, { set: 'q', value: 1 }, { delete_prefix: 'r/' }]);
    expectError(overlapping, 400, 'bad_request');
    expect(overlapping.json()).toMatchObject({
      error: { detail: expect.stringMatching(/txn\[2\]: prefix "r\/" overlaps txn\[0\]'s prefix "r\/1"/) },
    });
    expect(await keysUnder(bucket, 'r/')).toBe(30);
    expect((await get('q')).status).toBe(404);
    // Prefixes side by side are fine, and so is writing under a prefix being cleared.
    const apart = await txn([{ delete_prefix: 'r/1' }, { delete_prefix: 'r/2' }, { set: 'r/1', value: 'new' }]);
    expect(apart.status, apart.text).toBe(200);
    expect((JSON.parse(apart.text) as Results).results).toEqual([{ deleted: 11 }, { deleted: 11 }, null]);
    expect(await keysUnder(bucket, 'r/')).toBe(9);
  });

  it('the prefix deletes of one transaction remove at most 50,000 keys together; one past it is refused whole', {
    timeout: 120_000,
  }, async () => {
    const big = await createBucket(server.api, { secret_key: 'admin-secret' });
    const imported = await call(`${server.api}/${big}`, {
      method: 'POST',
      body: exportFile([...manyKeys(25_000, 'a/'), ...manyKeys(25_001, 'b/')]),
      headers: { ...admin, 'content-type': 'application/x-ndjson' },
    });
    expect(imported.status, imported.text).toBe(200);
    const both = await call(`${server.api}/${big}`, {
      method: 'POST',
      ...json({ txn: [{ delete_prefix: 'a/' }, { delete_prefix: 'b/' }] }, admin),
    });
    expectError(both, 400, 'bad_request');
    expect(both.json()).toMatchObject({ error: { detail: expect.stringContaining('txn[1]: the prefix deletes up to this one') } });
    expect(both.json()).toMatchObject({ error: { detail: expect.stringContaining('more than 50000 keys') } });
    expect(await keysUnder(big, 'a/')).toBe(25_000);
    expect(await keysUnder(big, 'b/')).toBe(25_001);
    // Each alone is within the bound.
    const one = await call(`${server.api}/${big}`, { method: 'POST', ...json({ txn: [{ delete_prefix: 'b/' }] }, admin) });
    expect((JSON.parse(one.text) as Results).results).toEqual([{ deleted: 25_001 }]);
  });
});
