import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempConfigHome } from '../helpers/cli.js';
import { call, createBucket, expectError, json } from '../helpers/http.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';
import { KVB_BIN } from '../helpers/server.js';
import { testClock } from '../helpers/test-clock.js';

/*
 * Fencing tokens over HTTP and from the CLI: a key's create revision (the revision at which it
 * last became live from absent or expired) in Kvb-Create-Revision when a read asks for it, the
 * transaction check {"check": K, "created": N}, and `kvb lock`'s KVB_LOCK_REVISION with
 * `kvb txn --fence`. Run by the sqlite, postgres and pgbouncer projects alike.
 */
let server: AppServer;
let bucket: string;
const SECRET = 'fence-secret';
const auth = { authorization: `Bearer ${SECRET}` };
// The server's time: a TTL runs out when a test moves it on.
const clock = testClock();

beforeAll(async () => {
  server = await startAppServer({ clock: clock.now });
  bucket = await createBucket(server.api, { secret_key: SECRET, signing_key: 'fence-signing', default_ttl: '0' });
});
afterAll(async () => {
  await server?.stop();
});

const url = (key: string, query = '') => `${server.api}/${bucket}/${encodeURIComponent(key)}${query}`;
const put = (key: string, value: string, headers: Record<string, string> = {}, query = '') =>
  call(url(key, query), { method: 'PUT', body: value, headers: { ...auth, 'content-type': 'text/plain', ...headers } });
const txn = (ops: unknown, token = SECRET) =>
  call(`${server.api}/${bucket}`, { method: 'POST', ...json({ txn: ops }, { authorization: `Bearer ${token}` }) });
const revisionOf = (answer: { headers: Headers }) => Number(answer.headers.get('kvb-revision'));
/** The key's create revision as GET answers it when asked. */
const createRevision = async (key: string) => {
  const got = await call(url(key), { headers: { ...auth, 'kvb-include': 'create-revision' } });
  expect(got.status, got.text).toBe(200);
  return Number(got.headers.get('kvb-create-revision'));
};

describe('Kvb-Create-Revision', () => {
  it('is answered on GET and HEAD only when asked with Kvb-Include: create-revision', async () => {
    const first = revisionOf(await put('h/k', 'one'));
    await put('h/k', 'two');
    const plain = await call(url('h/k'), { headers: auth });
    expect(plain.headers.get('kvb-create-revision')).toBeNull();
    const asked = await call(url('h/k'), { headers: { ...auth, 'kvb-include': 'create-revision' } });
    expect(asked.text).toBe('two');
    expect(asked.headers.get('kvb-revision')).toBe(String(first + 1));
    expect(asked.headers.get('kvb-create-revision')).toBe(String(first));
    const head = await call(url('h/k'), { method: 'HEAD', headers: { ...auth, 'kvb-include': 'Create-Revision' } });
    expect(head.status).toBe(200);
    expect(head.headers.get('kvb-create-revision')).toBe(String(first));
  });

  it('an unknown Kvb-Include is a 400 in the envelope, whether or not the key exists', async () => {
    await put('h/bad', 'x');
    expectError(await call(url('h/bad'), { headers: { ...auth, 'kvb-include': 'everything' } }), 400, 'bad_request');
    expectError(await call(url('h/never'), { headers: { ...auth, 'kvb-include': 'create-revision, body' } }), 400, 'bad_request');
  });

  it('a write over a live value keeps it; a write after a delete or after the TTL ran out sets a new one', async () => {
    const created = revisionOf(await put('c/k', 'a'));
    await put('c/k', 'b');
    expect((await txn([{ set: 'c/k', value: 'c' }])).status).toBe(204);
    expect(await createRevision('c/k')).toBe(created);

    expect((await call(url('c/k'), { method: 'DELETE', headers: auth })).status).toBe(204);
    const again = revisionOf(await put('c/k', 'd'));
    expect(again).toBeGreaterThan(created);
    expect(await createRevision('c/k')).toBe(again);

    const short = revisionOf(await put('c/ttl', 'x', {}, '?ttl=1'));
    expect(await createRevision('c/ttl')).toBe(short);
    clock.advance(1000);
    expect((await call(url('c/ttl'), { headers: auth })).status).toBe(404);
    const recreated = revisionOf(await call(url('c/ttl'), { method: 'PUT', body: 'y', headers: { ...auth, 'if-none-match': '*' } }));
    expect(await createRevision('c/ttl')).toBe(recreated);
    expect(recreated).toBeGreaterThan(short);
  });
});

