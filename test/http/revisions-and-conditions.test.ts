import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Answer, call, createBucket, expectError, json } from '../helpers/http.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';
import { testClock } from '../helpers/test-clock.js';

/** Revisions, ETags, conditional requests and transaction checks, over real HTTP on every backend. */
let server: AppServer;
// The server's time: a TTL runs out when a test moves it on.
const clock = testClock();

beforeAll(async () => {
  server = await startAppServer({ clock: clock.now });
});
afterAll(async () => {
  await server.stop();
});

/** A fresh bucket and helpers bound to it. */
async function fresh(fields: Record<string, string> = {}) {
  const bucket = await createBucket(server.api, fields);
  const url = (key: string) => `${server.api}/${bucket}/${key}`;
  return {
    bucket,
    url,
    put: (key: string, body: string, headers: Record<string, string> = {}) => call(url(key), { method: 'PUT', body, headers }),
    patch: (key: string, delta: string, headers: Record<string, string> = {}) => call(url(key), { method: 'PATCH', body: delta, headers }),
    del: (key: string, headers: Record<string, string> = {}) => call(url(key), { method: 'DELETE', headers }),
    get: (key: string, headers: Record<string, string> = {}) => call(url(key), { headers }),
    txn: (ops: unknown, headers: Record<string, string> = {}) =>
      call(`${server.api}/${bucket}`, { method: 'POST', ...json({ txn: ops }, headers) }),
  };
}

const revision = (answer: Answer) => Number(answer.headers.get('kvb-revision'));

describe('Revisions', () => {
  it('GET, HEAD, set and counter answer ETag "<rev>" and Kvb-Revision; DELETE and transactions answer the commit revision', async () => {
    const b = await fresh();
    const set = await b.put('k', 'v1');
    expect(set.status).toBe(200);
    expect(set.headers.get('etag')).toBe('"1"');
    expect(set.headers.get('kvb-revision')).toBe('1');
    expect(set.text).toBe('v1');
    const got = await b.get('k');
    expect([got.headers.get('etag'), got.headers.get('kvb-revision')]).toEqual(['"1"', '1']);
    const head = await call(b.url('k'), { method: 'HEAD' });
    expect([head.status, head.headers.get('etag'), head.headers.get('kvb-revision')]).toEqual([200, '"1"', '1']);
    const counter = await b.patch('n', '+1');
    expect([counter.text, counter.headers.get('etag'), counter.headers.get('kvb-revision')]).toEqual(['1', '"2"', '2']);
    const txn = await b.txn([
      { set: 'a', value: 'x' },
      { set: 'c', value: 'y' },
    ]);
    expect([txn.status, txn.headers.get('kvb-revision')]).toEqual([204, '3']);
    // One revision for the whole transaction: both keys carry it.
    expect((await b.get('a')).headers.get('etag')).toBe('"3"');
    expect((await b.get('c')).headers.get('etag')).toBe('"3"');
    const del = await b.del('a');
    expect([del.status, del.headers.get('kvb-revision')]).toEqual([204, '4']);
    // The untouched key keeps the revision of its last change.
    expect((await b.get('k')).headers.get('etag')).toBe('"1"');
  });

  it('listing and the bucket policy answer Kvb-Revision with the bucket revision; bodies are unchanged', async () => {
    const b = await fresh({ secret_key: 'admin' });
    const admin = { authorization: 'Bearer admin' };
    expect(revision(await call(`${server.api}/${b.bucket}/?format=json`, { headers: admin }))).toBe(0);
    await b.put('x', '1', admin);
    await b.put('y', '2', admin);
    const list = await call(`${server.api}/${b.bucket}/?format=json`, { headers: admin });
    expect(list.json()).toEqual(['x', 'y']);
    expect(revision(list)).toBe(2);
    const policy = await call(`${server.api}/${b.bucket}`, { headers: admin });
    expect(policy.status).toBe(200);
    expect(revision(policy)).toBe(2);
    expect(Object.keys(policy.json() as object)).not.toContain('revision');
  });

  it('a refused write, a failed counter and a 404 delete change no revision', async () => {
    const b = await fresh();
    await b.put('t', 'text');
    expectError(await b.patch('t', '+1'), 400, 'bad_request');
    expectError(await b.del('missing'), 404, 'not_found');
    expectError(await b.put('t', 'no', { 'if-match': '"9"' }), 412, 'precondition_failed');
    expect((await b.put('u', 'x')).headers.get('etag')).toBe('"2"');
  });

  it('CORS exposes the new headers and allows the condition headers', async () => {
    const preflight = await call(`${server.api}/b/k`, {
      method: 'OPTIONS',
      headers: { origin: 'https://app.example', 'access-control-request-method': 'PUT', 'access-control-request-headers': 'if-match' },
    });
    expect(preflight.headers.get('access-control-allow-headers')?.toLowerCase()).toContain('if-match');
    expect(preflight.headers.get('access-control-allow-headers')?.toLowerCase()).toContain('if-none-match');
    const b = await fresh();
    const answer = await call(b.url('k'), { method: 'PUT', body: 'x', headers: { origin: 'https://app.example' } });
    const exposed = answer.headers.get('access-control-expose-headers')?.toLowerCase() ?? '';
    for (const header of ['etag', 'kvb-revision', 'kvb-failed-checks']) expect(exposed).toContain(header);
  });
});

