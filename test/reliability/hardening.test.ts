import { readFileSync, rmSync } from 'node:fs';
import type { Socket } from 'node:net';
import { jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintToken } from '../../src/auth/tokens.js';
import { TEST_BACKEND } from '../helpers/backend.js';
import { call, createBucket, expectError, json } from '../helpers/http.js';
import { type RunningServer, startServer } from '../helpers/server.js';
import { rawSocket, readUntilEnd, startRequest } from '../helpers/raw-socket.js';
import { exportFile, manyKeys } from '../helpers/export-file.js';

/** Reads from the socket until `count` complete responses (with Content-Length bodies) have arrived. */
function readResponses(socket: Socket, count: number, ms = 10_000): Promise<Array<{ status: number; head: string; body: string }>> {
  return new Promise((resolve, reject) => {
    let buffer = '';
    const responses: Array<{ status: number; head: string; body: string }> = [];
    const timer = setTimeout(() => reject(new Error(`only ${responses.length} of ${count} responses arrived: ${buffer}`)), ms);
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      buffer += chunk;
      for (;;) {
        const end = buffer.indexOf('\r\n\r\n');
        if (end === -1) break;
        const head = buffer.slice(0, end);
        const length = Number(/content-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (buffer.length < end + 4 + length) break;
        responses.push({ status: Number(head.split(' ')[1]), head, body: buffer.slice(end + 4, end + 4 + length) });
        buffer = buffer.slice(end + 4 + length);
      }
      if (responses.length >= count) {
        clearTimeout(timer);
        resolve(responses);
      }
    });
  });
}

const rssBytes = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;

