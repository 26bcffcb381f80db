import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Answer, call, createBucket, json } from '../helpers/http.js';
import { type RunningServer, startServer } from '../helpers/server.js';

/**
 * SECURITY.md promises that no response body, header or log line ever carries a secret, a token
 * or a stored value. The server runs at `trace` (its most verbose level) so every log line it can
 * write is captured, then a wide set of requests presents the secrets every way the spec allows,
 * succeeding and failing, and everything that came back is searched for them.
 */
const SECRET = 'SecretKey-7f3a9c1e';
const READ = 'ReadKey-2b8d4e6f';
const WRITE = 'WriteKey-9a1c3e5b';
const SIGNING = 'SigningKey-4d6f8a0c';
const ROTATED = 'RotatedSecret-1e3c5a7b';
const VALUE = 'ValueMarker-8c0e2a4f';

let server: RunningServer;
let bucket: string;
let token: string;
const answers: Array<{ what: string; answer: Answer }> = [];

const basic = (user: string) => `Basic ${Buffer.from(`${user}:${user}`).toString('base64')}`;

async function record(what: string, url: string, init: RequestInit = {}): Promise<Answer> {
  const answer = await call(url, init);
  answers.push({ what, answer });
  return answer;
}

beforeAll(async () => {
  server = await startServer({ env: { KVB_LOG_LEVEL: 'trace' } });
  bucket = await createBucket(server.api, { secret_key: SECRET, read_key: READ, write_key: WRITE, signing_key: SIGNING });
  const b = `${server.api}/${bucket}`;
  const minted = await call(`${b}/tokens/`, {
    method: 'POST',
    headers: { authorization: `Bearer ${SECRET}` },
    body: new URLSearchParams({ prefix: 'k', permissions: 'read,write', ttl: '600' }),
  });
  expect(minted.status).toBe(200);
  token = (minted.json() as { access_token: string }).access_token;

  // Every way of presenting every credential, on success and failure paths.
  for (const [name, credential] of [
    ['secret', SECRET],
    ['read', READ],
    ['write', WRITE],
    ['token', token],
    ['signing (not a credential)', SIGNING],
  ] as const) {
    await record(`${name} bearer set`, `${b}/k1`, { method: 'POST', body: VALUE, headers: { authorization: `Bearer ${credential}` } });
    await record(`${name} bearer get`, `${b}/k1`, { headers: { authorization: `Bearer ${credential}` } });
    await record(`${name} basic get`, `${b}/k1`, { headers: { authorization: basic(credential) } });
    await record(`${name} access_token get`, `${b}/k1?access_token=${encodeURIComponent(credential)}`);
    await record(`${name} key list`, `${b}/?values=true&key=${encodeURIComponent(credential)}`);
    await record(`${name} policy`, `${b}`, { headers: { authorization: `Bearer ${credential}` } });
    await record(`${name} missing key`, `${b}/absent?key=${encodeURIComponent(credential)}`);
    await record(`${name} bad ttl`, `${b}/k1?ttl=-5&key=${encodeURIComponent(credential)}`, { method: 'POST', body: VALUE });
    await record(`${name} bad delta`, `${b}/k2?key=${encodeURIComponent(credential)}`, { method: 'PATCH', body: VALUE });
    await record(`${name} txn`, `${b}?access_token=${encodeURIComponent(credential)}`, {
      method: 'POST',
      ...json({ txn: [{ set: 'k3', value: VALUE }] }),
    });
    await record(`${name} unknown route`, `${server.url}/nowhere?key=${encodeURIComponent(credential)}`);
  }
  // A wrong credential that is one of the others' secrets, a JSON body echoing the value, and a rotation.
  await record('wrong secret', `${b}`, { headers: { authorization: `Bearer ${SECRET}x` } });
  await record('json value', `${b}/kj`, { method: 'POST', ...json({ v: VALUE }, { authorization: `Bearer ${WRITE}` }) });
  await record('patch rotate', `${b}`, {
    method: 'PATCH',
    ...json({ secret_key: ROTATED, signing_key: `${SIGNING}-2` }, { authorization: `Bearer ${SECRET}` }),
  });
  await record('old secret after rotation', `${b}`, { headers: { authorization: `Bearer ${SECRET}` } });
  await record('old token after rotation', `${b}/k1`, { headers: { authorization: `Bearer ${token}` } });
  await record('malformed patch', `${b}`, {
    method: 'PATCH',
    body: `{"secret_key":"${ROTATED}"`,
    headers: { authorization: `Bearer ${ROTATED}`, 'content-type': 'application/json' },
  });
  await record('create with secrets', `${server.api}/`, {
    method: 'POST',
    body: new URLSearchParams({ email: 'x@example.com', secret_key: SECRET, read_key: READ, unknown: WRITE }),
  });
});