describe('transaction check {"check": K, "created": N}', () => {
  it('holds while K is live with create revision N: a fenced write commits; otherwise 409 naming it, nothing written', async () => {
    const token = revisionOf(await put('t/lock', 'holder-1', { 'if-none-match': '*' }, '?ttl=60'));
    // A renewal is a write: the revision moves, the create revision (the token) stays.
    const renewed = revisionOf(await put('t/lock', 'holder-1', { 'if-match': `"${token}"` }, '?ttl=60'));
    expect(renewed).toBe(token + 1);
    const fenced = await txn([
      { check: 't/lock', created: token },
      { set: 't/work', value: 'by holder 1' },
    ]);
    expect(fenced.status, fenced.text).toBe(204);

    const stale = await txn([
      { set: 't/work', value: 'stale' },
      { check: 't/lock', created: renewed },
    ]);
    expectError(stale, 409, 'conflict');
    expect(stale.headers.get('kvb-failed-checks')).toBe('1');
    const absent = await txn([
      { check: 't/none', created: token },
      { set: 't/work', value: 'stale' },
    ]);
    expect(absent.headers.get('kvb-failed-checks')).toBe('0');
    expect((await call(url('t/work'), { headers: auth })).text).toBe('by holder 1');
  });

  it('takes exactly one of rev, exists and created, an integer; anything else is a 400', async () => {
    for (const op of [
      { check: 'k', created: 1, rev: 1 },
      { check: 'k', created: 1, exists: true },
      { check: 'k', created: '1' },
      { check: 'k', created: -1 },
      { check: 'k', created: 1.5 },
      { check: 'k', created: null },
    ]) {
      expectError(await txn([op]), 400, 'bad_request');
    }
  });

  it('needs read permission on its key, as the other checks do', async () => {
    await put('p/lock', 'x');
    const minted = await call(`${server.api}/${bucket}/tokens/`, {
      method: 'POST',
      headers: auth,
      body: new URLSearchParams({ prefix: 'p/', permissions: 'write', ttl: '60' }),
    });
    const { access_token: writeOnly } = minted.json() as { access_token: string };
    expectError(
      await txn(
        [
          { check: 'p/lock', created: 1 },
          { set: 'p/w', value: 'x' },
        ],
        writeOnly,
      ),
      403,
      'forbidden',
    );
  });
});

describe('kvb lock and fenced CLI writes', () => {
  const env = () => ({ KVB_URL: server.url, KVB_BUCKET: bucket, KVB_TOKEN: SECRET, XDG_CONFIG_HOME: tempConfigHome() });

  it("kvb lock gives its command KVB_LOCK_REVISION, the lock key's create revision; kvb txn --fence with it commits", async () => {
    const script = 'echo "token=$KVB_LOCK_REVISION" >&2 && node "$KVB" txn --fence "$KVB_LOCK:$KVB_LOCK_REVISION" --set cli/report=done';
    const run = await execa('node', [KVB_BIN, 'lock', 'cli/lock', '--', 'sh', '-c', script], {
      env: { ...env(), KVB: KVB_BIN },
      reject: false,
    });
    expect(run.exitCode, run.stderr).toBe(0);
    const token = Number(/^token=(\d+)$/m.exec(run.stderr)?.[1]);
    // The token is the revision of the write that created the lock key (its history's first set).
    const history = await call(url('cli/lock', '?history=true'), { headers: auth });
    const records = history.text
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { rev: number; operation: string });
    expect(records.at(-1)).toMatchObject({ rev: token, operation: 'set' });
    expect(records[0]?.operation).toBe('delete');
    const report = await call(url('cli/report'), { headers: auth });
    expect(report.text).toBe('done');
    expect(revisionOf(report)).toBeGreaterThan(token);
    expect(run.stderr).toContain(`fencing token ${token}`);
  });

  it('a fenced write with the token of a lock since taken by another holder exits 6 and writes nothing', async () => {
    const first = revisionOf(await put('cli/stale', 'a', { 'if-none-match': '*' }));
    expect((await call(url('cli/stale'), { method: 'DELETE', headers: auth })).status).toBe(204);
    const second = revisionOf(await put('cli/stale', 'b', { 'if-none-match': '*' }));
    const stale = await execa('node', [KVB_BIN, 'txn', '--fence', `cli/stale:${first}`, '--set', 'cli/out=stale'], {
      env: env(),
      reject: false,
    });
    expect(stale.exitCode).toBe(6);
    expect(stale.stderr).toContain(`--fence cli/stale:${first}`);
    expect((await call(url('cli/out'), { headers: auth })).status).toBe(404);
    const current = await execa('node', [KVB_BIN, 'txn', '--fence', `cli/stale:${second}`, '--set', 'cli/out=current'], {
      env: env(),
      reject: false,
    });
    expect(current.exitCode, current.stderr).toBe(0);
    expect((await call(url('cli/out'), { headers: auth })).text).toBe('current');
  });

  it('--fence takes LOCK:TOKEN and guards writes: anything else is a usage error (exit 1) before any request', async () => {
    for (const args of [
      ['--fence', 'no-token', '--set', 'a=1'],
      ['--fence', 'lock:12x', '--set', 'a=1'],
      ['--fence', 'lock:5'],
    ]) {
      const run = await execa('node', [KVB_BIN, 'txn', ...args], { env: { ...env(), KVB_URL: 'http://127.0.0.1:9' }, reject: false });
      expect(run.exitCode, run.stderr).toBe(1);
      expect(run.stderr).toMatch(/--fence/);
    }
  });
});
