import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createBucket, expectError, json } from '../helpers/http.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';

let server: AppServer;
let bucket: string;
let url: (key: string) => string;

beforeAll(async () => {
  server = await startAppServer();
  bucket = await createBucket(server.api);
  url = (key) => `${server.api}/${bucket}/${key}`;
});
afterAll(async () => {
  await server.stop();
});

const patch = (key: string, delta: string, contentType?: string) =>
  call(url(key), { method: 'PATCH', body: Buffer.from(delta), headers: contentType ? { 'content-type': contentType } : {} });
const txn = (ops: unknown) => call(`${server.api}/${bucket}`, { method: 'POST', ...json({ txn: ops }) });

describe('Counter', () => {
  it('a missing key is created from the delta; 200 text/plain with Kvb-Type', async () => {
    const res = await patch('c-new', '+5');
    expect(res.status).toBe(200);
    expect(res.text).toBe('5');
    expect(res.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(res.headers.get('kvb-type')).toBe('int64');
    expect((await patch('c-new', '-7')).text).toBe('-2');
  });
  it('curl -d +1 (a form Content-Type) works', async () => {
    expect((await patch('c-form', '+1', 'application/x-www-form-urlencoded')).text).toBe('1');
  });
  it('Int64 + Int64 stays Int64 and exact near the limits; overflow is 400 at both ends', async () => {
    await call(url('c-max'), { method: 'POST', body: Buffer.from('9223372036854775806') });
    expect((await patch('c-max', '+1')).text).toBe('9223372036854775807');
    expectError(await patch('c-max', '+1'), 400, 'bad_request');
    expect((await call(url('c-max'))).text).toBe('9223372036854775807');
    await call(url('c-min'), { method: 'POST', body: Buffer.from('-9223372036854775808') });
    expectError(await patch('c-min', '-1'), 400, 'bad_request');
  });
  it('any float operand gives Float64', async () => {
    await patch('c-float', '+1');
    const res = await patch('c-float', '+0.5');
    expect(res.text).toBe('1.5');
    expect(res.headers.get('kvb-type')).toBe('float64');
    expect((await patch('c-float2', '+2.0')).text).toBe('2.0');
    expect((await patch('c-float2', '+1')).headers.get('kvb-type')).toBe('float64');
  });
  it('NaN, Inf or overflow of a float is 400', async () => {
    expectError(await patch('c-inf', '+1e400'), 400, 'bad_request');
    await patch('c-big', '+1e308');
    expectError(await patch('c-big', '+1e308'), 400, 'bad_request');
  });
  it.each(['1', '++1', '+0x10', '+NaN', '', '+ 1', '+-1', '+1.', '-Infinity'])('the delta %j is 400', async (delta) => {
    expectError(await patch('c-bad', delta), 400, 'bad_request');
  });
  it('a stored value that is not a number is 400 and unchanged', async () => {
    await call(url('c-text'), { method: 'POST', body: 'abc', headers: { 'content-type': 'text/plain' } });
    expectError(await patch('c-text', '+1'), 400, 'bad_request');
    expect((await call(url('c-text'))).text).toBe('abc');
    await call(url('c-obj'), { method: 'POST', ...json({ a: 1 }) });
    expectError(await patch('c-obj', '+1'), 400, 'bad_request');
    await call(url('c-bytes'), { method: 'POST', body: Buffer.from([0xff]) });
    expectError(await patch('c-bytes', '+1'), 400, 'bad_request');
  });
  it('a JSON value that is a number counts as that number', async () => {
    await call(url('c-json'), { method: 'POST', body: '41', headers: { 'content-type': 'application/json' } });
    const res = await patch('c-json', '+1');
    expect(res.text).toBe('42');
    expect(res.headers.get('kvb-type')).toBe('int64');
  });
  it('an update keeps the expiry; ?ttl sets a new one', async () => {
    await patch('c-ttl?ttl=100', '+1');
    const first = (await call(url('c-ttl'))).headers.get('kvb-expires-at');
    await patch('c-ttl', '+1');
    expect((await call(url('c-ttl'))).headers.get('kvb-expires-at')).toBe(first);
    await patch('c-ttl?ttl=0', '+1');
    expect((await call(url('c-ttl'))).headers.get('kvb-expires-at')).toBeNull();
  });
  it('is atomic: 200 concurrent +1 give exactly 200', async () => {
    const results = await Promise.all(Array.from({ length: 200 }, () => patch('c-concurrent', '+1')));
    expect(results.every((r) => r.status === 200)).toBe(true);
    expect((await call(url('c-concurrent'))).text).toBe('200');
    expect(new Set(results.map((r) => r.text)).size).toBe(200);
  });
});

describe('List keys', () => {
  let listBucket: string;
  const list = (query = '', headers: Record<string, string> = {}) => call(`${server.api}/${listBucket}/${query}`, { headers });
  beforeAll(async () => {
    listBucket = await createBucket(server.api);
    const keys = ['b', 'a', 'a/2', 'a/10', 'é', 'z', 'Z', 'a=b', 'line\nbreak'];
    const res = await call(`${server.api}/${listBucket}`, {
      method: 'POST',
      ...json({ txn: keys.map((k, i) => ({ set: k, value: i === 0 ? 'text value' : { i } })) }),
    });
    expect(res.status).toBe(204);
    await call(`${server.api}/${listBucket}/num`, { method: 'POST', body: Buffer.from('9223372036854775807') });
    await call(`${server.api}/${listBucket}/bin`, { method: 'POST', body: Buffer.from([0xff, 0x00]) });
  });

  it('text is one key per line in byte order, every line ending in \\n', async () => {
    const res = await list();
    expect(res.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(res.text).toBe('Z\na\na/10\na/2\na\\=b\nb\nbin\nline\\nbreak\nnum\nz\né\n');
  });
  it('json is an array of keys; jsonl one JSON string per line', async () => {
    const j = await list('?prefix=a&format=json');
    expect(j.headers.get('content-type')).toBe('application/json');
    expect(j.json()).toEqual(['a', 'a/10', 'a/2', 'a=b']);
    const l = await list('?prefix=a/&format=jsonl');
    expect(l.headers.get('content-type')).toBe('application/x-ndjson');
    expect(l.text).toBe('"a/10"\n"a/2"\n');
  });
  it('values=true gives [key, value] pairs with values by type', async () => {
    const res = await list('?values=true&format=json&prefix=b');
    expect(res.json()).toEqual([
      ['b', 'text value'],
      ['bin', Buffer.from([0xff, 0x00]).toString('base64')],
    ]);
    const num = await list('?values=1&format=json&prefix=num');
    expect(num.text).toBe('[["num",9223372036854775807]]\n');
    const jsonl = await list('?values&format=jsonl&prefix=a/');
    expect(jsonl.text).toBe('["a/10",{"i":3}]\n["a/2",{"i":2}]\n');
  });
  it('text with values is key=value, with \\, newline and = in keys escaped', async () => {
    const res = await list('?values=true&prefix=a');
    expect(res.text).toBe('a={"i":1}\na/10={"i":3}\na/2={"i":2}\na\\=b={"i":7}\n');
  });
  it('limit, skip and reverse', async () => {
    expect((await list('?format=json&limit=2')).json()).toEqual(['Z', 'a']);
    expect((await list('?format=json&limit=2&skip=2')).json()).toEqual(['a/10', 'a/2']);
    expect((await list('?format=json&reverse=true&limit=2')).json()).toEqual(['é', 'z']);
    expect((await list('?format=json&reverse&limit=1')).json()).toEqual(['é']);
    expect((await list('?format=json&reverse=0&limit=1')).json()).toEqual(['Z']);
    expect((await list('?format=json&limit=0')).json()).toEqual([]);
  });
  it.each(['limit=-1', 'limit=abc', 'skip=1.5', 'reverse=maybe', 'values=2', 'limit=1&limit=2', 'limit=1000001'])(
    '%s is 400',
    async (q) => {
      expectError(await list(`?${q}`), 400, 'bad_request');
    },
  );
  it('Accept chooses the format; ?format= wins; no Accept means text', async () => {
    expect((await list('?prefix=a/', { accept: 'application/json' })).json()).toEqual(['a/10', 'a/2']);
    expect((await list('?prefix=a/', { accept: 'application/x-ndjson' })).text).toBe('"a/10"\n"a/2"\n');
    expect((await list('?prefix=a/', { accept: 'text/plain;q=0.5, application/json' })).json()).toEqual(['a/10', 'a/2']);
    expect((await list('?prefix=a/', { accept: '*/*' })).text).toBe('a/10\na/2\n');
    expect((await list('?prefix=a/&format=jsonl', { accept: 'application/json' })).text).toBe('"a/10"\n"a/2"\n');
  });
  it('an unknown format or an Accept that rules out every format is 406', async () => {
    expectError(await list('?format=xml'), 406, 'not_acceptable');
    expectError(await list('', { accept: 'image/png' }), 406, 'not_acceptable');
  });
  it('GET /{bucket} is the policy, GET /{bucket}/ is the listing', async () => {
    const policy = await call(`${server.api}/${listBucket}`);
    expect(policy.json()).toHaveProperty('default_ttl');
    expect((await call(`${server.api}/${listBucket}/`)).text).toContain('a/10\n');
  });
  it('pages through more than 1000 keys in order, honouring limit and skip', { timeout: 20_000 }, async () => {
    const big = await createBucket(server.api);
    const keys = Array.from({ length: 2500 }, (_, i) => `k${String(i).padStart(5, '0')}`);
    for (let i = 0; i < keys.length; i += 1000) {
      const res = await call(`${server.api}/${big}`, {
        method: 'POST',
        ...json({ txn: keys.slice(i, i + 1000).map((k) => ({ set: k, value: 1 })) }),
      });
      expect(res.status).toBe(204);
    }
    const all = (await call(`${server.api}/${big}/?format=json&limit=2500`)).json() as string[];
    expect(all).toEqual(keys);
    const page = (await call(`${server.api}/${big}/?format=json&limit=1100&skip=1200`)).json() as string[];
    expect(page).toEqual(keys.slice(1200, 2300));
    const reversed = (await call(`${server.api}/${big}/?format=json&reverse=true&skip=10&limit=1500`)).json() as string[];
    expect(reversed).toEqual([...keys].reverse().slice(10, 1510));
    const lines = (await call(`${server.api}/${big}/?values=true&format=jsonl`)).text.split('\n');
    expect(lines).toHaveLength(2501);
    expect(lines[2500]).toBe('');
  });
});

describe('Transactions', () => {
  it('sets and deletes commit together: strings become text, the rest JSON as written', async () => {
    await call(url('t-old'), { method: 'POST', body: 'x' });
    const body =
      '{"txn":[{"set":"t-str","value":"hi"},{"set":"t-num","value":12345678901234567890},{"set":"t-obj","value":{ "a" : [1.10, true] }},{"set":"t-bool","value":false},{"delete":"t-old"}]}';
    const res = await call(`${server.api}/${bucket}`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(204);
    expect(res.body.length).toBe(0);
    const str = await call(url('t-str'));
    expect([str.text, str.headers.get('kvb-type')]).toEqual(['hi', 'text']);
    const num = await call(url('t-num'));
    expect([num.text, num.headers.get('kvb-type')]).toEqual(['12345678901234567890', 'json']);
    expect((await call(url('t-obj'))).text).toBe('{ "a" : [1.10, true] }');
    expect((await call(url('t-bool'))).text).toBe('false');
    expectError(await call(url('t-old')), 404, 'not_found');
  });
  it('per-operation ttl, and the bucket default otherwise', async () => {
    expect(
      (
        await txn([
          { set: 't-ttl', value: 1, ttl: 0 },
          { set: 't-default', value: 1 },
        ])
      ).status,
    ).toBe(204);
    expect((await call(url('t-ttl'))).headers.get('kvb-expires-at')).toBeNull();
    expect((await call(url('t-default'))).headers.get('kvb-expires-at')).not.toBeNull();
  });
  it.each([
    [
      'a null value',
      [
        { set: 'x1', value: 'ok' },
        { set: 'x2', value: null },
      ],
    ],
    [
      'a non-string key',
      [
        { set: 'x1', value: 1 },
        { set: 5, value: 1 },
      ],
    ],
    [
      'an empty key',
      [
        { set: 'x1', value: 1 },
        { set: '', value: 1 },
      ],
    ],
    [
      'a key over 128 bytes',
      [
        { set: 'x1', value: 1 },
        { set: 'k'.repeat(129), value: 1 },
      ],
    ],
    [
      'a value over 16 KiB',
      [
        { set: 'x1', value: 1 },
        { set: 'x2', value: 'v'.repeat(16 * 1024 + 1) },
      ],
    ],
    [
      'an unknown operation',
      [
        { set: 'x1', value: 1 },
        { put: 'x2', value: 1 },
      ],
    ],
    ['extra fields', [{ set: 'x1', value: 1, extra: 1 }]],
    [
      'a delete with a value',
      [
        { set: 'x1', value: 1 },
        { delete: 'x2', value: 1 },
      ],
    ],
    ['a missing value', [{ set: 'x1' }]],
    ['a bad ttl', [{ set: 'x1', value: 1, ttl: -1 }]],
    ['a non-object operation', [{ set: 'x1', value: 1 }, 'set']],
    ['an empty list', []],
    ['1001 operations', Array.from({ length: 1001 }, (_, i) => ({ set: `x${i}`, value: i }))],
  ])('%s rejects the whole body with 400 and changes nothing', async (_name, ops) => {
    expectError(await txn(ops), 400, 'bad_request');
    expectError(await call(url('x1')), 404, 'not_found');
  });
  it.each([
    ['not an object', '[1]'],
    ['no txn', '{}'],
    ['txn not a list', '{"txn":{}}'],
    ['other top-level fields', '{"txn":[{"set":"x1","value":1}],"more":1}'],
    ['invalid JSON', '{"txn":['],
  ])('a body that is %s is 400', async (_name, body) => {
    expectError(
      await call(`${server.api}/${bucket}`, { method: 'POST', body, headers: { 'content-type': 'application/json' } }),
      400,
      'bad_request',
    );
  });
  it('a non-JSON content type is 400', async () => {
    const body = JSON.stringify({ txn: [{ set: 'x1', value: 1 }] });
    expectError(
      await call(`${server.api}/${bucket}`, { method: 'POST', body, headers: { 'content-type': 'text/plain' } }),
      400,
      'bad_request',
    );
    expectError(await call(`${server.api}/${bucket}`, { method: 'POST', body: Buffer.from(body) }), 400, 'bad_request');
  });
  it('1000 operations commit', async () => {
    expect((await txn(Array.from({ length: 1000 }, (_, i) => ({ set: `m${i}`, value: i })))).status).toBe(204);
    expect((await call(url('m999'))).text).toBe('999');
  });
});
