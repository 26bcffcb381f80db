import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createBucket, expectError, json } from '../helpers/http.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';

/** One line of `GET /api/v1/{bucket}/?history=true`, as these tests read it. */
interface Line {
  rev: number;
  key: string;
  operation: string;
  time: string;
  type: string | null;
  actor: { kind: string; token_id: string | null } | null;
  value?: unknown;
}

let server: AppServer;
beforeAll(async () => {
  server = await startAppServer();
});
afterAll(async () => {
  await server?.stop();
});

const SECRET = 'log-secret';

async function log(
  bucket: string,
  query = '',
  token = SECRET,
): Promise<{ lines: Line[]; next: string | null; res: Awaited<ReturnType<typeof call>> }> {
  const res = await call(`${server.api}/${bucket}/?history=true${query}`, { token });
  expect(res.status, res.text).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^application\/x-ndjson/);
  const lines = res.text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Line);
  return { lines, next: res.headers.get('kvb-next-cursor'), res };
}

/** A bucket written by the secret key, the write key and a token: returns the bucket and the token's id. */
async function writtenBucket(): Promise<{ bucket: string; tokenId: string; revisions: number[] }> {
  const bucket = await createBucket(server.api, {
    secret_key: SECRET,
    write_key: 'log-write',
    read_key: 'log-read',
    signing_key: 'log-sign',
  });
  const minted = await call(`${server.api}/${bucket}/tokens/`, {
    method: 'POST',
    token: SECRET,
    body: new URLSearchParams({ prefix: 'app/', permissions: 'read,write,delete', ttl: '600' }),
  });
  const token = minted.json() as { access_token: string; id: string };
  const revisions: number[] = [];
  const put = async (key: string, body: string, credential: string) => {
    const res = await call(`${server.api}/${bucket}/${key}`, {
      method: 'PUT',
      body,
      token: credential,
      headers: { 'content-type': 'text/plain' },
    });
    expect(res.status, res.text).toBe(200);
    revisions.push(Number(res.headers.get('kvb-revision')));
  };
  await put('app/a', '1', 'log-write');
  await put('cfg/x', '2', SECRET);
  await put('app/b', '3', token.access_token);
  // One transaction by the token: two keys at one revision, in byte order.
  const txn = await call(`${server.api}/${bucket}`, {
    method: 'POST',
    ...json(
      {
        txn: [
          { set: 'app/z', value: 'z' },
          { set: 'app/c', value: 'c' },
        ],
      },
      { authorization: `Bearer ${token.access_token}` },
    ),
  });
  expect(txn.status, txn.text).toBe(204);
  const del = await call(`${server.api}/${bucket}/app/a`, { method: 'DELETE', token: 'log-write' });
  expect(del.status).toBe(204);
  return { bucket, tokenId: token.id, revisions };
}

