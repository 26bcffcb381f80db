import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Answer, call, createBucket, expectError, json } from '../helpers/http.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';

/**
 * If-Match / If-None-Match on a write tell whether a key exists and its revision (412
 * with the current ETag), so they need read permission on the key, as a transaction's `check`
 * does. A caller who may write but not read gets exactly the 403 a check gets, and nothing changes.
 */
let server: AppServer;
let bucket: string;
let writeOnly: string;
let readWrite: string;
const url = (key: string) => `${server.api}/${bucket}/${key}`;
const bearer = (credential: string) => ({ authorization: `Bearer ${credential}` });

async function mint(permissions: string): Promise<string> {
  const res = await call(`${server.api}/${bucket}/tokens/`, {
    method: 'POST',
    headers: bearer('admin'),
    body: new URLSearchParams({ prefix: 'p/', permissions, ttl: '3600' }),
  });
  expect(res.status, res.text).toBe(200);
  return (res.json() as { access_token: string }).access_token;
}

beforeAll(async () => {
  server = await startAppServer();
  bucket = await createBucket(server.api, { secret_key: 'admin', read_key: 'reader', write_key: 'writer', signing_key: 'sign' });
  expect((await call(url('p/k'), { method: 'PUT', body: '1', headers: bearer('admin') })).status).toBe(200);
  writeOnly = await mint('write,delete');
  readWrite = await mint('read,write,delete');
});
afterAll(async () => {
  await server.stop();
});

/** The answer a transaction `check` of `p/k` gets from a credential. */
const checkAnswer = (credential: string) =>
  call(`${server.api}/${bucket}`, { method: 'POST', ...json({ txn: [{ check: 'p/k', exists: true }] }, bearer(credential)) });

function expectSameRefusal(answer: Answer, check: Answer): void {
  expectError(answer, 403, 'forbidden');
  expect(answer.status).toBe(check.status);
  expect(answer.json()).toEqual(check.json());
  expect(answer.headers.get('etag')).toBeNull();
  expect(answer.headers.get('kvb-revision')).toBeNull();
}

describe('Conditional writes need read permission, as transaction checks do', () => {
  it('a write-only token gets the 403 a check gets, on PUT, POST, DELETE and PATCH, with either header, and nothing is written', async () => {
    const check = await checkAnswer(writeOnly);
    expectError(check, 403, 'forbidden');
    const cases: Array<[string, string, Record<string, string>]> = [
      ['PUT', '2', { 'if-none-match': '*' }],
      ['PUT', '2', { 'if-match': '"1"' }],
      ['PUT', '2', { 'if-match': '*' }],
      ['POST', '2', { 'if-match': '"999"' }],
      ['PATCH', '+1', { 'if-match': '"1"' }],
      ['DELETE', '', { 'if-match': '"1"' }],
      ['DELETE', '', { 'if-none-match': '"7"' }],
    ];
    for (const [method, body, headers] of cases) {
      const answer = await call(url('p/k'), { method, ...(body && { body }), headers: { ...headers, ...bearer(writeOnly) } });
      expectSameRefusal(answer, check);
    }
    // An absent key answers the same: existence is not revealed either.
    expectSameRefusal(
      await call(url('p/absent'), { method: 'PUT', body: 'x', headers: { 'if-none-match': '*', ...bearer(writeOnly) } }),
      check,
    );
    const stored = await call(url('p/k'), { headers: bearer('reader') });
    expect([stored.text, stored.headers.get('etag')]).toEqual(['1', '"1"']);
    // Unconditional writes still work for it.
    expect((await call(url('p/k2'), { method: 'PUT', body: 'v', headers: bearer(writeOnly) })).status).toBe(200);
  });

  it('the bucket write_key (when the bucket has a read_key) is refused alike; read+write credentials get 412 with the ETag', async () => {
    expectSameRefusal(
      await call(url('p/k'), { method: 'PUT', body: '2', headers: { 'if-none-match': '*', ...bearer('writer') } }),
      await checkAnswer('writer'),
    );
    for (const credential of [readWrite, 'admin']) {
      const refused = await call(url('p/k'), { method: 'PUT', body: '2', headers: { 'if-none-match': '*', ...bearer(credential) } });
      expectError(refused, 412, 'precondition_failed');
      expect(refused.headers.get('etag')).toBe('"1"');
    }
    const done = await call(url('p/k'), { method: 'PUT', body: '3', headers: { 'if-match': '"1"', ...bearer(readWrite) } });
    expect(done.status).toBe(200);
  });

  it('on an anonymous-write bucket with a read_key, an anonymous conditional write gets 401 like an anonymous check', async () => {
    const open = await createBucket(server.api, { read_key: 'r2' });
    const anon = await call(`${server.api}/${open}/k`, { method: 'PUT', body: 'x', headers: { 'if-none-match': '*' } });
    const check = await call(`${server.api}/${open}`, { method: 'POST', ...json({ txn: [{ check: 'k', exists: false }] }) });
    expectError(anon, 401, 'unauthorized');
    expect(anon.json()).toEqual(check.json());
    expect((await call(`${server.api}/${open}/k`, { method: 'PUT', body: 'x' })).status).toBe(200);
  });
});