describe('hardening: what an attacker found', () => {
  let server: RunningServer;
  let host: string;
  beforeAll(async () => {
    server = await startServer({ args: ['--log-level', 'debug'] });
    host = new URL(server.url).host;
  });
  afterAll(async () => {
    await server.stop();
  });

  describe('1. a transaction body is authorized before it is read, and bounded while parsed', () => {
    it('a caller with no read, write or delete right is refused before its large body is read', async () => {
      const bucket = await createBucket(server.api, { write_key: 'w', read_key: 'r', secret_key: 'admin', signing_key: 'sign' });
      // A token that may only enumerate keys can run no transaction operation at all.
      const mint = await call(`${server.api}/${bucket}/tokens/`, {
        method: 'POST',
        headers: { authorization: 'Bearer admin' },
        body: new URLSearchParams({ prefix: '', permissions: 'enumerate', ttl: '600' }),
      });
      const enumerateOnly = (mint.json() as { access_token: string }).access_token;
      for (const credential of [undefined, enumerateOnly]) {
        const socket = await rawSocket(server);
        const responses = readResponses(socket, 1);
        // 19 MB announced, 1 KB sent: an answer before the rest arrives means the body was not awaited.
        socket.write(
          `POST /api/v1/${bucket} HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\n` +
            (credential ? `Authorization: Bearer ${credential}\r\n` : '') +
            `Content-Length: 19000000\r\n\r\n{"txn":[{"set":"k","value":[${'0,'.repeat(500)}`,
        );
        const [answer] = await responses;
        socket.destroy();
        expect(answer!.status).toBe(credential ? 403 : 401);
      }
      // A caller who may only read can send only checks: a body larger than 1,000 checks need
      // is refused before it is read, whether announced or streamed.
      const socket = await rawSocket(server);
      const responses = readResponses(socket, 1);
      socket.write(
        `POST /api/v1/${bucket} HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\n` +
          `Authorization: Bearer r\r\nContent-Length: 19000000\r\n\r\n{"txn":[{"check":"k","exists":true},`,
      );
      const [answer] = await responses;
      socket.destroy();
      expect(answer!.status).toBe(400);
      expect(answer!.head).toMatch(/only checks/);
      // Streamed (chunked, no length announced), a chunk at a time until the answer comes: a client
      // that goes on writing after the server has answered and closed gets EPIPE, not the answer.
      const chunked = await rawSocket(server);
      chunked.on('error', () => undefined); // a write racing the server's close; the answer is read regardless
      const chunkedAnswer = readResponses(chunked, 1);
      let answered = false;
      chunkedAnswer.then(
        () => (answered = true),
        () => undefined,
      );
      const sendChunk = (data: string) => new Promise((resolve) => chunked.write(`${data.length.toString(16)}\r\n${data}\r\n`, resolve));
      chunked.write(
        `POST /api/v1/${bucket} HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\n` +
          `Authorization: Bearer r\r\nTransfer-Encoding: chunked\r\n\r\n`,
      );
      await sendChunk('{"txn":[{"set":"k","value":"');
      for (let sent = 0; sent < 1_100_000 && !answered; sent += 65_536) await sendChunk('x'.repeat(65_536));
      if (!answered) {
        await sendChunk('"}]}');
        chunked.write('0\r\n\r\n');
      }
      const [streamed] = await chunkedAnswer;
      chunked.destroy();
      expect(streamed!.status, streamed!.body).toBe(400);
      expect(JSON.parse(streamed!.body)).toEqual({ error: { code: 400, message: 'bad_request', detail: expect.any(String) } });
      // Within the bound, a read-only caller's checks run; a write among them is refused, nothing written.
      const checks = await call(`${server.api}/${bucket}`, {
        method: 'POST',
        ...json({ txn: [{ check: 'k', exists: false }] }, { authorization: 'Bearer r' }),
      });
      expect(checks.status, checks.text).toBe(204);
      const write = await call(`${server.api}/${bucket}`, {
        method: 'POST',
        ...json(
          {
            txn: [
              { check: 'k', exists: false },
              { set: 'k', value: 1 },
            ],
          },
          { authorization: 'Bearer r' },
        ),
      });
      expectError(write, 403, 'forbidden');
      expect((await call(`${server.api}/${bucket}/k`, { headers: { authorization: 'Bearer r' } })).status).toBe(404);
      // An unknown bucket or a wrong credential is refused the same way.
      const wrong = await call(`${server.api}/${bucket}`, { method: 'POST', ...json({ txn: [] }, { authorization: 'Bearer nope' }) });
      expectError(wrong, 401, 'unauthorized');
    });

    it('a value past the limit is refused as soon as it is scanned, without the memory of a parse tree', async () => {
      const bucket = await createBucket(server.api, { write_key: 'w' });
      // 16 MB of `0,`: just under the body limit, one value 1,000 times the value limit.
      const bomb = `{"txn":[{"set":"k","value":[${'0,'.repeat(8_000_000)}0]}]}`;
      const before = rssBytes(server.process.pid!);
      const answer = await call(`${server.api}/${bucket}`, {
        method: 'POST',
        body: bomb,
        headers: { 'content-type': 'application/json', authorization: 'Bearer w' },
      });
      expectError(answer, 400, 'bad_request');
      expect(answer.headers.get('kvb-error-detail')).toMatch(
        /larger than the server's limit of 16384 bytes \(16 KiB\), set by kvb serve --max-value-bytes/,
      );
      // Measured before the fix: 515-658 MB more. The body itself is 16 MB, read once as a string.
      expect(rssBytes(server.process.pid!) - before).toBeLessThan(150 * 1024 * 1024);
    });

    it('a body larger than 1,000 legal operations can need is refused while being read', async () => {
      const bucket = await createBucket(server.api);
      // Its Content-Length alone is refused: the answer comes before any of the body is sent. (A
      // client that keeps sending after the server closed may be reset and lose the answer, so the
      // test sends no body: fetch did that, and on a busy machine failed with EPIPE.)
      const length = Buffer.byteLength(`{"txn":[{"set":"k","value":""}]}`) + 17 * 1024 * 1024;
      const socket = await rawSocket(server);
      const { pathname, host } = new URL(`${server.api}/${bucket}`);
      const answered = readUntilEnd(socket, 20_000);
      socket.write(`POST ${pathname} HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`);
      const raw = await answered;
      const [head = '', text = ''] = raw.split('\r\n\r\n');
      expect(head, raw.slice(0, 300)).toMatch(/^HTTP\/1\.1 400 /);
      expect(JSON.parse(text)).toEqual({ error: { code: 400, message: 'bad_request', detail: expect.any(String) } });
      const health = await call(`${server.url}/health`);
      expect(health.status).toBe(200);
    });

    it('values up to the limit, deep or wide, still commit exactly as written', async () => {
      const bucket = await createBucket(server.api);
      const wide = `[${Array.from({ length: 4000 }, () => '1.10').join(',')}]`.slice(0, 16383);
      const wideValue = `${wide.slice(0, wide.lastIndexOf(','))}]`;
      const deep = `${'['.repeat(100)}1${']'.repeat(100)}`;
      const text = 'é'.repeat(8192); // 16,384 UTF-8 bytes
      const body = `{"txn":[{"set":"wide","value":${wideValue}},{"set":"deep","value":${deep}},{"set":"text","value":"${text}","ttl":60}]}`;
      const answer = await call(`${server.api}/${bucket}`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
      expect(answer.status, answer.text).toBe(204);
      expect((await call(`${server.api}/${bucket}/wide`)).text).toBe(wideValue);
      expect((await call(`${server.api}/${bucket}/deep`)).text).toBe(deep);
      expect((await call(`${server.api}/${bucket}/text`)).text).toBe(text);
      const over = await call(`${server.api}/${bucket}`, {
        method: 'POST',
        ...json({ txn: [{ set: 'k', value: 'x'.repeat(16385) }] }),
      });
      expectError(over, 400, 'bad_request');
      const tooMany = await call(`${server.api}/${bucket}`, {
        method: 'POST',
        ...json({ txn: Array.from({ length: 1001 }, (_, i) => ({ delete: `k${i}` })) }),
      });
      expectError(tooMany, 400, 'bad_request');
      expect(tooMany.headers.get('kvb-error-detail')).toMatch(/more than 1000 operations/);
    });
  });

  describe('3. a client error answer closes the connection for good', () => {
    it('after the 400 the server destroys the socket instead of holding it half-closed', async () => {
      const socket = await rawSocket(server);
      const answer = readUntilEnd(socket);
      socket.write('GARBAGE\r\n\r\n');
      expect(await answer).toMatch(/^HTTP\/1\.1 400 /);
      expect(await answer).toMatch(/x-content-type-options: nosniff/i);
      // Our side is still open. A server that only ended its side would read this; a destroyed
      // socket answers it with a reset.
      const reset = await new Promise<string>((resolve) => {
        socket.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'));
        socket.on('close', () => resolve('closed'));
        const poke = setInterval(() => socket.write('x'), 100);
        // A guard that only bounds a hang: the reset (or close) is the event waited for.
        setTimeout(() => {
          clearInterval(poke);
          resolve('still open');
        }, 3000);
      });
      socket.destroy();
      expect(['ECONNRESET', 'EPIPE', 'closed']).toContain(reset);
    });
  });

  describe('3b. a refusal mid-upload reaches a client that goes on sending', () => {
    it('the server reads and drops the rest for a while, so no reset discards the answer', async () => {
      const bucket = await createBucket(server.api);
      for (let round = 0; round < 8; round++) {
        const socket = await rawSocket(server);
        socket.on('error', () => undefined); // asserted below: the answer, whatever follows it
        const answer = readResponses(socket, 1);
        // An import refused at its first line closes the connection (it will not read 3 MB to
        // answer), while the 3 MB are on their way, all sent without waiting for an answer.
        const rest = 3 * 1024 * 1024;
        socket.write(
          `POST /api/v1/${bucket} HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/x-ndjson\r\n` +
            `Content-Length: ${2 + rest}\r\n\r\nx\n`,
        );
        for (let sent = 0; sent < rest; sent += 65_536) socket.write('y'.repeat(65_536));
        const [refused] = await answer;
        socket.destroy();
        expect(refused!.status, `round ${round}: ${refused!.head}`).toBe(400);
        expect(refused!.head).toMatch(/connection: close/i);
        expect(JSON.parse(refused!.body)).toEqual({ error: { code: 400, message: 'bad_request', detail: expect.any(String) } });
      }
    });
  });

  describe('4. pipelined requests take effect in order', () => {
    it('PUT, GET, DELETE, GET in one write answer 200, 200, 204, 404 and leave no key', async () => {
      const bucket = await createBucket(server.api);
      for (let round = 0; round < 5; round++) {
        const socket = await rawSocket(server);
        const responses = readResponses(socket, 4);
        const path = `/api/v1/${bucket}/p`;
        socket.write(
          `PUT ${path} HTTP/1.1\r\nHost: ${host}\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nabc` +
            `GET ${path} HTTP/1.1\r\nHost: ${host}\r\n\r\n` +
            `DELETE ${path} HTTP/1.1\r\nHost: ${host}\r\n\r\n` +
            `GET ${path} HTTP/1.1\r\nHost: ${host}\r\n\r\n`,
        );
        const answers = await responses;
        socket.destroy();
        expect(answers.map((a) => a.status)).toEqual([200, 200, 204, 404]);
        expect(answers[1]!.body).toBe('abc');
        expect((await call(`${server.api}/${bucket}/p`)).status).toBe(404);
      }
    });
  });

  describe('8, 9. the bucket id is taken from the path once, the same way on every route', () => {
    it('a doubly encoded bucket id is no bucket on every route; a singly encoded one is the bucket everywhere', async () => {
      const bucket = await createBucket(server.api, { signing_key: 's' });
      await call(`${server.api}/${bucket}/k`, { method: 'PUT', body: 'v' });
      const hex = bucket.charCodeAt(0).toString(16);
      const twice = `%25${hex}${bucket.slice(1)}`;
      const once = `%${hex}${bucket.slice(1)}`;
      const routes = (id: string): Array<[string, RequestInit]> => [
        [`${server.api}/${id}`, {}],
        [`${server.api}/${id}/`, {}],
        [`${server.api}/${id}/k`, {}],
        [`${server.api}/${id}`, { method: 'POST', ...json({ txn: [{ set: 'x', value: 1 }] }) }],
        [`${server.api}/${id}/tokens/`, { method: 'POST', body: new URLSearchParams({ prefix: 'a', permissions: 'read', ttl: '60' }) }],
        [`${server.api}/${id}`, { method: 'PATCH', ...json({ default_ttl: 60 }) }],
      ];
      for (const [url, init] of routes(twice)) {
        const answer = await call(url, init);
        expectError(answer, 404, 'not_found');
        expect(answer.headers.get('kvb-error-detail'), url).toBe('no such bucket');
      }
      for (const [url, init] of routes(once)) {
        expect((await call(url, init)).status, url).toBeLessThan(300);
      }
    });

    it('an absolute-form request target reaches the same bucket and key as its origin-form', async () => {
      const bucket = await createBucket(server.api);
      await call(`${server.api}/${bucket}/k`, { method: 'PUT', body: 'v' });
      const socket = await rawSocket(server);
      const responses = readResponses(socket, 3);
      for (const path of [`/api/v1/${bucket}/k`, `/api/v1/${bucket}/`, `/api/v1/${bucket}`]) {
        socket.write(`GET http://${host}${path} HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
      }
      const answers = await responses;
      socket.destroy();
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
      expect(answers[0]!.body).toBe('v');
      expect(answers[1]!.body).toBe('k\n');
    });
  });

  describe('10. a client that leaves mid-body is a client abort, not a storage failure', () => {
    it('is logged at debug as a client abort and never as storage unavailable', async () => {
      const bucket = await createBucket(server.api);
      const socket = await rawSocket(server);
      // The server is running the request (it answered 100 Continue) when the client leaves.
      await startRequest(socket, `PUT /api/v1/${bucket}/k HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 1000\r\n`);
      socket.write('0123456789');
      socket.destroy();
      await expect.poll(() => server.logs(), { timeout: 5000 }).toMatch(/client closed the connection before its request body arrived/);
      expect(server.logs()).not.toMatch(/storage unavailable/);
      expect(server.logs()).not.toMatch(/"level":50/);
      expect((await call(`${server.api}/${bucket}/k`)).status).toBe(404);
    });
  });

  describe('16. tokens cannot be forged from a short signing key', () => {
    it('a token is not signed with the signing key itself, and one that is gets 401', async () => {
      const bucket = await createBucket(server.api, { secret_key: 'admin', signing_key: 'k' });
      const form = new URLSearchParams({ prefix: 'a/', permissions: 'read', ttl: '600' });
      const minted = await call(`${server.api}/${bucket}/tokens/`, { method: 'POST', body: form, token: 'admin' });
      const token = (minted.json() as { access_token: string }).access_token;
      // What the attacker did: test guesses of the signing key against the token. The right guess fails now.
      await expect(jwtVerify(token, new TextEncoder().encode('k'))).rejects.toThrow();
      expect((await call(`${server.api}/${bucket}/a/x`, { token })).status).toBe(404);
      // And a token made with the recovered key, for other prefixes, is refused.
      const forged = await mintToken('k', { bucket, prefix: 'b', permissions: ['read', 'write'], generation: 0 }, 600);
      expectError(await call(`${server.api}/${bucket}/b/x`, { token: forged }), 401, 'unauthorized');
      // A new signing key gets a new salt: earlier tokens stop working, new ones work.
      await call(`${server.api}/${bucket}`, { method: 'PATCH', token: 'admin', ...json({ signing_key: 'k' }) });
      expectError(await call(`${server.api}/${bucket}/a/x`, { token }), 401, 'unauthorized');
      const again = await call(`${server.api}/${bucket}/tokens/`, { method: 'POST', body: form, token: 'admin' });
      const fresh = (again.json() as { access_token: string }).access_token;
      expect((await call(`${server.api}/${bucket}/a/x`, { token: fresh })).status).toBe(404);
    });
  });

  describe('16. responses are never sniffed', () => {
    it('every response says X-Content-Type-Options: nosniff', async () => {
      const bucket = await createBucket(server.api);
      for (const url of [`${server.url}/health`, `${server.api}/${bucket}/missing`, `${server.url}/nowhere`, `${server.api}/${bucket}/`]) {
        expect((await call(url)).headers.get('x-content-type-options'), url).toBe('nosniff');
      }
    });
  });
});

describe('16. upgrading gives existing buckets a token salt (SQLite file)', () => {
  it.skipIf(TEST_BACKEND === 'postgres')('migration 0003 salts every bucket; tokens signed before the upgrade are refused', async () => {
    const first = await startServer();
    const bucket = await createBucket(first.api, { secret_key: 'admin', signing_key: 'k' });
    await first.stop({ keepData: true });
    // Make the file what the previous version left: no salt column, migration 0003 not run.
    const { default: Database } = await import('better-sqlite3');
    const db = new Database(first.db);
    db.exec("alter table buckets drop column token_salt; delete from kysely_migration where name = '0003_token_salt'");
    db.close();
    const oldToken = await mintToken('k', { bucket, prefix: 'a', permissions: ['read'], generation: 0 }, 600);
    const second = await startServer({ dataDir: first.dataDir });
    try {
      expectError(await call(`${second.api}/${bucket}/a`, { token: oldToken }), 401, 'unauthorized');
      const form = new URLSearchParams({ prefix: 'a', permissions: 'read', ttl: '600' });
      const minted = await call(`${second.api}/${bucket}/tokens/`, { method: 'POST', body: form, token: 'admin' });
      expect((await call(`${second.api}/${bucket}/a`, { token: (minted.json() as { access_token: string }).access_token })).status).toBe(
        404,
      );
    } finally {
      await second.stop({ keepData: true });
    }
    const check = new Database(first.db, { readonly: true });
    const row = check.prepare('select token_salt from buckets where id = ?').get(bucket) as { token_salt: string };
    check.close();
    expect(row.token_salt).toMatch(/^[0-9a-f]{64}$/);
    rmSync(first.dataDir, { recursive: true, force: true });
  });
});

describe('an import refused mid-body, behind a trusted proxy (as contrib/kvb.service runs the server)', () => {
  let proxied: RunningServer;
  beforeAll(async () => {
    proxied = await startServer({ args: ['--trust-proxy', '127.0.0.1', '--max-import-bytes', '200000'] });
  });
  afterAll(async () => {
    await proxied.stop();
  });

  /** Sends an import; the refusal may cut the upload off, so a failed send is not a failed test. */
  async function importBody(bucket: string, body: string, token?: string): Promise<number | undefined> {
    const headers = { 'content-type': 'application/x-ndjson', 'x-forwarded-for': '198.51.100.4' };
    try {
      return (await call(`${proxied.api}/${bucket}`, { method: 'POST', body, headers, ...(token && { token }) })).status;
    } catch {
      return undefined;
    }
  }

  it('each kind of refusal is answered, logged with the client address, and the server goes on', async () => {
    const bucket = await createBucket(proxied.api, { secret_key: 'admin', signing_key: 'sign' });
    const mint = await call(`${proxied.api}/${bucket}/tokens/`, {
      method: 'POST',
      token: 'admin',
      body: new URLSearchParams({ prefix: 'a/', permissions: 'read,write', ttl: '600' }),
    });
    const token = (mint.json() as { access_token: string }).access_token;
    const good = exportFile(manyKeys(500, 'a/')).split('\n').slice(0, -2).join('\n');
    const refusals: Array<[string, string, string | undefined, number]> = [
      ['a bad first line', 'x\n', 'admin', 400],
      ['a bad line after 500 good ones', `${good}\nnot json\n`, 'admin', 400],
      ['a token importing outside its prefix', exportFile([{ key: 'b/x', type: 'text', value: '"v"' }]), token, 403],
      ['an import past --max-import-bytes', exportFile(manyKeys(5000, 'a/')), 'admin', 400],
    ];
    for (const [what, body, credential, status] of refusals) {
      const answered = await importBody(bucket, body, credential);
      if (answered !== undefined) expect(answered, what).toBe(status);
      const health = await call(`${proxied.url}/health`);
      expect(health.status, `${what}: ${proxied.logs()}`).toBe(200);
    }
    expect(proxied.logs()).not.toMatch(/TypeError|uncaught/i);
    const importLines = proxied
      .logs()
      .split('\n')
      .filter((line) => line.includes('"route":"/api/v1/:bucket"') && line.includes('"method":"POST"'));
    expect(importLines).toHaveLength(refusals.length);
    for (const line of importLines) expect(JSON.parse(line).ip).toBe('198.51.100.4');
    expect((await call(`${proxied.api}/${bucket}/?format=json`, { token: 'admin' })).json()).toEqual([]);
  });
});