describe('Conditional writes (If-Match / If-None-Match)', () => {
  it('If-Match: "<rev>" applies only at that revision; otherwise 412 with the current ETag and nothing written', async () => {
    const b = await fresh();
    await b.put('k', 'v1');
    const ok = await b.put('k', 'v2', { 'if-match': '"1"' });
    expect([ok.status, ok.headers.get('etag')]).toEqual([200, '"2"']);
    const stale = await b.put('k', 'v3', { 'if-match': '"1"' });
    expectError(stale, 412, 'precondition_failed');
    expect(stale.headers.get('etag')).toBe('"2"');
    expect(stale.headers.get('kvb-type')).toBeNull();
    expect((await b.get('k')).text).toBe('v2');
    // A list matches any of its tags.
    expect((await b.put('k', 'v3', { 'if-match': '"7", "2"' })).status).toBe(200);
  });

  it('If-Match: * needs a live key; If-None-Match: * creates only (an expired key counts as absent)', async () => {
    const b = await fresh();
    const missing = await b.put('k', 'v', { 'if-match': '*' });
    expectError(missing, 412, 'precondition_failed');
    expect(missing.headers.get('etag')).toBeNull();
    expect((await b.get('k')).status).toBe(404);
    const created = await b.put('k', 'v1', { 'if-none-match': '*' });
    expect([created.status, created.headers.get('etag')]).toEqual([200, '"1"']);
    const again = await b.put('k', 'v2', { 'if-none-match': '*' });
    expectError(again, 412, 'precondition_failed');
    expect(again.headers.get('etag')).toBe('"1"');
    expect((await b.put('k', 'v2', { 'if-match': '*' })).status).toBe(200);
    await call(`${b.url('short')}?ttl=1`, { method: 'PUT', body: 'x' });
    clock.advance(1000);
    expect((await b.put('short', 'y', { 'if-none-match': '*' })).status).toBe(200);
  });

  it('a weak validator never satisfies a write (strong comparison) but matches on GET (weak comparison)', async () => {
    const b = await fresh();
    await b.put('k', 'v');
    expectError(await b.put('k', 'w', { 'if-match': 'W/"1"' }), 412, 'precondition_failed');
    expect((await b.get('k', { 'if-none-match': 'W/"1"' })).status).toBe(304);
  });

  it('counter and DELETE honour the same conditions', async () => {
    const b = await fresh();
    expectError(await b.patch('n', '+1', { 'if-match': '*' }), 412, 'precondition_failed');
    expect((await b.patch('n', '+1', { 'if-none-match': '*' })).text).toBe('1');
    const stale = await b.patch('n', '+1', { 'if-match': '"5"' });
    expectError(stale, 412, 'precondition_failed');
    expect(stale.headers.get('etag')).toBe('"1"');
    expect((await b.patch('n', '+1', { 'if-match': '"1"' })).text).toBe('2');
    expectError(await b.del('n', { 'if-match': '"1"' }), 412, 'precondition_failed');
    expect((await b.get('n')).text).toBe('2');
    const del = await b.del('n', { 'if-match': '"2"' });
    expect([del.status, del.headers.get('kvb-revision')]).toEqual([204, '3']);
    expectError(await b.del('n', { 'if-match': '*' }), 412, 'precondition_failed');
  });

  it('a malformed condition header is 400 and writes nothing', async () => {
    const b = await fresh();
    for (const bad of ['1', '"1', 'W/1', '"1" "2"', '**', 'W/*']) {
      expectError(await b.put('k', 'v', { 'if-match': bad }), 400, 'bad_request');
      expectError(await b.put('k', 'v', { 'if-none-match': bad }), 400, 'bad_request');
      expectError(await b.get('k', { 'if-none-match': bad }), 400, 'bad_request');
    }
    expect((await b.get('k')).status).toBe(404);
  });
});

