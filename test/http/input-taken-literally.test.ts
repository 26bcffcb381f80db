import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AppServer, startAppServer } from '../helpers/app-server.js';
import { exportFile } from '../helpers/export-file.js';
import { call, createBucket, expectError } from '../helpers/http.js';

/** Input that cannot be stored as sent is refused with a 400, never altered and stored. */
let server: AppServer;
let bucket: string;
const admin = { authorization: 'Bearer admin' };

beforeAll(async () => {
  server = await startAppServer();
  bucket = await createBucket(server.api, { secret_key: 'admin' });
});
afterAll(async () => {
  await server?.stop();
});

const txn = (body: string | Buffer) =>
  call(`${server.api}/${bucket}`, { method: 'POST', body, headers: { ...admin, 'content-type': 'application/json' } });
const revision = async () => (await call(`${server.api}/${bucket}/`, { headers: admin })).headers.get('kvb-revision');

describe('a text value with a lone surrogate is refused, not stored as U+FFFD', () => {
  it('in a transaction, typed or not', async () => {
    const before = await revision();
    for (const body of [
      '{"txn":[{"set":"s","value":"a\\ud800b"}]}',
      '{"txn":[{"set":"s","value":"\\udc00"}]}',
      '{"txn":[{"set":"s","value":"x\\ud800","type":"text"}]}',
    ]) {
      const res = await txn(body);
      expectError(res, 400, 'bad_request');
      expect(res.json()).toMatchObject({ error: { detail: expect.stringMatching(/lone surrogate/) } });
    }
    // A surrogate pair is a character like any other; JSON keeps its escapes as written.
    expect((await txn('{"txn":[{"set":"pair","value":"\\ud83d\\ude00"},{"set":"j","value":["\\ud800"]}]}')).status).toBe(204);
    expect((await call(`${server.api}/${bucket}/pair`, { headers: admin })).text).toBe('\u{1F600}');
    expect((await call(`${server.api}/${bucket}/j`, { headers: admin })).text).toBe('["\\ud800"]');
    expect((await call(`${server.api}/${bucket}/s`, { headers: admin })).status).toBe(404);
    expect(Number(await revision())).toBe(Number(before) + 1);
  });

  it('in a transaction body that is not valid UTF-8', async () => {
    const before = await revision();
    const body = Buffer.concat([Buffer.from('{"txn":[{"set":"u","value":"'), Buffer.from([0xed, 0xa0, 0x80, 0xff]), Buffer.from('"}]}')]);
    expectError(await txn(body), 400, 'bad_request');
    expect(await revision()).toBe(before);
  });

  it('in an NDJSON import', async () => {
    const before = await revision();
    const file = exportFile([
      { key: 'ok', type: 'text', value: '"fine"' },
      { key: 'bad', type: 'text', value: '"a\\ud800b"' },
    ]);
    const res = await call(`${server.api}/${bucket}`, {
      method: 'POST',
      body: file,
      headers: { ...admin, 'content-type': 'application/x-ndjson' },
    });
    expectError(res, 400, 'bad_request');
    expect(res.json()).toMatchObject({ error: { detail: expect.stringMatching(/^line 3: .*lone surrogate/) } });
    expect(await revision()).toBe(before);
    expect((await call(`${server.api}/${bucket}/ok`, { headers: admin })).status).toBe(404);
  });
});

describe('malformed percent-encoding in a query parameter is a 400 on every route', () => {
  it('the listing, export, folder listing, rollback, key, bucket, transaction and operational routes', async () => {
    const put = await call(`${server.api}/${bucket}/%25C0%25AF/x`, { method: 'PUT', body: 'x', headers: admin });
    expect(put.status, put.text).toBe(200);
    const before = await revision();
    const requests: Array<[string, RequestInit?]> = [
      [`${server.api}/${bucket}/?prefix=%ZZ`],
      [`${server.api}/${bucket}/?prefix=%C0%AF`],
      [`${server.api}/${bucket}/?prefix=%ED%A0%80`],
      [`${server.api}/${bucket}/?format=json&delimiter=%FF`],
      [`${server.api}/${bucket}/?export=true&prefix=%ZZ`],
      [`${server.api}/${bucket}/?watch=true&prefix=%ZZ`],
      [`${server.api}/${bucket}?rollback=0&prefix=%ZZ&dry_run=true`, { method: 'POST' }],
      [`${server.api}/${bucket}/k?rev=%ZZ`],
      [`${server.api}/${bucket}/k?ttl=%C0%AF`, { method: 'PUT', body: 'x' }],
      [`${server.api}/${bucket}/k?%ZZ=1`, { method: 'DELETE' }],
      [`${server.api}/${bucket}?x=%ZZ`],
      [
        `${server.api}/${bucket}?%FF`,
        { method: 'POST', body: '{"txn":[{"set":"t","value":1}]}', headers: { 'content-type': 'application/json' } },
      ],
      [`${server.url}/health?x=%ZZ`],
    ];
    for (const [url, init] of requests) {
      const res = await call(url, { ...init, headers: { ...admin, ...(init?.headers as Record<string, string>) } });
      expectError(res, 400, 'bad_request');
      expect(res.headers.get('kvb-error-detail'), url).toMatch(/^malformed percent-encoding in query parameter /);
    }
    expect(await revision()).toBe(before);
    // Encoded once, `%25C0%25AF` is the literal text `%C0%AF`: a prefix like any other.
    const listed = await call(`${server.api}/${bucket}/?prefix=%25C0%25AF/&format=json`, { headers: admin });
    expect(listed.json()).toEqual(['%C0%AF/x']);
  });
});

