import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createBucket, expectError } from '../helpers/http.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';

let server: AppServer;
let bucket: string;
beforeAll(async () => {
  server = await startAppServer();
  bucket = await createBucket(server.api);
  const put = (key: string, body: string | Uint8Array, type?: string, ttl?: string) =>
    call(`${server.api}/${bucket}/${key}?ttl=${ttl ?? '0'}`, { method: 'POST', body, headers: type ? { 'content-type': type } : {} });
  expect((await put('a-text', 'héllo', 'text/plain')).status).toBe(200);
  expect((await put('b-json', '{"x": [1, 2]}', 'application/json')).status).toBe(200);
  expect((await put('c-bytes', new Uint8Array([0, 255, 1]), 'application/octet-stream')).status).toBe(200);
  expect((await put('d-expiring', 'soon', 'text/plain', '3600')).status).toBe(200);
  expect((await call(`${server.api}/${bucket}/e-count?ttl=0`, { method: 'PATCH', body: '+7' })).status).toBe(200);
});
afterAll(async () => {
  await server.stop();
});

describe('Listing extension: ?values=true&meta=true with "rev"', () => {
  it('jsonl: one object per key with type, size in bytes, expiry (RFC 3339 or null) and the value', async () => {
    const before = Date.now();
    const res = await call(`${server.api}/${bucket}/?values=true&meta=true&format=jsonl`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/x-ndjson/);
    expect(res.text.endsWith('\n')).toBe(true);
    const rows = res.text
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(rows.map((r) => r.key)).toEqual(['a-text', 'b-json', 'c-bytes', 'd-expiring', 'e-count']);
    expect(rows[0]).toEqual({ key: 'a-text', type: 'text', size: 6, expires_at: null, rev: expect.any(Number), value: 'héllo' });
    expect(rows[1]).toMatchObject({ type: 'json', expires_at: null, value: { x: [1, 2] } });
    expect(rows[2]).toEqual({
      key: 'c-bytes',
      type: 'bytes',
      size: 3,
      expires_at: null,
      rev: expect.any(Number),
      value: Buffer.from([0, 255, 1]).toString('base64'),
    });
    expect(rows[4]).toEqual({ key: 'e-count', type: 'int64', size: 1, expires_at: null, rev: expect.any(Number), value: 7 });
    const expires = rows[3]!.expires_at as string;
    expect(expires).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(Date.parse(expires)).toBeGreaterThan(before + 3500_000);
    expect(Date.parse(expires)).toBeLessThan(Date.now() + 3601_000);
  });

  it('json: the same objects in one array; prefix, limit and reverse still apply', async () => {
    const res = await call(`${server.api}/${bucket}/?values=true&meta=true&format=json&reverse=true&limit=2`);
    expect(res.status).toBe(200);
    const rows = res.json() as Array<{ key: string; type: string }>;
    expect(rows.map((r) => [r.key, r.type])).toEqual([
      ['e-count', 'int64'],
      ['d-expiring', 'text'],
    ]);
  });

  it('without meta (or meta=false) the answer is exactly the existing [key, value] form', async () => {
    const plain = await call(`${server.api}/${bucket}/?values=true&format=jsonl&prefix=a`);
    expect(plain.text).toBe('["a-text","héllo"]\n');
    expect((await call(`${server.api}/${bucket}/?values=true&meta=false&format=jsonl&prefix=a`)).text).toBe(plain.text);
  });

  it('meta with the text format, or a meta that is not a boolean, is 400 with a reason', async () => {
    const text = await call(`${server.api}/${bucket}/?meta=true&format=text`);
    expectError(text, 400, 'bad_request');
    expect(text.headers.get('kvb-error-detail')).toContain('meta=true');
    expectError(await call(`${server.api}/${bucket}/?values=true&meta=true&format=text`), 400, 'bad_request');
    expectError(await call(`${server.api}/${bucket}/?values=true&meta=maybe&format=jsonl`), 400, 'bad_request');
  });

  it('with values, each object carries the key\'s revision ("rev"), the one its ETag names', async () => {
    const rows = (await call(`${server.api}/${bucket}/?values=true&meta=true&format=json`)).json() as Array<{ key: string; rev: number }>;
    for (const row of rows) {
      const etag = (await call(`${server.api}/${bucket}/${row.key}`)).headers.get('etag');
      expect(etag).toBe(`"${row.rev}"`);
    }
    expect(new Set(rows.map((r) => r.rev)).size).toBe(rows.length);
  });
});