describe('Conditional reads', () => {
  it('GET and HEAD with If-None-Match listing the live revision: 304, the ETag, no body', async () => {
    const b = await fresh();
    await b.put('k', 'hello');
    const notModified = await b.get('k', { 'if-none-match': '"9", "1"' });
    expect([notModified.status, notModified.headers.get('etag'), notModified.body.length]).toEqual([304, '"1"', 0]);
    expect((await call(b.url('k'), { method: 'HEAD', headers: { 'if-none-match': '"1"' } })).status).toBe(304);
    expect((await b.get('k', { 'if-none-match': '*' })).status).toBe(304);
    const changed = await b.get('k', { 'if-none-match': '"0"' });
    expect([changed.status, changed.text]).toEqual([200, 'hello']);
    // An absent key is still the spec's 404.
    expectError(await b.get('nope', { 'if-none-match': '"1"' }), 404, 'not_found');
  });
});

describe('Transaction checks', () => {
  it('{"check":K,"rev":N} and {"check":K,"exists":bool} gate the writes; failures answer 409 with their indices and write nothing', async () => {
    const b = await fresh();
    await b.put('x', '1');
    const failing = await b.txn([
      { check: 'x', rev: 1 },
      { set: 'y', value: 'new' },
      { check: 'x', rev: 2 },
      { delete: 'x' },
      { check: 'z', exists: true },
      { check: 'y', exists: false },
    ]);
    expectError(failing, 409, 'conflict');
    expect(failing.headers.get('kvb-failed-checks')).toBe('2,4');
    expect((await b.get('y')).status).toBe(404);
    expect((await b.get('x')).text).toBe('1');
    const passing = await b.txn([{ check: 'x', rev: 1 }, { check: 'y', exists: false }, { set: 'y', value: 'new' }, { delete: 'x' }]);
    expect([passing.status, passing.headers.get('kvb-revision')]).toEqual([204, '2']);
    expect((await b.get('y')).text).toBe('new');
  });

  it('checks count toward the 1,000-operation limit and are validated like other operations', async () => {
    const b = await fresh();
    const tooMany = [...Array.from({ length: 1000 }, (_, i) => ({ set: `k${i}`, value: 'x' })), { check: 'k0', exists: false }];
    expectError(await b.txn(tooMany), 400, 'bad_request');
    for (const bad of [
      { check: 'k' },
      { check: 'k', rev: 1, exists: true },
      { check: 'k', rev: -1 },
      { check: 'k', rev: 1.5 },
      { check: 'k', exists: 'yes' },
      { check: 'k', rev: 1, x: 1 },
    ]) {
      expectError(await b.txn([bad]), 400, 'bad_request');
    }
  });

  it('a token needs read on a checked key', async () => {
    const b = await fresh({ secret_key: 'admin', signing_key: 'sign' });
    const mint = await call(`${server.api}/${b.bucket}/tokens/`, {
      method: 'POST',
      headers: { authorization: 'Bearer admin' },
      body: new URLSearchParams({ prefix: 'w/', permissions: 'write', ttl: '600' }),
    });
    const token = (mint.json() as { access_token: string }).access_token;
    const auth = { authorization: `Bearer ${token}` };
    expect((await b.txn([{ set: 'w/a', value: 'x' }], auth)).status).toBe(204);
    expectError(
      await b.txn(
        [
          { check: 'w/a', exists: true },
          { set: 'w/b', value: 'x' },
        ],
        auth,
      ),
      403,
      'forbidden',
    );
  });
});