describe('an unknown or misplaced query parameter is a 400 naming it', () => {
  const cases: Array<[string, string, RequestInit | undefined, string]> = [
    ['the listing', '/?actor=write', undefined, 'query parameter actor is used only with history=true'],
    ['the listing', '/?prefix=a&colour=red', undefined, 'unknown query parameter colour'],
    ['the listing', '/?since=3', undefined, 'query parameter since is used only with history=true or watch=true'],
    ['an export', '/?export=true&limit=3', undefined, 'query parameter limit cannot be used with export=true'],
    ['a watch', '/?watch=true&skip=1', undefined, 'query parameter skip cannot be used with watch=true'],
    ['a key read', '/k?actor=write', undefined, 'query parameter actor is used only with history=true'],
    ['a key read', '/k?history=true&rev=1', undefined, 'query parameter rev cannot be used with history=true'],
    ['a key read', '/k?ttl=5', undefined, 'unknown query parameter ttl'],
    ['a key set', '/k?ttl=5&tll=6', { method: 'PUT', body: 'v' }, 'unknown query parameter tll'],
    ['a counter', '/n?by=2', { method: 'PATCH', body: '+1' }, 'unknown query parameter by'],
    ['a key delete', '/k?ttl=5', { method: 'DELETE' }, 'unknown query parameter ttl'],
    ['the bucket policy', '?verbose=1', undefined, 'unknown query parameter verbose'],
    ['a bucket delete', '/?force=true', { method: 'DELETE' }, 'unknown query parameter force'],
    [
      'a transaction',
      '?atomic=1',
      { method: 'POST', body: '{"txn":[{"set":"t","value":1}]}', headers: { 'content-type': 'application/json' } },
      'unknown query parameter atomic: a POST with a body is a transaction (a rollback has no body)',
    ],
    ['a rollback', '?rollback=0&limit=1', { method: 'POST' }, 'unknown query parameter limit'],
    [
      'an import',
      '?mode=merge&dry_run=true',
      { method: 'POST', body: exportFile([]), headers: { 'content-type': 'application/x-ndjson' } },
      'unknown query parameter dry_run',
    ],
    [
      'a token mint',
      '/tokens/?ttl=5',
      { method: 'POST', body: new URLSearchParams({ prefix: 'a', permissions: 'read', ttl: '60' }) },
      'unknown query parameter ttl',
    ],
  ];
  for (const [what, path, init, detail] of cases) {
    it(`${what}: ${path}`, async () => {
      const before = await revision();
      const res = await call(`${server.api}/${bucket}${path}`, {
        ...init,
        headers: { ...admin, ...(init?.headers as Record<string, string>) },
      });
      expectError(res, 400, 'bad_request');
      expect(res.headers.get('kvb-error-detail')).toBe(detail);
      expect(await revision()).toBe(before);
    });
  }

  it('bucket creation, and credentials in the query on every route', async () => {
    const created = await call(`${server.api}/?plan=pro`, { method: 'POST', body: new URLSearchParams({ email: 'a@b.c' }) });
    expectError(created, 400, 'bad_request');
    expect(created.headers.get('kvb-error-detail')).toBe('unknown query parameter plan');
    expect((await call(`${server.api}/${bucket}/%25C0%25AF/x?access_token=admin&rev=0`)).status).toBe(404);
    expect((await call(`${server.api}/${bucket}/%25C0%25AF/x?key=admin&history=false`)).status).toBe(200);
    expect((await call(`${server.api}/${bucket}/?key=admin&export=false&format=json`)).status).toBe(200);
  });
});
