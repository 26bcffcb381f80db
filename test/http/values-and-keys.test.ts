import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createBucket, expectError } from '../helpers/http.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';
import { storedKeys } from '../helpers/server.js';
import { testClock } from '../helpers/test-clock.js';

let server: AppServer;
let bucket: string;
let url: (key: string) => string;
// The server's time: TTLs run out when a test moves it, never while a slow machine runs the file.
const clock = testClock();

beforeAll(async () => {
  server = await startAppServer({ clock: clock.now });
  bucket = await createBucket(server.api);
  url = (key) => `${server.api}/${bucket}/${key}`;
});
afterAll(async () => {
  await server.stop();
});

/** Without a content type, a string goes as bytes: fetch would otherwise label it text/plain. */
const set = (key: string, body: string | Buffer, contentType?: string, method = 'POST') =>
  call(url(key), {
    method,
    body: typeof body === 'string' ? Buffer.from(body) : body,
    headers: contentType === undefined ? {} : { 'content-type': contentType },
  });

describe('Set key: type inference in the order of evidence', () => {
  it.each([
    ['application/json wins over the number grammar', '3', 'application/json', 'json', 'application/json'],
    ['application/json with parameters', '{"a":1}', 'application/json; charset=utf-8', 'json', 'application/json'],
    ['text/plain wins over JSON', '{"a":1}', 'text/plain', 'text', 'text/plain; charset=utf-8'],
    ['text/plain with parameters', 'héllo', 'text/plain;charset=UTF-8', 'text', 'text/plain; charset=utf-8'],
    ['explicit octet-stream is bytes even for a number', '42', 'application/octet-stream', 'bytes', 'application/octet-stream'],
    [
      'a number with a form Content-Type (curl -d) is Int64',
      '42',
      'application/x-www-form-urlencoded',
      'int64',
      'text/plain; charset=utf-8',
    ],
    ['a negative number without Content-Type is Int64', '-7', undefined, 'int64', 'text/plain; charset=utf-8'],
    ['a float is Float64', '2.5', undefined, 'float64', 'text/plain; charset=utf-8'],
    ['valid JSON without a JSON Content-Type is JSON', '[1,2]', 'text/html', 'json', 'application/json'],
    ['anything else is bytes', 'hello', undefined, 'bytes', 'application/octet-stream'],
    ['a leading + is not a number', '+1', undefined, 'bytes', 'application/octet-stream'],
    ['hex is not a number', '0x10', undefined, 'bytes', 'application/octet-stream'],
    ['whitespace around a number makes it JSON, not a number', ' 1 ', undefined, 'json', 'application/json'],
  ])('%s', async (_name, body, contentType, type, expectedContentType) => {
    const key = `infer-${Math.random().toString(36).slice(2)}`;
    const res = await set(key, body, contentType);
    expect(res.status).toBe(200);
    expect(res.headers.get('kvb-type')).toBe(type);
    const read = await call(url(key));
    expect(read.status).toBe(200);
    expect(read.headers.get('content-type')).toBe(expectedContentType);
    expect(read.headers.get('kvb-type')).toBe(type);
  });

  it('Int64 is exact over the whole 64-bit range', async () => {
    for (const n of ['9223372036854775807', '-9223372036854775808']) {
      await set('int-edge', n);
      const read = await call(url('int-edge'));
      expect(read.headers.get('kvb-type')).toBe('int64');
      expect(read.text).toBe(n);
    }
  });
  it('an integer beyond Int64 is stored as JSON with every digit', async () => {
    await set('big', '9223372036854775808');
    const read = await call(url('big'));
    expect(read.headers.get('kvb-type')).toBe('json');
    expect(read.text).toBe('9223372036854775808');
  });
  it('floats read back in a form that shows they are floats', async () => {
    await set('f', '1.50');
    expect((await call(url('f'))).text).toBe('1.5');
    await set('f', '1e2');
    expect((await call(url('f'))).text).toBe('100.0');
  });
  it('JSON is stored as the exact text sent', async () => {
    const text = '{ "__proto__": 1, "n": 1.10, "big": 12345678901234567890 }';
    await set('raw-json', text, 'application/json');
    const read = await call(url('raw-json'));
    expect(read.text).toBe(text);
  });
  it('raw bytes round-trip exactly, non-UTF-8 included', async () => {
    const bytes = Buffer.from([0x00, 0xff, 0xfe, 0x80, 0x0a, 0xc3]);
    await set('bin', bytes);
    const read = await call(url('bin'));
    expect(read.headers.get('content-type')).toBe('application/octet-stream');
    expect(read.body).toEqual(bytes);
  });
  it('invalid JSON with application/json is 400', async () => {
    expectError(await set('bad-json', '{nope', 'application/json'), 400, 'bad_request');
  });
  it('invalid UTF-8 with text/plain is 400', async () => {
    expectError(await set('bad-text', Buffer.from([0xc3, 0x28]), 'text/plain'), 400, 'bad_request');
  });
  it('the set response echoes the stored value with the same headers as GET', async () => {
    const res = await set('echo', '{"a": 1}', 'application/json');
    expect(res.status).toBe(200);
    expect(res.text).toBe('{"a": 1}');
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(res.headers.get('kvb-expires-at')).toBeTruthy();
  });
  it('PUT is an alias of POST', async () => {
    const res = await set('put', 'via put', 'text/plain', 'PUT');
    expect(res.status).toBe(200);
    expect((await call(url('put'))).text).toBe('via put');
  });
  it('reading ignores Accept: a text value is returned to Accept: application/json', async () => {
    await set('accept', 'plain', 'text/plain');
    const read = await call(url('accept'), { headers: { accept: 'application/json' } });
    expect(read.status).toBe(200);
    expect(read.text).toBe('plain');
  });
});

