import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_BACKEND } from '../helpers/backend.js';
import { exportFile } from '../helpers/export-file.js';
import { type Answer, call, createBucket, expectError, json } from '../helpers/http.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';

const revisionOf = (a: Answer) => Number(a.headers.get('kvb-revision'));

/** Mints a token of the bucket (secret key `s`) for `prefix` with `permissions`. */
async function mint(api: string, bucket: string, prefix: string, permissions: string): Promise<string> {
  const minted = await call(`${api}/${bucket}/tokens/`, {
    method: 'POST',
    headers: { authorization: 'Bearer s' },
    body: new URLSearchParams({ prefix, permissions, ttl: '600' }),
  });
  expect(minted.status, minted.text).toBe(200);
  return (minted.json() as { access_token: string }).access_token;
}

/** Every recorded change of `key` (read with the secret key `s`), newest first. */
async function historyOf(
  url: string,
  key: string,
): Promise<Array<{ rev: number; operation: string; size: number | null; value?: unknown }>> {
  const answer = await call(`${url}${key}?history=true&values=true&limit=1000`, { headers: { authorization: 'Bearer s' } });
  expect(answer.status, answer.text).toBe(200);
  return answer.text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { rev: number; operation: string; size: number | null; value?: unknown });
}

describe(`history hardening (${TEST_BACKEND})`, () => {
  let server: AppServer;
  beforeAll(async () => {
    // No sweep during a test: an expiry must not be logged by the sweeper behind the test's back.
    server = await startAppServer({ config: { sweepIntervalSeconds: 86400 } });
  });
  afterAll(async () => {
    await server?.stop();
  });

  describe('a rollback needs what its answer reveals and what it does', () => {
    it('the write key of a bucket with a read key cannot roll back (its answer would list every key)', async () => {
      const bucket = await createBucket(server.api, { default_ttl: '0', secret_key: 's', read_key: 'r', write_key: 'w' });
      const url = `${server.api}/${bucket}/`;
      for (const k of ['a/x', 'b/secret'])
        expect((await call(`${url}${k}`, { method: 'PUT', body: 'hidden', token: 's' })).status).toBe(200);
      expectError(await call(`${url}?format=json`, { token: 'w' }), 403, 'forbidden');
      expectError(await call(`${server.api}/${bucket}?rollback=0&dry_run=true`, { method: 'POST', token: 'w' }), 403, 'forbidden');
      const attempt = await call(`${server.api}/${bucket}?rollback=0`, { method: 'POST', token: 'w' });
      expectError(attempt, 403, 'forbidden');
      expect(attempt.text).not.toContain('b/secret');
      // Nothing was deleted.
      expect((await call(`${url}b/secret`, { token: 's' })).text).toBe('hidden');
      // The read key cannot roll back either (it may not write).
      expectError(await call(`${server.api}/${bucket}?rollback=0`, { method: 'POST', token: 'r' }), 403, 'forbidden');
    });

    it('the write key of a bucket whose reads are public may roll back (it could list and read it all anyway)', async () => {
      const bucket = await createBucket(server.api, { default_ttl: '0', secret_key: 's', write_key: 'w' });
      const url = `${server.api}/${bucket}/`;
      expect((await call(`${url}k`, { method: 'PUT', body: 'v', token: 'w' })).status).toBe(200);
      const done = await call(`${server.api}/${bucket}?rollback=0`, { method: 'POST', token: 'w' });
      expect(done.status, done.text).toBe(200);
      expect((await call(`${url}k`)).status).toBe(404);
    });

    it('a write,delete token for a/ cannot roll back a/ (nor restore it); read,write,delete can', async () => {
      const bucket = await createBucket(server.api, { default_ttl: '0', secret_key: 's', read_key: 'r', signing_key: 'k'.repeat(32) });
      const url = `${server.api}/${bucket}/`;
      expect((await call(`${url}a/x`, { method: 'PUT', body: 'one', token: 's' })).status).toBe(200);
      const second = await call(`${url}a/x`, { method: 'PUT', body: 'two', token: 's' });
      const writeDelete = await mint(server.api, bucket, 'a/', 'write,delete');
      expectError(await call(`${url}a/x`, { token: writeDelete }), 403, 'forbidden');
      const attempt = await call(`${server.api}/${bucket}?rollback=1&prefix=a/`, { method: 'POST', token: writeDelete });
      expectError(attempt, 403, 'forbidden');
      expect((await call(`${url}a/x`, { token: 's' })).text).toBe('two');
      const full = await mint(server.api, bucket, 'a/', 'read,write,delete');
      const done = await call(`${server.api}/${bucket}?rollback=1&prefix=a/`, { method: 'POST', token: full });
      expect(done.status, done.text).toBe(200);
      expect(revisionOf(done)).toBeGreaterThan(revisionOf(second));
      expect((await call(`${url}a/x`, { token: 's' })).text).toBe('one');
    });
  });

  describe('an import keeps the history of keys it does not touch', () => {
    for (const mode of ['merge', 'replace'] as const) {
      it(`a token's ${mode} import under a/ leaves b/'s past readable and rollable, and records its own keys' changes`, async () => {
        const bucket = await createBucket(server.api, { default_ttl: '0', secret_key: 's', signing_key: 'k'.repeat(32) });
        const url = `${server.api}/${bucket}/`;
        const first = await call(`${url}b/conf`, { method: 'PUT', body: 'old', token: 's' });
        await call(`${url}b/conf`, { method: 'PUT', body: 'new', token: 's' });
        const before = await call(`${url}a/gone`, { method: 'PUT', body: 'was here', token: 's' });
        const token = await mint(server.api, bucket, 'a/', mode === 'merge' ? 'write' : 'write,delete');
        const imported = await call(`${server.api}/${bucket}?mode=${mode}&prefix=a/`, {
          method: 'POST',
          token,
          headers: { 'content-type': 'application/x-ndjson' },
          body: exportFile([{ key: 'a/k', type: 'text', value: '"imported"' }]),
        });
        expect(imported.status, imported.text).toBe(200);
        const importRevision = revisionOf(imported);

        const old = await call(`${url}b/conf?rev=${revisionOf(first)}`, { token: 's' });
        expect(old.status, old.text).toBe(200);
        expect(old.text).toBe('old');
        const plan = await call(`${server.api}/${bucket}?rollback=${revisionOf(first)}&prefix=b/&dry_run=true`, {
          method: 'POST',
          token: 's',
        });
        expect(plan.status, plan.text).toBe(200);
        expect((plan.json() as { changed: number }).changed).toBe(1);
        expect((await historyOf(url, 'b/conf')).map((r) => r.value)).toEqual(['new', 'old']);

        // The imported key's change is in history like any write's, and the state before the import is still readable.
        expect(await historyOf(url, 'a/k')).toMatchObject([{ rev: importRevision, operation: 'import', value: 'imported' }]);
        expect((await call(`${url}a/k?rev=${revisionOf(before)}`, { token: 's' })).status).toBe(404);
        expect((await call(`${url}a/gone?rev=${revisionOf(before)}`, { token: 's' })).text).toBe('was here');
        if (mode === 'replace') {
          expect((await historyOf(url, 'a/gone')).map((r) => r.operation)).toEqual(['import', 'set']);
          expect((await call(`${url}a/gone`, { token: 's' })).status).toBe(404);
        }
      });
    }
  });

  describe('a folder listing at a revision', () => {
    it('lists the folders as of that revision; a future revision is a 400', async () => {
      const bucket = await createBucket(server.api, { default_ttl: '0' });
      const url = `${server.api}/${bucket}/`;
      const first = await call(`${url}f/a/1`, { method: 'PUT', body: '1' });
      await call(`${url}top`, { method: 'PUT', body: 't' });
      await call(`${url}g/1`, { method: 'PUT', body: '1' });
      const last = await call(`${url}f/a/1`, { method: 'DELETE' });
      expect(last.status).toBe(204);

      const past = await call(`${url}?rev=${revisionOf(first)}&delimiter=/&format=json`);
      expect(past.status, past.text).toBe(200);
      expect(past.headers.get('kvb-revision')).toBe(String(revisionOf(first)));
      expect(past.json()).toEqual([{ prefix: 'f/' }]);
      const middle = await call(`${url}?rev=${revisionOf(first) + 1}&delimiter=/&format=json&meta=true`);
      expect(middle.json()).toMatchObject([{ prefix: 'f/' }, { key: 'top', type: 'text', size: 1 }]);
      expect((await call(`${url}?delimiter=/&format=json`)).json()).toEqual([{ prefix: 'g/' }, { key: 'top' }]);
      expectError(await call(`${url}?rev=${revisionOf(last) + 5}&delimiter=/&format=json`), 400, 'bad_request');
    });
  });

  describe('the time of a revision is its own', () => {
    it('a key expired before a revision that logged no change is absent at that revision', { timeout: 30_000 }, async () => {
      const bucket = await createBucket(server.api, { default_ttl: '0' });
      const url = `${server.api}/${bucket}/`;
      const written = await call(`${url}e/k?ttl=1`, { method: 'PUT', body: 'short-lived' });
      expect(written.status).toBe(200);
      // On the real clock, not a test clock: a revision's time is the one the store stamps it with
      // (the real time), and the next revision must come after the expiry. One second, bounded.
      await expect.poll(async () => (await call(`${url}e/k`)).status, { timeout: 10_000, interval: 100 }).toBe(404);
      // Deletes only absent keys: takes a revision, changes no key.
      const txn = await call(`${server.api}/${bucket}`, { method: 'POST', ...json({ txn: [{ delete: 'absent' }] }) });
      expect(txn.status, txn.text).toBe(204);
      const revision = revisionOf(txn);
      expect(revision).toBe(revisionOf(written) + 1);
      expectError(await call(`${url}e/k?rev=${revision}`), 404, 'not_found');
      expect((await call(`${url}?rev=${revision}&format=json`)).json()).toEqual([]);
      // At the write's own revision it was live.
      expect((await call(`${url}e/k?rev=${revisionOf(written)}`)).text).toBe('short-lived');
    });
  });
});

