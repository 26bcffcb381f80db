import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBucket } from '../helpers/http.js';
import { rawSocket, readUntilEnd } from '../helpers/raw-socket.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';

/**
 * The answers whose headers come from the entry (GET, HEAD, SET, counter, 304)
 * are assembled from strings prepared once per entry, and `X-Content-Type-Options` is added where
 * Node writes the header block rather than set ahead of it. These tests pin every header line of
 * those answers, byte for byte, so such work cannot change what a client receives. Only a
 * generated request id and the date vary between runs; they are checked for their form.
 */
let server: AppServer;
let bucket: string;

beforeAll(async () => {
  server = await startAppServer();
  bucket = await createBucket(server.api, { secret_key: 'admin', default_ttl: '0' });
});
afterAll(async () => {
  await server.stop();
});

interface RawAnswer {
  status: string;
  /** Header lines as sent, in the order sent; Date is checked here and left out, a generated request id shows as `(generated)`. */
  lines: string[];
  body: string;
}

/** Sends one request on a fresh connection and returns the answer's raw header lines. */
async function raw(method: string, path: string, headers: Record<string, string> = {}, body = ''): Promise<RawAnswer> {
  const socket = await rawSocket(server);
  const head = [
    `${method} /api/v1/${bucket}/${path} HTTP/1.1`,
    'Host: kvb.test',
    'Connection: close',
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
  ];
  if (body !== '' || method === 'PUT' || method === 'POST' || method === 'PATCH') head.push(`Content-Length: ${Buffer.byteLength(body)}`);
  socket.write(`${head.join('\r\n')}\r\n\r\n${body}`);
  const text = await readUntilEnd(socket);
  socket.destroy();
  const end = text.indexOf('\r\n\r\n');
  const [status, ...all] = text.slice(0, end).split('\r\n');
  const lines: string[] = [];
  for (const line of all) {
    if (/^x-request-id: [0-9a-f-]{36}$/.test(line)) lines.push('x-request-id: (generated)');
    else if (/^Date: /.test(line)) expect(line).toMatch(/^Date: \w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT$/);
    else lines.push(line);
  }
  return { status: status!, lines, body: text.slice(end + 4) };
}

const auth = { Authorization: 'Bearer admin' };
const sorted = (lines: string[]) => [...lines].sort();