describe('Limits: value size', () => {
  it('a value of exactly 16 KiB is stored', async () => {
    const res = await set('v16k', Buffer.alloc(16 * 1024, 0x61), 'application/octet-stream');
    expect(res.status).toBe(200);
    expect((await call(url('v16k'))).body.length).toBe(16 * 1024);
  });
  it('a value of 16 KiB + 1 byte is 400 in the envelope', async () => {
    expectError(await set('v16k1', Buffer.alloc(16 * 1024 + 1, 0x61), 'application/octet-stream'), 400, 'bad_request');
    expectError(await call(url('v16k1')), 404, 'not_found');
  });
});

describe('Keys: percent-decoding and size', () => {
  it('user%2F42 and user/42 are the same key', async () => {
    await set('user%2F42', 'same', 'text/plain');
    expect((await call(url('user/42'))).text).toBe('same');
  });
  it('decodes exactly once: %2525 is the key %25', async () => {
    await set('pct%2525', 'once', 'text/plain');
    expect((await call(url(encodeURIComponent('pct%25')))).text).toBe('once');
    const list = await call(`${server.api}/${bucket}/?prefix=pct&format=json`);
    expect(list.json()).toEqual(['pct%25']);
  });
  it('a key of 128 bytes is accepted, 129 bytes is 400 (bytes, not characters)', async () => {
    expect((await set(encodeURIComponent('k'.repeat(128)), 'x')).status).toBe(200);
    expectError(await set(encodeURIComponent('k'.repeat(129)), 'x'), 400, 'bad_request');
    expect((await set(encodeURIComponent('é'.repeat(64)), 'x')).status).toBe(200);
    expectError(await set(encodeURIComponent('é'.repeat(65)), 'x'), 400, 'bad_request');
  });
  it('malformed percent-encoding is 400', async () => {
    expectError(await call(url('bad%zz')), 400, 'bad_request');
    expectError(await call(url('bad%')), 400, 'bad_request');
  });
  it('invalid UTF-8 after decoding is 400', async () => {
    expectError(await call(url('bad%FF')), 400, 'bad_request');
  });
  it('a 10,000-byte key is 400, not 404 or 414', async () => {
    expectError(await set('k'.repeat(10_000), 'x'), 400, 'bad_request');
  });
  it('keys may contain any Unicode, NUL included', async () => {
    for (const key of ['a b', 'ünï/cødé', 'nul\u0000byte', 'emoji😀']) {
      expect((await set(encodeURIComponent(key), 'v', 'text/plain')).status).toBe(200);
      expect((await call(url(encodeURIComponent(key)))).text).toBe('v');
    }
  });
  it('the key tokens/ is reachable as tokens%2F; POST .../tokens/ is the token endpoint', async () => {
    expect((await set('tokens%2F', 'a key', 'text/plain')).status).toBe(200);
    expect((await call(url('tokens%2F'))).text).toBe('a key');
    expect((await call(url('tokens/'))).text).toBe('a key');
    const mint = await call(url('tokens/'), { method: 'POST', body: new URLSearchParams({ prefix: 'p', permissions: 'read', ttl: '60' }) });
    expectError(mint, 503, 'service_unavailable'); // the token endpoint: this bucket has no signing key
  });
  it('POST on the listing path (empty key) is 405 with Allow', async () => {
    const res = await call(`${server.api}/${bucket}/`, { method: 'POST', body: 'x' });
    expectError(res, 405, 'method_not_allowed');
    expect(res.headers.get('allow')).toBe('GET, DELETE');
  });
});