describe(`history below the floor (${TEST_BACKEND})`, () => {
  let server: AppServer;
  beforeAll(async () => {
    // A one-second window pruned every second: the floor rises while the test waits for it.
    server = await startAppServer({ config: { watchRetentionSeconds: 1, sweepIntervalSeconds: 1 } });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('a folder listing below the floor is a 410', { timeout: 30_000 }, async () => {
    const bucket = await createBucket(server.api, { default_ttl: '0' });
    const url = `${server.api}/${bucket}/`;
    const first = await call(`${url}f/a/1`, { method: 'PUT', body: '1' });
    await expect
      .poll(
        async () => {
          await call(`${url}tick`, { method: 'PUT', body: 'x' });
          return (await call(`${url}f/a/1?rev=${revisionOf(first)}`)).status;
        },
        { timeout: 20_000, interval: 500 },
      )
      .toBe(410);
    expectError(await call(`${url}?rev=${revisionOf(first)}&delimiter=/&format=json`), 410, 'gone');
  });
});

describe(`history counts toward a byte bound (${TEST_BACKEND})`, () => {
  let server: AppServer;
  const maxBytes = 100_000;
  beforeAll(async () => {
    server = await startAppServer({ config: { maxBytesPerBucket: maxBytes, sweepIntervalSeconds: 1 } });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('40 writes of 12 KB to one key keep at most the bucket byte quota of history above the floor', { timeout: 60_000 }, async () => {
    const bucket = await createBucket(server.api, { default_ttl: '0', secret_key: 's' });
    const url = `${server.api}/${bucket}/`;
    const size = 12_000;
    let last: Answer | undefined;
    for (let i = 0; i < 40; i++) {
      last = await call(`${url}big`, {
        method: 'PUT',
        body: String(i % 10).repeat(size),
        headers: { 'content-type': 'text/plain' },
        token: 's',
      });
      expect(last.status, last.text).toBe(200);
    }
    const kept = async () => {
      const floor = Number((await call(`${url}big?history=true&limit=1`, { token: 's' })).headers.get('kvb-history-floor'));
      const above = (await historyOf(url, 'big')).filter((r) => r.rev > floor);
      return above.reduce((sum, r) => sum + 'big'.length + (r.size ?? 0), 0);
    };
    await expect.poll(kept, { timeout: 20_000, interval: 200 }).toBeLessThanOrEqual(maxBytes);
    // The oldest history went (410), the newest stays, and the present is untouched.
    expectError(await call(`${url}big?rev=1`, { token: 's' }), 410, 'gone');
    expect((await call(`${url}big?rev=${revisionOf(last!) - 1}`, { token: 's' })).text).toBe('8'.repeat(size));
    expect((await call(`${url}big`, { token: 's' })).text).toBe('9'.repeat(size));
    expect(await kept()).toBeGreaterThan(0);
  });
});