afterAll(async () => {
  await server?.stop();
});

describe('Secrets, tokens and values never leak', () => {
  it('the requests above reached the server with the expected outcomes (the test is not vacuous)', () => {
    const status = (what: string) => answers.find((a) => a.what === what)?.answer.status;
    expect(status('secret bearer get')).toBe(200);
    expect(status('read basic get')).toBe(200);
    expect(status('token access_token get')).toBe(200);
    expect(status('write bearer get')).toBe(403);
    expect(status('signing (not a credential) bearer get')).toBe(401);
    expect(status('patch rotate')).toBe(204);
    expect(status('old secret after rotation')).toBe(401);
    expect(status('old token after rotation')).toBe(401);
    expect(status('create with secrets')).toBe(400);
    // The log really is verbose: one access line per request at trace level.
    expect(
      server
        .logs()
        .split('\n')
        .filter((line) => line.includes('"msg":"request"')).length,
    ).toBeGreaterThanOrEqual(answers.length);
  });

  it('no response header and no error body carries a secret, a token or the signing key', () => {
    const secrets = [SECRET, READ, WRITE, SIGNING, ROTATED, token];
    for (const { what, answer } of answers) {
      const headers = [...answer.headers.entries()].map(([k, v]) => `${k}: ${v}`).join('\n');
      for (const secret of secrets) {
        expect(headers, `${what}: headers`).not.toContain(secret);
        expect(answer.text, `${what}: body`).not.toContain(secret);
      }
    }
  });

  it('no log line carries a secret, a token, the signing key or a stored value', () => {
    const logs = server.logs();
    expect(logs.length).toBeGreaterThan(0);
    for (const secret of [SECRET, READ, WRITE, SIGNING, ROTATED, token, VALUE, encodeURIComponent(token)]) {
      expect(logs).not.toContain(secret);
    }
    // Query credentials are shown redacted rather than dropped, so operators still see the route.
    expect(logs).toContain('key=[redacted]');
    expect(logs).toContain('access_token=[redacted]');
  });
});

describe('A token reveals nothing outside its prefix', () => {
  it('every endpoint answers the same for an existing and an absent key outside the prefix', async () => {
    const b = await createBucket(server.api, { secret_key: 's', signing_key: 'k' });
    const base = `${server.api}/${b}`;
    await call(`${base}/private/exists`, { method: 'POST', body: 'hidden', headers: { authorization: 'Bearer s' } });
    await call(`${base}/public/a`, { method: 'POST', body: 'open', headers: { authorization: 'Bearer s' } });
    const minted = await call(`${base}/tokens/`, {
      method: 'POST',
      headers: { authorization: 'Bearer s' },
      body: new URLSearchParams({ prefix: 'public/', permissions: 'read,enumerate,write,delete', ttl: '600' }),
    });
    const auth = { authorization: `Bearer ${(minted.json() as { access_token: string }).access_token}` };
    const probes = (key: string): Array<[string, RequestInit & { url: string }]> => [
      ['GET', { url: `${base}/${key}`, headers: auth }],
      ['HEAD', { url: `${base}/${key}`, method: 'HEAD', headers: auth }],
      ['DELETE', { url: `${base}/${key}`, method: 'DELETE', headers: auth }],
      ['PATCH', { url: `${base}/${key}`, method: 'PATCH', body: '+1', headers: auth }],
      ['list', { url: `${base}/?prefix=${encodeURIComponent(key)}`, headers: auth }],
      ['txn', { url: base, method: 'POST', ...json({ txn: [{ delete: key }] }, auth) }],
    ];
    for (const [[name, existing], [, absent]] of probes('private/exists').map((p, i) => [p, probes('private/absent')[i]!] as const)) {
      const a = await call(existing.url, existing);
      const b2 = await call(absent.url, absent);
      expect(a.status, name).toBe(403);
      // The detail may echo the key the caller asked for (its own input): only that may differ.
      const same = b2.text.replaceAll('private/absent', 'private/exists');
      expect([b2.status, same, b2.headers.get('content-type')], name).toEqual([a.status, a.text, a.headers.get('content-type')]);
    }
    // The refused DELETE and PATCH changed nothing.
    expect((await call(`${base}/private/exists`, { headers: { authorization: 'Bearer s' } })).text).toBe('hidden');
    expect((await call(`${base}/private/absent`, { headers: { authorization: 'Bearer s' } })).status).toBe(404);
  });
});