describe('the bucket-wide change log (GET /api/v1/{bucket}/?history=true)', () => {
  it('every change in revision order, each revision in key order, with key, operation and actor', async () => {
    const { bucket, tokenId } = await writtenBucket();
    const { lines, res } = await log(bucket);
    expect(lines.map((l) => [l.key, l.operation, l.actor?.kind, l.actor?.token_id ?? null])).toEqual([
      ['app/a', 'set', 'write', null],
      ['cfg/x', 'set', 'secret', null],
      ['app/b', 'set', 'token', tokenId],
      ['app/c', 'transaction', 'token', tokenId],
      ['app/z', 'transaction', 'token', tokenId],
      ['app/a', 'delete', 'write', null],
    ]);
    const revs = lines.map((l) => l.rev);
    expect(revs).toEqual([...revs].sort((a, b) => a - b));
    expect(lines[3]!.rev).toBe(lines[4]!.rev);
    expect(res.headers.get('kvb-revision')).toBe(String(revs.at(-1)));
    expect(res.headers.get('kvb-history-floor')).not.toBeNull();
    expect(lines[0]).not.toHaveProperty('value');
    expect((await log(bucket, '&values=true&limit=1')).lines[0]!.value).toBe('1');
  });

  it('"what did this token change?": actor=token:ID, actor=KIND, under a prefix', async () => {
    const { bucket, tokenId } = await writtenBucket();
    expect((await log(bucket, `&actor=token:${tokenId}`)).lines.map((l) => l.key)).toEqual(['app/b', 'app/c', 'app/z']);
    expect((await log(bucket, '&actor=write')).lines.map((l) => [l.key, l.operation])).toEqual([
      ['app/a', 'set'],
      ['app/a', 'delete'],
    ]);
    expect((await log(bucket, '&prefix=cfg/')).lines.map((l) => l.key)).toEqual(['cfg/x']);
    expect((await log(bucket, '&actor=secret&prefix=app/')).lines).toEqual([]);
  });

  it('since and until take a revision (since: after it) or an RFC 3339 time', async () => {
    const { bucket, revisions } = await writtenBucket();
    const [first, second, third] = revisions as [number, number, number];
    expect((await log(bucket, `&since=${first}&until=${third}`)).lines.map((l) => l.key)).toEqual(['cfg/x', 'app/b']);
    expect((await log(bucket, `&until=${second}`)).lines.map((l) => l.key)).toEqual(['app/a', 'cfg/x']);
    const all = (await log(bucket)).lines;
    const lastTime = all.at(-1)!.time;
    expect((await log(bucket, `&since=${encodeURIComponent(lastTime)}`)).lines.map((l) => l.rev)).toEqual(
      all.filter((l) => l.time >= lastTime).map((l) => l.rev),
    );
    expect((await log(bucket, '&since=2000-01-01')).lines).toHaveLength(all.length);
    expect((await log(bucket, '&until=2000-01-01T00:00:00Z')).lines).toEqual([]);
  });

  it('pages by cursor, one change at a time through a transaction, and the Link continues the same query', async () => {
    const { bucket } = await writtenBucket();
    const all = (await log(bucket)).lines;
    const paged: Line[] = [];
    let query = '&limit=1';
    for (let page = 0; page < 20; page++) {
      const { lines, next, res } = await log(bucket, query);
      paged.push(...lines);
      if (next === null) break;
      expect(res.headers.get('link')).toContain(`cursor=${encodeURIComponent(next)}`);
      query = `&limit=1&cursor=${encodeURIComponent(next)}`;
    }
    expect(paged).toEqual(all);
  });

  it('needs the secret key: the read and write keys 403, no credential 401', async () => {
    const { bucket } = await writtenBucket();
    await expectError(await call(`${server.api}/${bucket}/?history=true`, { token: 'log-read' }), 403, 'forbidden');
    await expectError(await call(`${server.api}/${bucket}/?history=true`, { token: 'log-write' }), 403, 'forbidden');
    await expectError(await call(`${server.api}/${bucket}/?history=true`), 401, 'unauthorized');
  });

  it('a parameter that cannot apply is a 400 naming it, not ignored; so is a bad since, actor or cursor', async () => {
    const { bucket } = await writtenBucket();
    for (const [query, message] of [
      ['&rev=1', /rev cannot be used with history=true/],
      ['&watch=true', /watch cannot be used with history=true/],
      ['&reverse=true', /reverse cannot be used with history=true/],
      ['&format=json', /answers JSONL/],
      ['&since=yesterday', /since must be a revision .* or an RFC 3339 time/],
      ['&until=2026-13-45T00:00:00Z', /until must be/],
      ['&actor=robot', /actor must be one of/],
      ['&cursor=abc', /cursor is not valid/],
      ['&limit=0', /limit must be/],
    ] as const) {
      const res = await call(`${server.api}/${bucket}/?history=true${query}`, { token: SECRET });
      await expectError(res, 400, 'bad_request');
      expect(res.text, query).toMatch(message);
    }
  });

  it('history=false, or no history parameter, is the plain listing as before', async () => {
    const { bucket } = await writtenBucket();
    const res = await call(`${server.api}/${bucket}/?history=false`, { token: SECRET });
    expect(res.status).toBe(200);
    expect(res.text).toBe('app/b\napp/c\napp/z\ncfg/x\n');
  });
});
