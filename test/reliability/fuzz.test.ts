import { connect } from 'node:net';
import { readFileSync } from 'node:fs';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningServer, startServer } from '../helpers/server.js';

/**
 * Seeded fuzzing of every input surface. Whatever the input: no 5xx, no dropped connection,
 * every error in the spec's envelope, and the server still healthy after each batch.
 * Set KVB_FUZZ_SEED to replay a run.
 */
const SEED = Number(process.env.KVB_FUZZ_SEED ?? 20261122);
// 429: 25 unseen credentials at once pass the bound on slow credential checks.
const MESSAGES = ['bad_request', 'unauthorized', 'forbidden', 'not_found', 'method_not_allowed', 'not_acceptable', 'too_many_requests'];

function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(items: readonly T[]): T => items[int(items.length)]!;
  const bytes = (n: number) => Buffer.from(Array.from({ length: n }, () => int(256)));
  const ascii = (n: number) => Array.from({ length: n }, () => String.fromCharCode(32 + int(95))).join('');
  return { next, int, pick, bytes, ascii };
}

interface Sent {
  method: string;
  path: string;
  body?: string | Buffer;
  headers?: Record<string, string>;
}

// Generous per-test time: on a loaded shared machine a batch of a few hundred requests can take a while.
describe(`fuzz (seed ${SEED})`, { timeout: 90_000 }, () => {
  let server: RunningServer;
  let bucket: string;
  const secret = 'fuzz-secret-key';
  const signingKey = 'fuzz-signing-key';
  const rnd = prng(SEED);
  let failures: string[] = [];

  beforeAll(async () => {
    server = await startServer();
    const res = await fetch(`${server.api}/`, {
      method: 'POST',
      body: new URLSearchParams({ email: 'fuzz@test', secret_key: secret, signing_key: signingKey }),
    });
    bucket = await res.text();
  });
  afterAll(async () => {
    await server.stop();
  });

  async function send(r: Sent): Promise<void> {
    const what = `${r.method} ${r.path.slice(0, 120)}`;
    let res: Response;
    try {
      res = await fetch(`${server.url}${r.path}`, { method: r.method, body: r.body, headers: r.headers });
    } catch (err) {
      failures.push(`${what}: connection failed (${(err as Error).message})`);
      return;
    }
    const text = await res.text();
    if (res.status >= 500) failures.push(`${what}: ${res.status} ${text}`);
    else if (res.status >= 400 && r.method !== 'HEAD') {
      try {
        const body = JSON.parse(text) as { error?: { code?: number; message?: string } };
        if (body.error?.code !== res.status || !MESSAGES.includes(body.error?.message ?? '') || Object.keys(body).length !== 1) {
          failures.push(`${what}: not the envelope: ${text}`);
        }
      } catch {
        failures.push(`${what}: ${res.status} body is not JSON: ${text.slice(0, 80)}`);
      }
    }
  }

  async function batch(name: string, requests: Sent[]) {
    failures = [];
    for (let i = 0; i < requests.length; i += 25) await Promise.all(requests.slice(i, i + 25).map(send));
    expect(failures, name).toEqual([]);
    expect((await fetch(`${server.url}/health`)).status, `health after ${name}`).toBe(200);
  }

  const auth = () => ({ authorization: `Bearer ${secret}` });
  const keyPath = (encodedKey: string) => `/api/v1/${bucket}/${encodedKey}`;

  /**
   * Sends a body of `megabytes` MiB over a raw socket and returns what the server answered.
   * Headers (and, chunked, just past the limit) go first: the server must answer 400 at once and
   * close, before the client has sent the rest; the client then tries to push it all anyway.
   * (fetch is not used here: it may report the server's early close as a failed request.)
   */
  function sendOversized(method: string, path: string, megabytes: number, fill: number, chunked = false): Promise<string> {
    const { hostname, port } = new URL(server.url);
    const chunk = Buffer.alloc(1024 * 1024, fill);
    return new Promise<string>((resolve) => {
      const socket = connect(Number(port), hostname);
      let received = '';
      let sent = 0;
      const blast = () => {
        while (sent < megabytes && !socket.destroyed) {
          sent++;
          const data = chunked ? Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]) : chunk;
          if (!socket.write(data)) return void socket.once('drain', blast);
        }
      };
      socket.on('data', (d) => {
        const first = received === '';
        received += d.toString('latin1');
        if (first) blast();
      });
      socket.on('error', () => undefined);
      socket.on('close', () => resolve(received));
      // A guard: the server's own answer or close ends this long before; it only bounds a hang.
      setTimeout(() => socket.destroy(), 3000);
      const head = chunked ? 'Transfer-Encoding: chunked' : `Content-Length: ${megabytes * chunk.length}`;
      socket.write(`${method} ${path} HTTP/1.1\r\nHost: x\r\n${head}\r\n\r\n`);
      if (chunked) socket.write(`8000\r\n${String.fromCharCode(fill).repeat(0x8000)}\r\n`);
    });
  }
  const randomEncodedKey = () => {
    switch (rnd.int(6)) {
      case 0:
        return [...rnd.bytes(1 + rnd.int(60))].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');
      case 1:
        return `${rnd.ascii(3)}%${rnd.pick(['', 'z', 'g1', '0', 'zz', 'C3', 'E2%82'])}`;
      case 2:
        return encodeURIComponent(rnd.ascii(rnd.pick([1, 127, 128, 129, 400])));
      case 3:
        return 'k'.repeat(rnd.pick([128, 129, 10_000]));
      case 4:
        return encodeURIComponent('é'.repeat(rnd.pick([63, 64, 65])));
      default:
        return encodeURIComponent(rnd.ascii(1 + rnd.int(20)));
    }
  };

  it('keys: malformed encodings and lengths', async () => {
    const requests: Sent[] = [];
    for (let i = 0; i < 600; i++) {
      requests.push({
        method: rnd.pick(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH']),
        path: keyPath(randomEncodedKey()),
        body: undefined,
      });
      const last = requests[requests.length - 1]!;
      if (['POST', 'PUT'].includes(last.method)) last.body = 'v';
      if (last.method === 'PATCH') last.body = '+1';
    }
    requests.push({ method: 'GET', path: keyPath('') }, { method: 'POST', path: keyPath(''), body: 'x' });
    await batch('keys', requests);
  });

  it('values: any body with any Content-Type is stored by inference or refused with 400', async () => {
    const types = [
      '',
      'application/json',
      'application/json; charset=utf-8',
      'text/plain',
      'TEXT/PLAIN;charset=UTF-8',
      'application/octet-stream',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'image/png',
      'garbage',
      ';;;',
    ];
    const requests: Sent[] = [];
    for (let i = 0; i < 500; i++) {
      const kind = rnd.int(5);
      const body =
        kind === 0
          ? rnd.bytes(rnd.int(300))
          : kind === 1
            ? rnd.ascii(rnd.int(300))
            : kind === 2
              ? `{"a":${rnd.ascii(5)}`
              : kind === 3
                ? String(rnd.next() * 1e6)
                : rnd.bytes(rnd.pick([16_384, 16_385, 20_000]));
      const contentType = rnd.pick(types);
      requests.push({
        method: rnd.pick(['POST', 'PUT']),
        path: keyPath(`v${i}`),
        body,
        headers: contentType ? { 'content-type': contentType } : {},
      });
    }
    await batch('values', requests);
    // Where the spec defines the outcome, check it: no Content-Type and a valid body stores a value.
    const stored = await fetch(`${server.url}${keyPath('defined')}`, { method: 'POST', body: Buffer.from([0xff, 0x00]) });
    expect(stored.status).toBe(200);
    expect(Buffer.from(await (await fetch(`${server.url}${keyPath('defined')}`)).arrayBuffer())).toEqual(Buffer.from([0xff, 0x00]));
  });

  it('query parameters: ttl, limit, skip, format, reverse, values', async () => {
    const junk = () =>
      rnd.pick(['', '-1', '1.5', 'abc', '1e3', '99999999999999999999', '0x10', ' 1', '+1', '%00', '1&ttl=2', String(rnd.int(100))]);
    const requests: Sent[] = [];
    for (let i = 0; i < 400; i++) {
      if (rnd.int(2)) requests.push({ method: 'POST', path: `${keyPath(`q${i}`)}?ttl=${encodeURIComponent(junk())}`, body: 'v' });
      else {
        const params = ['limit', 'skip', 'format', 'reverse', 'values', 'prefix']
          .filter(() => rnd.int(2))
          .map((p) => `${p}=${encodeURIComponent(p === 'format' ? rnd.pick(['text', 'json', 'jsonl', 'xml', '', 'JSON']) : junk())}`);
        requests.push({
          method: 'GET',
          path: `/api/v1/${bucket}/?${params.join('&')}`,
          headers: { accept: rnd.pick(['*/*', 'image/png', 'application/json;q=0', 'text/plain', '', ',,,;q=abc']) },
        });
      }
    }
    await batch('query', requests);
  });

  it('counter deltas', async () => {
    const deltas = [
      '1',
      '++1',
      '+1e400',
      '+NaN',
      '+0x10',
      '',
      '+',
      '-',
      '+ 1',
      '+1.',
      '+.5',
      '-Infinity',
      '+1e308',
      '+9223372036854775807',
      '+9223372036854775808',
    ];
    const requests: Sent[] = deltas.map((d, i) => ({ method: 'PATCH', path: keyPath(`c${i}`), body: d }));
    for (let i = 0; i < 200; i++)
      requests.push({ method: 'PATCH', path: keyPath(`c-rand-${i % 7}`), body: rnd.pick(['+', '-', '']) + rnd.ascii(rnd.int(12)) });
    await batch('deltas', requests);
    // 10 MiB of digits: refused at once from Content-Length, without reading it.
    const huge = await sendOversized('PATCH', keyPath('c-huge'), 10, 0x39);
    expect(huge.split('\r\n')[0]).toBe('HTTP/1.1 400 Bad Request');
    expect(huge).toMatch(/\{"error":\{"code":400,"message":"bad_request","detail":"[^"]+"\}\}/);
  });

  it('transactions: not objects, empty, over the maximum, unknown shapes, non-string keys', async () => {
    const op = () =>
      rnd.pick<unknown>([
        { set: 'a', value: 1 },
        { set: 'a', value: null },
        { set: 5, value: 1 },
        { delete: ['x'] },
        { set: 'a', value: 1, extra: true },
        { set: 'a' },
        { put: 'a', value: 1 },
        { set: 'a', value: 1, ttl: -1 },
        { set: 'a', value: 1, ttl: 1.5 },
        { set: '', value: 1 },
        { set: 'k'.repeat(129), value: 1 },
        { set: 'big', value: 'x'.repeat(16_385) },
        [],
        'string',
        null,
      ]);
    const bodies = [
      '',
      'null',
      '[]',
      '{}',
      '{"txn":{}}',
      '{"txn":[]}',
      '{"txn":[1]}',
      '{"txn":[{}]}',
      '{"txn":',
      'x',
      JSON.stringify({ txn: Array.from({ length: 1001 }, (_, i) => ({ set: `k${i}`, value: i })) }),
    ];
    for (let i = 0; i < 200; i++) bodies.push(JSON.stringify({ txn: Array.from({ length: 1 + rnd.int(4) }, op) }));
    const requests: Sent[] = bodies.map((body) => ({
      method: 'POST',
      path: `/api/v1/${bucket}`,
      body,
      headers: { 'content-type': rnd.pick(['application/json', 'application/json', 'text/plain', 'application/x-www-form-urlencoded']) },
    }));
    await batch('transactions', requests);
  });

  it('forms: missing fields, unknown permissions, wrong types', async () => {
    const requests: Sent[] = [];
    const fields = ['email', 'secret_key', 'read_key', 'default_ttl', 'bogus', 'prefix', 'permissions', 'ttl'];
    for (let i = 0; i < 200; i++) {
      const form = new URLSearchParams();
      for (const f of fields)
        if (rnd.int(3) === 0) form.append(f, rnd.pick(['', 'a@b', 'read', 'read,admin', 'x', '-5', '0', rnd.ascii(10)]));
      const mint = rnd.int(2) === 0;
      requests.push({
        method: 'POST',
        path: mint ? `/api/v1/${bucket}/tokens/` : '/api/v1/',
        body: rnd.int(5) === 0 ? rnd.bytes(50) : form.toString(),
        headers: {
          'content-type': rnd.pick(['application/x-www-form-urlencoded', 'application/json', 'text/plain']),
          ...(mint ? auth() : {}),
        },
      });
    }
    await batch('forms', requests);
  });

  it('Authorization: garbage, truncated, oversized, forged JWTs', async () => {
    const key = new TextEncoder().encode(signingKey);
    const now = Math.floor(Date.now() / 1000);
    const claims = { bkt: bucket, pfx: 'p/', perm: ['read', 'write', 'enumerate', 'delete'], gen: 0 };
    const sign = (payload: object, alg = 'HS256', k = key) => new SignJWT({ ...payload }).setProtectedHeader({ alg }).sign(k);
    const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
    // A real token comes from the server; tokens signed with the signing key itself are forgeries
    // (the server signs with a key derived from it and a secret per-bucket salt).
    const minted = await fetch(`${server.api}/${bucket}/tokens/`, {
      method: 'POST',
      headers: auth(),
      body: new URLSearchParams({ prefix: 'p/', permissions: 'read,write,enumerate,delete', ttl: '60' }),
    });
    const valid = ((await minted.json()) as { access_token: string }).access_token;
    const [h, , s] = valid.split('.');
    const forged = [
      await sign({ ...claims, iat: now, exp: now + 60 }),
      `${b64({ alg: 'none' })}.${b64({ ...claims, iat: now, exp: now + 60 })}.`,
      await sign({ ...claims, iat: now, exp: now + 60 }, 'HS512'),
      await sign({ ...claims, iat: now, exp: now + 60 }, 'HS256', new TextEncoder().encode('wrong key')),
      await sign({ ...claims, bkt: 'another-bucket', iat: now, exp: now + 60 }),
      await sign({ ...claims, iat: now - 120, exp: now - 60 }),
      await sign({ ...claims, iat: now, exp: now + 60, nbf: now + 3600 }),
      await sign({ ...claims, gen: 7, iat: now, exp: now + 60 }),
      `${h}.${b64({ ...claims, pfx: '', iat: now, exp: now + 60 })}.${s}`,
      valid.slice(0, -5),
    ];
    const headers = [
      ...forged.map((t) => `Bearer ${t}`),
      'Bearer',
      'Bearer ',
      'Basic',
      'Basic !!!!',
      `Basic ${Buffer.from(':nouser').toString('base64')}`,
      'Digest abc',
      'garbage',
      `Bearer ${'x'.repeat(8000)}`,
      `Basic ${'A'.repeat(12_000)}`,
    ];
    const requests: Sent[] = [];
    for (let i = 0; i < 300; i++) {
      const header = rnd.pick(headers);
      requests.push({
        method: rnd.pick(['GET', 'POST', 'DELETE']),
        path: rnd.pick([keyPath('p/x'), keyPath('other'), `/api/v1/${bucket}`, `/api/v1/${bucket}/`]),
        body: undefined,
        headers: { authorization: header },
      });
    }
    await batch('authorization', requests);
    // Forged tokens must not get in: each is refused on a bucket that needs credentials.
    await fetch(`${server.url}/api/v1/${bucket}`, {
      method: 'PATCH',
      headers: { ...auth(), 'content-type': 'application/json' },
      body: JSON.stringify({ read_key: 'r', write_key: 'w' }),
    });
    for (const token of forged) {
      const res = await fetch(`${server.url}${keyPath('p/x')}`, { headers: { authorization: `Bearer ${token}` } });
      expect(res.status, token).toBe(401);
    }
    expect((await fetch(`${server.url}${keyPath('p/x')}`, { headers: { authorization: `Bearer ${valid}` } })).status).toBe(404);
  });

  it('a 50 MB body is refused without being read whole: server memory stays flat', async () => {
    const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${server.process.pid}/status`, 'utf8'))![1]) * 1024;
    const before = rss();
    for (const chunked of [false, true]) {
      const answer = await sendOversized('POST', keyPath('huge'), 50, 0x61, chunked);
      expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 400 Bad Request');
    }
    expect(rss() - before).toBeLessThan(30 * 1024 * 1024);
    expect((await fetch(`${server.url}/health`)).status).toBe(200);
  });
});
