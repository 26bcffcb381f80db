import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SERVER_POSTGRES_URL, TEST_BACKEND, dropSchema, postgresUrl, uniqueName, withAdminClient } from '../helpers/backend.js';
import { exportFile } from '../helpers/export-file.js';
import { call, createBucket, expectError, json } from '../helpers/http.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';

/** One `?history=true` line, as far as these tests read it. */
interface Line {
  rev: number;
  operation: string;
  actor: { kind: string; token_id: string | null; address: string | null } | null;
}

const FIXTURES = new URL('../fixtures/', import.meta.url).pathname;

let plain: AppServer;
let proxied: AppServer;
beforeAll(async () => {
  [plain, proxied] = await Promise.all([
    startAppServer({ config: { sweepIntervalSeconds: 1 } }),
    startAppServer({ config: { trustProxy: '127.0.0.1' } }),
  ]);
});
afterAll(async () => {
  await Promise.all([plain?.stop(), proxied?.stop()]);
});

async function history(api: string, bucket: string, key: string, credential: string, query = ''): Promise<Line[]> {
  const res = await call(`${api}/${bucket}/${encodeURIComponent(key)}?history=true${query}`, { token: credential });
  expect(res.status, res.text).toBe(200);
  return res.text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Line);
}

async function mint(api: string, bucket: string, secret: string, prefix: string): Promise<{ access_token: string; id: string }> {
  const res = await call(`${api}/${bucket}/tokens/`, {
    method: 'POST',
    token: secret,
    body: new URLSearchParams({ prefix, permissions: 'read,write,delete', ttl: '600' }),
  });
  expect(res.status, res.text).toBe(200);
  return res.json() as { access_token: string; id: string };
}