describe('Linearizability under contention', () => {
  it('16 clients doing GET + If-Match write of value+1, retrying on 412: final value = acknowledged writes, no revision acknowledged twice', {
    timeout: 60_000,
  }, async () => {
    const b = await fresh();
    await b.put('n', '0');
    const acknowledged: number[] = [];
    const perClient = 3;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        for (let done = 0; done < perClient; ) {
          const read = await b.get('n');
          const answer = await b.put('n', String(Number(read.text) + 1), { 'if-match': read.headers.get('etag')! });
          if (answer.status === 412) continue;
          expect(answer.status, answer.text).toBe(200);
          acknowledged.push(revision(answer));
          done++;
        }
      }),
    );
    expect(Number((await b.get('n')).text)).toBe(16 * perClient);
    expect(new Set(acknowledged).size).toBe(acknowledged.length);
  });

  it('transfers between two keys with checks on both keep the sum constant', { timeout: 60_000 }, async () => {
    const b = await fresh();
    await b.txn([
      { set: 'a', value: 1000 },
      { set: 'b', value: 1000 },
    ]);
    let moved = 0;
    await Promise.all(
      Array.from({ length: 12 }, async (_, client) => {
        for (let done = 0; done < 3; ) {
          const [a, c] = await Promise.all([b.get('a'), b.get('b')]);
          const amount = (client % 5) + 1;
          const answer = await b.txn([
            { check: 'a', rev: Number(a.headers.get('kvb-revision')) },
            { check: 'b', rev: Number(c.headers.get('kvb-revision')) },
            { set: 'a', value: Number(a.text) - amount },
            { set: 'b', value: Number(c.text) + amount },
          ]);
          if (answer.status === 409) continue;
          expect(answer.status, answer.text).toBe(204);
          moved += amount;
          done++;
        }
      }),
    );
    const [a, c] = await Promise.all([b.get('a'), b.get('b')]);
    expect(Number(a.text) + Number(c.text)).toBe(2000);
    expect(Number(a.text)).toBe(1000 - moved);
  });
});

describe('Deleting a bucket while writes are in flight', () => {
  it('every write is either acknowledged before the delete or answered 404; no entry outlives the bucket', {
    timeout: 60_000,
  }, async () => {
    for (let round = 0; round < 5; round++) {
      const b = await fresh();
      const writes = Array.from({ length: 60 }, (_, i) =>
        i % 4 === 0 ? b.txn([{ set: `t${i}`, value: 'x' }]) : i % 4 === 1 ? b.patch(`c${i}`, '+1') : b.put(`k${i}`, 'x'),
      );
      const deletion = call(`${server.api}/${b.bucket}`, { method: 'DELETE' });
      const answers = await Promise.all(writes);
      expect((await deletion).status).toBe(204);
      for (const answer of answers) expect([200, 204, 404], answer.text).toContain(answer.status);
      // The bucket is gone, and so is every key of it, acknowledged or not.
      expect((await b.get('k2')).status).toBe(404);
      const recreatedRead = await call(`${server.api}/${b.bucket}/?format=json`);
      expect(recreatedRead.status).toBe(404);
    }
  });
});

describe('OpenAPI document', () => {
  it('describes the condition headers, ETag and Kvb-Revision, and the 304, 409 and 412 answers', async () => {
    const doc = (await call(`${server.url}/api-docs/openapi.json`)).json() as {
      paths: Record<
        string,
        Record<
          string,
          { parameters?: Array<{ name: string; in: string }>; responses: Record<string, { headers?: Record<string, unknown> }> }
        >
      >;
    };
    const key = doc.paths['/api/v1/{bucket}/{key}']!;
    const headerParams = (method: string) =>
      key[method]!.parameters!.filter((p) => p.in === 'header')
        .map((p) => p.name)
        .sort();
    for (const method of ['post', 'put', 'patch', 'delete']) expect(headerParams(method)).toEqual(['if-match', 'if-none-match']);
    // A read may also ask for the key's create revision (a lock's fencing token).
    expect(headerParams('get')).toEqual(['if-match', 'if-none-match', 'kvb-include']);
    expect(Object.keys(key.get!.responses['200']!.headers!)).toContain('Kvb-Create-Revision');
    for (const method of ['post', 'put', 'patch', 'delete', 'get']) expect(Object.keys(key[method]!.responses)).toContain('412');
    expect(Object.keys(key.get!.responses)).toContain('304');
    expect(Object.keys(key.get!.responses['200']!.headers!)).toEqual(expect.arrayContaining(['ETag', 'Kvb-Revision']));
    expect(Object.keys(key.delete!.responses['204']!.headers!)).toContain('Kvb-Revision');
    const txn = doc.paths['/api/v1/{bucket}']!.post!;
    expect(Object.keys(txn.responses['409']!.headers!)).toContain('Kvb-Failed-Checks');
    expect(Object.keys(doc.paths['/api/v1/{bucket}/']!.get!.responses['200']!.headers!)).toContain('Kvb-Revision');
  });
});