describe("Listing extension: ?meta=true without values (the console's badges)", () => {
  it('jsonl and json: one object per key with type, size in bytes, expiry and revision, and no value', async () => {
    const withValues = (await call(`${server.api}/${bucket}/?values=true&meta=true&format=json`)).json() as Array<Record<string, unknown>>;
    const res = await call(`${server.api}/${bucket}/?meta=true&format=jsonl`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/x-ndjson/);
    const rows = res.text
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    // The same metadata as with values, without the value.
    expect(rows).toEqual(withValues.map(({ value: _value, ...rest }) => rest));
    expect(rows[0]).toEqual({ key: 'a-text', type: 'text', size: 6, expires_at: null, rev: expect.any(Number) });
    expect(rows[2]).toMatchObject({ key: 'c-bytes', type: 'bytes', size: 3 });
    expect(rows[3]!.expires_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(rows[4]).toMatchObject({ key: 'e-count', type: 'int64', size: 1 });
    const json = await call(`${server.api}/${bucket}/?meta=true&format=json&reverse=true&limit=2`);
    expect(json.json()).toEqual([rows[4], rows[3]]);
  });

  it('size counts bytes, not characters, for text and JSON with non-ASCII characters', async () => {
    const put = (key: string, body: string, type: string) =>
      call(`${server.api}/${bucket}/${key}?ttl=0`, { method: 'PUT', body, headers: { 'content-type': type } });
    expect((await put('f-utf8', 'ü€😀', 'text/plain')).status).toBe(200);
    expect((await put('g-json', '{"name":"Zoë"}', 'application/json')).status).toBe(200);
    const rows = (await call(`${server.api}/${bucket}/?meta=true&format=json&prefix=f`)).json() as Array<{ size: number }>;
    expect(rows.map((r) => r.size)).toEqual([Buffer.byteLength('ü€😀')]);
    const json = (await call(`${server.api}/${bucket}/?meta=true&format=json&prefix=g`)).json() as Array<{ size: number }>;
    expect(json.map((r) => r.size)).toEqual([Buffer.byteLength('{"name":"Zoë"}')]);
  });

  it('pages with cursors like any listing, every key exactly once', async () => {
    const seen: string[] = [];
    let url = `${server.api}/${bucket}/?meta=true&format=jsonl&limit=2`;
    for (let pages = 0; pages < 10; pages++) {
      const res = await call(url);
      expect(res.status).toBe(200);
      for (const line of res.text.trimEnd().split('\n')) seen.push((JSON.parse(line) as { key: string }).key);
      const next = res.headers.get('kvb-next-cursor');
      if (!next) break;
      url = `${server.api}/${bucket}/?meta=true&format=jsonl&limit=2&cursor=${encodeURIComponent(next)}`;
    }
    const all = (await call(`${server.api}/${bucket}/?format=json`)).json() as string[];
    expect(seen).toEqual(all);
  });

  it("needs read permission, as values=true does: it reveals each value's type and size", async () => {
    const secured = await createBucket(server.api, {
      secret_key: 'meta-secret',
      read_key: 'meta-reader',
      signing_key: 'meta-signing-key-0123456789',
    });
    expect((await call(`${server.api}/${secured}/notes%2Fa?ttl=0`, { method: 'PUT', body: 'x', token: 'meta-secret' })).status).toBe(200);
    const mint = async (permissions: string) => {
      const res = await call(`${server.api}/${secured}/tokens/`, {
        method: 'POST',
        token: 'meta-secret',
        body: new URLSearchParams({ prefix: 'notes/', permissions, ttl: '600' }),
      });
      expect(res.status, res.text).toBe(200);
      return (res.json() as { access_token: string }).access_token;
    };
    const list = (token: string | undefined, query: string) =>
      call(`${server.api}/${secured}/?format=json&${query}`, token ? { token } : {});
    const enumerator = await mint('enumerate');
    expect((await list(enumerator, 'meta=false')).json()).toEqual(['notes/a']);
    expectError(await list(enumerator, 'meta=true'), 403, 'forbidden');
    expectError(await list(enumerator, 'values=true'), 403, 'forbidden');
    const reader = await mint('read');
    expect((await list(reader, 'meta=true')).json()).toEqual([
      { key: 'notes/a', type: 'text', size: 1, expires_at: null, rev: expect.any(Number) },
    ]);
    expect((await list('meta-reader', 'meta=true')).status).toBe(200);
    expectError(await list(undefined, 'meta=true'), 401, 'unauthorized');
  });
});