describe('Read key, HEAD and DELETE', () => {
  it('GET of an absent key is 404 not_found', async () => {
    expectError(await call(url('absent')), 404, 'not_found');
  });
  it('HEAD answers 200 with the Content-Type of GET and an empty body, 404 when absent', async () => {
    await set('head', '{"x":1}', 'application/json');
    const head = await call(url('head'), { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-type')).toBe('application/json');
    expect(head.headers.get('kvb-type')).toBe('json');
    expect(head.body.length).toBe(0);
    expect((await call(url('absent'), { method: 'HEAD' })).status).toBe(404);
  });
  it('DELETE answers 204, then 404 once the key is gone', async () => {
    await set('del', 'x');
    const first = await call(url('del'), { method: 'DELETE' });
    expect(first.status).toBe(204);
    expect(first.body.length).toBe(0);
    expectError(await call(url('del'), { method: 'DELETE' }), 404, 'not_found');
    expectError(await call(url('del')), 404, 'not_found');
  });
});

describe('TTL on set', () => {
  it('?ttl sets the expiry, shown in Kvb-Expires-At', async () => {
    const before = clock.now();
    await set('ttl?ttl=100', 'x');
    const expires = Date.parse((await call(url('ttl'))).headers.get('kvb-expires-at')!);
    expect(expires).toBeGreaterThanOrEqual(before + 99_000);
    expect(expires).toBeLessThanOrEqual(clock.now() + 101_000);
  });
  it('without ?ttl the bucket default (604800 s) applies; ttl=0 means no expiry', async () => {
    const before = clock.now();
    await set('default-ttl', 'x');
    const expires = Date.parse((await call(url('default-ttl'))).headers.get('kvb-expires-at')!);
    expect(expires).toBeGreaterThanOrEqual(before + 604_800_000 - 1000);
    await set('no-ttl?ttl=0', 'x');
    expect((await call(url('no-ttl'))).headers.get('kvb-expires-at')).toBeNull();
  });
  it('a bucket with default_ttl 0 stores keys without expiry', async () => {
    const forever = await createBucket(server.api, { default_ttl: '0' });
    await call(`${server.api}/${forever}/k`, { method: 'POST', body: 'x' });
    expect((await call(`${server.api}/${forever}/k`)).headers.get('kvb-expires-at')).toBeNull();
  });
  it.each(['-1', '1.5', 'abc', '', '1e3', '99999999999', ' 1'])('ttl=%j is 400', async (ttl) => {
    expectError(await set(`bad-ttl?ttl=${encodeURIComponent(ttl)}`, 'x'), 400, 'bad_request');
  });
  it('a set without ?ttl applies the bucket default afresh', async () => {
    await set('refresh?ttl=5', 'x');
    await set('refresh', 'y');
    const expires = Date.parse((await call(url('refresh'))).headers.get('kvb-expires-at')!);
    expect(expires).toBeGreaterThan(clock.now() + 600_000_000);
  });
});

describe('TTL expiry (short TTLs)', () => {
  // The server's clock is moved past the expiry instead of waiting for it (timers, sockets and the
  // sweeper's schedule stay real).
  const passSeconds = (seconds: number) => clock.advance(seconds * 1000);

  it('an expired key is invisible at once to GET, HEAD, list and DELETE', { timeout: 15_000 }, async () => {
    await set('expiring?ttl=1', 'x');
    await set('expiring-counter?ttl=1', '5');
    expect((await call(url('expiring'))).status).toBe(200);
    passSeconds(2.2);
    expectError(await call(url('expiring')), 404, 'not_found');
    expect((await call(url('expiring'), { method: 'HEAD' })).status).toBe(404);
    expect((await call(`${server.api}/${bucket}/?prefix=expiring&format=json`)).json()).toEqual([]);
    expectError(await call(url('expiring'), { method: 'DELETE' }), 404, 'not_found');
    // A counter on an expired key starts from the delta.
    expect((await call(url('expiring-counter'), { method: 'PATCH', body: '+1' })).text).toBe('1');
  });
  it('the background sweep deletes expired keys', { timeout: 20_000 }, async () => {
    const sweepClock = testClock();
    const sweeping = await startAppServer({ config: { sweepIntervalSeconds: 1 }, clock: sweepClock.now });
    try {
      const b = await createBucket(sweeping.api);
      await call(`${sweeping.api}/${b}/gone?ttl=1`, { method: 'POST', body: 'x' });
      await call(`${sweeping.api}/${b}/kept?ttl=0`, { method: 'POST', body: 'x' });
      sweepClock.advance(2000);
      // The next sweep (every second) removes it; the store's count includes expired rows until then.
      await expect.poll(() => sweeping.store.maintenance.countEntries(), { timeout: 15_000, interval: 100 }).toBe(1);
      await sweeping.stop({ keepData: true });
      // Read the storage directly: the expired row itself is gone.
      expect(await storedKeys(sweeping)).toEqual(['kept']);
    } finally {
      await sweeping.stop();
    }
  });
});