describe('history records who made each change (the actor)', () => {
  it('each credential kind records its kind and the socket address, for every kind of change', async () => {
    // No write_key: anonymous callers and the read key may write too, so every kind can be seen on one bucket.
    const open = await createBucket(plain.api, { secret_key: 'actor-secret', read_key: 'actor-read', signing_key: 'actor-sign' });
    const keyed = await createBucket(plain.api, { secret_key: 'actor-secret2', write_key: 'actor-write' });
    const token = await mint(plain.api, open, 'actor-secret', 'tok/');
    const u = (bucket: string, key: string, q = '') => `${plain.api}/${bucket}/${encodeURIComponent(key)}${q}`;
    expect((await call(u(open, 'k'), { method: 'POST', body: 's', token: 'actor-secret' })).status).toBe(200);
    expect((await call(u(open, 'k'), { method: 'POST', body: 'r', token: 'actor-read' })).status).toBe(200);
    expect((await call(u(open, 'k'), { method: 'DELETE' })).status).toBe(204);
    expect(
      (
        await call(`${plain.api}/${open}`, {
          method: 'POST',
          ...json({ txn: [{ set: 'tok/t', value: 1 }] }, { authorization: `Bearer ${token.access_token}` }),
        })
      ).status,
    ).toBe(204);
    expect((await call(u(keyed, 'n'), { method: 'PATCH', body: '+1', token: 'actor-write' })).status).toBe(200);
    // A rollback by the secret key, and an import by the write key.
    const secondCounter = Number(
      (await call(u(keyed, 'n'), { method: 'PATCH', body: '+1', token: 'actor-write' })).headers.get('kvb-revision'),
    );
    expect((await call(`${plain.api}/${keyed}?rollback=${secondCounter - 1}`, { method: 'POST', token: 'actor-secret2' })).status).toBe(
      200,
    );

    const at = (kind: string, tokenId: string | null = null) => ({ kind, token_id: tokenId, address: '127.0.0.1' });
    expect((await history(plain.api, open, 'k', 'actor-secret')).map((l) => [l.operation, l.actor])).toEqual([
      ['delete', at('anonymous')],
      ['set', at('read')],
      ['set', at('secret')],
    ]);
    expect((await history(plain.api, open, 'tok/t', 'actor-secret')).map((l) => [l.operation, l.actor])).toEqual([
      ['transaction', at('token', token.id)],
    ]);
    expect((await history(plain.api, keyed, 'n', 'actor-secret2')).map((l) => [l.operation, l.actor])).toEqual([
      ['rollback', at('secret')],
      ['counter', at('write')],
      ['counter', at('write')],
    ]);
    // An import is history like any write: its change to the key is recorded on top, with the importer as actor.
    const exported = await call(`${plain.api}/${keyed}/?export=true`, { token: 'actor-secret2' });
    expect(exported.status).toBe(200);
    const imported = await call(`${plain.api}/${keyed}`, {
      method: 'POST',
      body: exported.body,
      headers: { 'content-type': 'application/x-ndjson', authorization: 'Bearer actor-write' },
    });
    expect(imported.status, imported.text).toBe(200);
    expect((await history(plain.api, keyed, 'n', 'actor-secret2')).map((l) => [l.operation, l.actor])).toEqual([
      ['import', at('write')],
      ['rollback', at('secret')],
      ['counter', at('write')],
      ['counter', at('write')],
    ]);
  });

  it("a token's id is the one minting answered; neither the token nor any credential appears in history or the logs", async () => {
    const bucket = await createBucket(plain.api, {
      secret_key: 'leak-secret',
      read_key: 'leak-read',
      write_key: 'leak-write',
      signing_key: 'leak-sign',
    });
    const token = await mint(plain.api, bucket, 'leak-secret', 'p/');
    expect(token.id).toMatch(/^[A-Za-z0-9_-]{8,64}$/);
    const other = await mint(plain.api, bucket, 'leak-secret', 'p/');
    expect(other.id).not.toBe(token.id);
    expect((await call(`${plain.api}/${bucket}/p%2Fx`, { method: 'POST', body: '1', token: token.access_token })).status).toBe(200);
    const res = await call(`${plain.api}/${bucket}/p%2Fx?history=true&values=true`, { token: 'leak-secret' });
    const line = JSON.parse(res.text.trim()) as Line;
    expect(line.actor).toEqual({ kind: 'token', token_id: token.id, address: '127.0.0.1' });
    for (const secret of [token.access_token, ...token.access_token.split('.'), 'leak-secret', 'leak-read', 'leak-write', 'leak-sign']) {
      expect(res.text).not.toContain(secret);
    }
    expect(plain.logs()).not.toContain(token.access_token.split('.')[2]);
  });

  it('writes batched together (group commit) each keep their own actor', async () => {
    const bucket = await createBucket(plain.api, { secret_key: 'g-secret', write_key: 'g-write', signing_key: 'g-sign' });
    const token = await mint(plain.api, bucket, 'g-secret', 'g/');
    const credentials: Array<[string, Line['actor']]> = [
      ['g-secret', { kind: 'secret', token_id: null, address: '127.0.0.1' }],
      ['g-write', { kind: 'write', token_id: null, address: '127.0.0.1' }],
      [token.access_token, { kind: 'token', token_id: token.id, address: '127.0.0.1' }],
    ];
    // Warm the credential caches first, so the writes below arrive together.
    for (const [credential] of credentials)
      expect((await call(`${plain.api}/${bucket}/g%2Fwarm`, { method: 'POST', body: '0', token: credential })).status).toBe(200);
    const writes = Array.from({ length: 60 }, (_, i) => ({ key: `g/${i % 4}`, credential: credentials[i % 3]! }));
    const answers = await Promise.all(
      writes.map((w, i) =>
        call(`${plain.api}/${bucket}/${encodeURIComponent(w.key)}`, { method: 'POST', body: String(i), token: w.credential[0] }),
      ),
    );
    const expected = new Map<number, Line['actor']>();
    answers.forEach((a, i) => {
      expect(a.status).toBe(200);
      expected.set(Number(a.headers.get('kvb-revision')), writes[i]!.credential[1]);
    });
    for (const key of ['g/0', 'g/1', 'g/2', 'g/3']) {
      for (const line of await history(plain.api, bucket, key, 'g-secret'))
        expect(line.actor, `revision ${line.rev}`).toEqual(expected.get(line.rev));
    }
  });

  it("a token's replacing import records the token on the keys it sets and on the keys it removes", async () => {
    const bucket = await createBucket(plain.api, { secret_key: 'actor-secret3', signing_key: 'actor-sign3' });
    const u = (key: string) => `${plain.api}/${bucket}/${encodeURIComponent(key)}`;
    expect((await call(u('imp/gone'), { method: 'POST', body: 'was here', token: 'actor-secret3' })).status).toBe(200);
    const token = await mint(plain.api, bucket, 'actor-secret3', 'imp/');
    const imported = await call(`${plain.api}/${bucket}?mode=replace&prefix=imp/`, {
      method: 'POST',
      body: exportFile([{ key: 'imp/k', type: 'text', value: '"imported"' }]),
      headers: { 'content-type': 'application/x-ndjson', authorization: `Bearer ${token.access_token}` },
    });
    expect(imported.status, imported.text).toBe(200);
    const byToken = { kind: 'token', token_id: token.id, address: '127.0.0.1' };
    expect((await history(plain.api, bucket, 'imp/k', 'actor-secret3')).map((l) => [l.operation, l.actor])).toEqual([['import', byToken]]);
    expect((await history(plain.api, bucket, 'imp/gone', 'actor-secret3')).map((l) => [l.operation, l.actor])).toEqual([
      ['import', byToken],
      ['set', { kind: 'secret', token_id: null, address: '127.0.0.1' }],
    ]);
  });

  it('with --trust-proxy the address is the X-Forwarded-For client; without it, the socket address', async () => {
    const headers = { 'x-forwarded-for': '203.0.113.7' };
    const viaProxy = await createBucket(proxied.api);
    const direct = await createBucket(plain.api);
    expect((await call(`${proxied.api}/${viaProxy}/k`, { method: 'POST', body: '1', headers })).status).toBe(200);
    expect((await call(`${plain.api}/${direct}/k`, { method: 'POST', body: '1', headers })).status).toBe(200);
    expect((await history(proxied.api, viaProxy, 'k', '')).map((l) => l.actor)).toEqual([
      { kind: 'anonymous', token_id: null, address: '203.0.113.7' },
    ]);
    expect((await history(plain.api, direct, 'k', '')).map((l) => l.actor)).toEqual([
      { kind: 'anonymous', token_id: null, address: '127.0.0.1' },
    ]);
  });

  it('with --trust-proxy a forwarded address is recorded only when it parses as an IP address', async () => {
    const bucket = await createBucket(proxied.api);
    const sent = ['not-an-ip', '<b>markup</b>', '9'.repeat(4000), 'fe80::1%<x>', '2001:db8::7', '203.0.113.9'];
    for (const [i, forwarded] of sent.entries()) {
      const res = await call(`${proxied.api}/${bucket}/k${i}`, { method: 'POST', body: '1', headers: { 'x-forwarded-for': forwarded } });
      expect(res.status, res.text).toBe(200);
    }
    const addresses = [];
    for (const i of sent.keys()) addresses.push((await history(proxied.api, bucket, `k${i}`, ''))[0]!.actor!.address);
    expect(addresses).toEqual([null, null, null, null, '2001:db8::7', '203.0.113.9']);
  });

  it("the TTL sweeper's expiries record the server itself, with no address", async () => {
    const bucket = await createBucket(plain.api);
    expect((await call(`${plain.api}/${bucket}/short?ttl=1`, { method: 'POST', body: 'x' })).status).toBe(200);
    await expect
      .poll(async () => (await history(plain.api, bucket, 'short', '')).map((l) => [l.operation, l.actor]), {
        timeout: 15_000,
        interval: 250,
      })
      .toEqual([
        ['expire', { kind: 'server', token_id: null, address: null }],
        ['set', { kind: 'anonymous', token_id: null, address: '127.0.0.1' }],
      ]);
  });

  describe('the secret key can filter a key history by actor (actor=KIND or actor=token:ID)', () => {
    it("keeps only that actor's changes, page by page, and refuses other credentials and bad values", async () => {
      const bucket = await createBucket(plain.api, {
        secret_key: 'f-secret',
        read_key: 'f-read',
        write_key: 'f-write',
        signing_key: 'f-sign',
      });
      const [a, b] = [await mint(plain.api, bucket, 'f-secret', 'x'), await mint(plain.api, bucket, 'f-secret', 'x')];
      const by = [a.access_token, 'f-write', b.access_token, a.access_token, 'f-secret', a.access_token];
      const revisions: number[] = [];
      for (const [i, credential] of by.entries()) {
        const res = await call(`${plain.api}/${bucket}/x`, { method: 'POST', body: String(i), token: credential });
        expect(res.status).toBe(200);
        revisions.push(Number(res.headers.get('kvb-revision')));
      }
      const revsOf = (lines: Line[]) => lines.map((l) => l.rev);
      const ofA = by.flatMap((c, i) => (c === a.access_token ? [revisions[i]!] : [])).reverse();
      expect(revsOf(await history(plain.api, bucket, 'x', 'f-secret', `&actor=token:${a.id}`))).toEqual(ofA);
      expect(revsOf(await history(plain.api, bucket, 'x', 'f-secret', '&actor=token'))).toHaveLength(4);
      expect(revsOf(await history(plain.api, bucket, 'x', 'f-secret', '&actor=write'))).toEqual([revisions[1]]);
      expect(await history(plain.api, bucket, 'x', 'f-secret', '&actor=anonymous')).toEqual([]);

      // Pages of one keep the filter in their cursor link.
      const paged: number[] = [];
      let next: string | null = `${plain.api}/${bucket}/x?history=true&limit=1&actor=token:${a.id}`;
      while (next) {
        const page = await call(next, { token: 'f-secret' });
        expect(page.status, page.text).toBe(200);
        paged.push(
          ...page.text
            .split('\n')
            .filter(Boolean)
            .map((l) => (JSON.parse(l) as Line).rev),
        );
        const link = page.headers.get('link');
        next = link ? new URL(/<([^>]+)>/.exec(link)![1]!, plain.url).href : null;
      }
      expect(paged).toEqual(ofA);

      expectError(await call(`${plain.api}/${bucket}/x?history=true&actor=write`, { token: 'f-read' }), 403, 'forbidden');
      expectError(await call(`${plain.api}/${bucket}/x?history=true&actor=write`, { token: a.access_token }), 403, 'forbidden');
      expectError(await call(`${plain.api}/${bucket}/x?history=true&actor=write`), 401, 'unauthorized');
      for (const bad of ['admin', 'write:abc', 'token:', 'token:a b', '']) {
        expectError(
          await call(`${plain.api}/${bucket}/x?history=true&actor=${encodeURIComponent(bad)}`, { token: 'f-secret' }),
          400,
          'bad_request',
        );
      }
      // Without the filter a reader still sees every change, each with its actor.
      expect(revsOf(await history(plain.api, bucket, 'x', 'f-read'))).toEqual([...revisions].reverse());
    });
  });

  it('changes recorded before the upgrade have no actor (null); new ones do', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'kvb-actor-upgrade-'));
    let schema: string | undefined;
    let id: string;
    let db: string | undefined;
    if (TEST_BACKEND === 'postgres') {
      schema = uniqueName('kvb_actor_v010');
      const dump = readFileSync(join(FIXTURES, 'kvb-0.1.0-postgres.sql'), 'utf8').replaceAll('kvb_fixture_v010', schema);
      await withAdminClient((c) => c.query(dump));
      db = postgresUrl({ schema }, SERVER_POSTGRES_URL);
      id = '55fe7b53-e621-4db3-9ddb-724cc40889cd';
    } else {
      copyFileSync(join(FIXTURES, 'kvb-0.1.0.sqlite'), join(dataDir, 'kvb.db'));
      id = 'aee25870-221a-47be-921c-d4c26160684d';
    }
    const server = await startAppServer({ db: db ?? join(dataDir, 'kvb.db') });
    try {
      expect((await history(server.api, id, 'greeting', 's3cret')).map((l) => l.actor)).toEqual([null]);
      expect((await call(`${server.api}/${id}/greeting`, { method: 'POST', body: 'hi', token: 's3cret' })).status).toBe(200);
      expect((await history(server.api, id, 'greeting', 's3cret')).map((l) => l.actor)).toEqual([
        { kind: 'secret', token_id: null, address: '127.0.0.1' },
        null,
      ]);
    } finally {
      await server.stop();
      rmSync(dataDir, { recursive: true, force: true });
      if (schema) await dropSchema(schema);
    }
  });
});