describe('answer headers, byte for byte', () => {
  it('GET of a text value with an expiry: from the store, then from the cache, and HEAD', async () => {
    const set = await raw('PUT', 'h/text?ttl=3600', { ...auth, 'Content-Type': 'text/plain' }, 'hello');
    expect(set.status).toBe('HTTP/1.1 200 OK');
    const expires = set.lines.find((l) => l.startsWith('kvb-expires-at: '))!;
    expect(expires).toMatch(/^kvb-expires-at: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    const revision = /^etag: "(\d+)"$/m.exec(set.lines.join('\n'))![1]!;
    const expected = [
      'x-content-type-options: nosniff',
      'vary: Origin',
      'content-type: text/plain; charset=utf-8',
      'kvb-type: text',
      `etag: "${revision}"`,
      `kvb-revision: ${revision}`,
      expires,
      'content-length: 5',
      'Connection: close',
    ];
    expect(sorted(set.lines)).toEqual(sorted(expected));
    expect(set.body).toBe('hello');
    for (let i = 0; i < 3; i++) {
      const got = await raw('GET', 'h/text', auth);
      expect(got.status).toBe('HTTP/1.1 200 OK');
      expect(sorted(got.lines)).toEqual(sorted(expected));
      expect(got.body).toBe('hello');
    }
    const head = await raw('HEAD', 'h/text', auth);
    expect(head.status).toBe('HTTP/1.1 200 OK');
    // HEAD answers as kvb always has: the GET's headers without Content-Length.
    expect(sorted(head.lines)).toEqual(sorted(expected.filter((l) => !l.startsWith('content-length'))));
    expect(head.body).toBe('');
    const notModified = await raw('GET', 'h/text', { ...auth, 'If-None-Match': `"${revision}"` });
    expect(notModified.status).toBe('HTTP/1.1 304 Not Modified');
    expect(sorted(notModified.lines)).toEqual(
      sorted(['x-content-type-options: nosniff', 'vary: Origin', `etag: "${revision}"`, `kvb-revision: ${revision}`, 'Connection: close']),
    );
  });

  it('every value type without an expiry, the counter, and a browser’s cross-origin GET', async () => {
    const types: Array<[string, string, string, string]> = [
      ['h/int', '42', 'int64', 'text/plain; charset=utf-8'],
      ['h/float', '1.5', 'float64', 'text/plain; charset=utf-8'],
      ['h/json', '{"a":1}', 'json', 'application/json'],
    ];
    for (const [key, body, type, contentType] of types) {
      // Without a Content-Type the value's type is inferred (the spec's rule).
      const set = await raw('PUT', key, type === 'json' ? { ...auth, 'Content-Type': 'application/json' } : auth, body);
      const revision = /^kvb-revision: (\d+)$/m.exec(set.lines.join('\n'))![1]!;
      const expected = [
        'x-content-type-options: nosniff',
        'vary: Origin',
        `content-type: ${contentType}`,
        `kvb-type: ${type}`,
        `etag: "${revision}"`,
        `kvb-revision: ${revision}`,
        `content-length: ${body.length}`,
        'Connection: close',
      ];
      expect(sorted(set.lines), key).toEqual(sorted(expected));
      expect(sorted((await raw('GET', key, auth)).lines), key).toEqual(sorted(expected));
    }
    const bytes = await raw('PUT', 'h/bytes', { ...auth, 'Content-Type': 'application/octet-stream' }, 'ab');
    const revision = /^kvb-revision: (\d+)$/m.exec(bytes.lines.join('\n'))![1]!;
    expect(sorted((await raw('GET', 'h/bytes', auth)).lines)).toEqual(
      sorted([
        'x-content-type-options: nosniff',
        'vary: Origin',
        'content-type: application/octet-stream',
        'kvb-type: bytes',
        `etag: "${revision}"`,
        `kvb-revision: ${revision}`,
        'content-length: 2',
        'Connection: close',
      ]),
    );

    const counter = await raw('PATCH', 'h/int', auth, '+8');
    const counted = /^kvb-revision: (\d+)$/m.exec(counter.lines.join('\n'))![1]!;
    expect(counter.body).toBe('50');
    expect(sorted(counter.lines)).toEqual(
      sorted([
        'x-content-type-options: nosniff',
        'vary: Origin',
        'content-type: text/plain; charset=utf-8',
        'kvb-type: int64',
        `etag: "${counted}"`,
        `kvb-revision: ${counted}`,
        'content-length: 2',
        'Connection: close',
      ]),
    );

    const browser = await raw('GET', 'h/int', { ...auth, Origin: 'https://app.example' });
    const exposed = browser.lines.find((l) => l.startsWith('access-control-expose-headers: '))!;
    expect(exposed).toMatch(/Kvb-Type/);
    expect(sorted(browser.lines)).toEqual(
      sorted([
        'x-content-type-options: nosniff',
        'vary: Origin',
        'access-control-allow-origin: *',
        exposed,
        'content-type: text/plain; charset=utf-8',
        'kvb-type: int64',
        `etag: "${counted}"`,
        `kvb-revision: ${counted}`,
        'content-length: 2',
        'Connection: close',
      ]),
    );
  });

  it('X-Request-Id comes back only when the request sent one (its own when short and plain), and on every error answer', async () => {
    await raw('PUT', 'h/traced', auth, 'v');
    const ids = async (headers: Record<string, string>, path = 'h/traced') =>
      (await raw('GET', path, { ...auth, ...headers })).lines.filter((l) => l.startsWith('x-request-id: '));
    expect(await ids({})).toEqual([]);
    expect(await ids({ 'X-Request-Id': 'trace-abc.123' })).toEqual(['x-request-id: trace-abc.123']);
    expect(await ids({ 'X-Request-Id': 'not plain' })).toEqual(['x-request-id: (generated)']);
    expect(await ids({ 'X-Request-Id': '' })).toEqual(['x-request-id: (generated)']);
    expect(await ids({}, 'h/absent')).toEqual(['x-request-id: (generated)']);
    expect(await ids({ 'X-Request-Id': 'trace-404' }, 'h/absent')).toEqual(['x-request-id: trace-404']);
  });

  it('an error answer and a streamed watch also say nosniff', async () => {
    const missing = await raw('GET', 'h/none', auth);
    expect(missing.status).toBe('HTTP/1.1 404 Not Found');
    expect(missing.lines).toContain('x-content-type-options: nosniff');
    expect(missing.lines).toContain('kvb-error-detail: no such key');
    expect(missing.lines).toContain('x-request-id: (generated)');
    const socket = await rawSocket(server);
    const watch = await new Promise<string>((resolve, reject) => {
      socket.write(`GET /api/v1/${bucket}/?watch=true HTTP/1.1\r\nHost: kvb.test\r\nAuthorization: Bearer admin\r\n\r\n`);
      let text = '';
      socket.on('data', (c: Buffer) => {
        text += c.toString('latin1');
        if (text.includes('\r\n\r\n')) {
          socket.destroy();
          resolve(text.slice(0, text.indexOf('\r\n\r\n')));
        }
      });
      socket.on('error', reject);
    });
    expect(watch).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(watch.toLowerCase()).toContain('x-content-type-options: nosniff');
  });
});
