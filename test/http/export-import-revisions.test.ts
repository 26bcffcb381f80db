import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportFile } from '../helpers/export-file.js';
import { call, createBucket } from '../helpers/http.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';

/** Export and import with revisions: the export header's `rev`, an import as one revision, ETags of imported keys. */
let server: AppServer;
let bucket: string;
const auth = { authorization: 'Bearer admin' };

beforeAll(async () => {
  server = await startAppServer();
  bucket = await createBucket(server.api, { secret_key: 'admin' });
});
afterAll(async () => {
  await server.stop();
});

const put = (key: string, body: string) => call(`${server.api}/${bucket}/${key}`, { method: 'PUT', body, headers: auth });
const revisionOf = async () => Number((await call(`${server.api}/${bucket}/?limit=1`, { headers: auth })).headers.get('kvb-revision'));

describe('Export and import with bucket revisions', () => {
  it('the export header carries the bucket revision of its snapshot ("rev"), also as Kvb-Revision', async () => {
    expect((await put('a', '1')).status).toBeLessThan(300);
    expect((await put('b', '2')).status).toBeLessThan(300);
    const rev = await revisionOf();
    expect(rev).toBe(2);
    const res = await call(`${server.api}/${bucket}/?export=true`, { headers: auth });
    expect(res.status, res.text).toBe(200);
    const header = JSON.parse(res.text.split('\n')[0]!) as Record<string, unknown>;
    expect(header).toMatchObject({ kvb: 'export', version: 1, bucket, rev });
    // rev sits before exported_at, as the issue spells the header.
    expect(Object.keys(header)).toEqual(['kvb', 'version', 'bucket', 'rev', 'exported_at']);
    expect(res.headers.get('kvb-revision')).toBe(String(rev));
  });

  it('an import is ONE revision (previous + 1): the answer says it, and every imported key carries it as its ETag', async () => {
    const before = await revisionOf();
    const file = exportFile([
      { key: 'imp/1', type: 'text', value: '"x"' },
      { key: 'imp/2', type: 'int64', value: '"42"' },
      { key: 'imp/3', type: 'json', value: '{"n":1}' },
    ]);
    const res = await call(`${server.api}/${bucket}`, {
      method: 'POST',
      body: file,
      headers: { ...auth, 'content-type': 'application/x-ndjson' },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.json()).toEqual({ imported: 3, skipped: 0, rev: before + 1 });
    expect(res.headers.get('kvb-revision')).toBe(String(before + 1));
    expect(await revisionOf()).toBe(before + 1);
    for (const key of ['imp/1', 'imp/2', 'imp/3']) {
      const got = await call(`${server.api}/${bucket}/${key}`, { headers: auth });
      expect(got.status).toBe(200);
      expect(got.headers.get('kvb-revision')).toBe(String(before + 1));
      expect(got.headers.get('etag')).toBe(`"${before + 1}"`);
    }
    // The ETag is usable: If-Match with it succeeds once, and the stale one then fails.
    const etag = `"${before + 1}"`;
    expect(
      (await call(`${server.api}/${bucket}/imp/1`, { method: 'PUT', body: 'y', headers: { ...auth, 'if-match': etag } })).status,
    ).toBeLessThan(300);
    expect(
      (await call(`${server.api}/${bucket}/imp/2`, { method: 'PUT', body: '7', headers: { ...auth, 'if-match': `"${before}"` } })).status,
    ).toBe(412);
    // Keys the import did not touch keep their revisions.
    expect((await call(`${server.api}/${bucket}/a`, { headers: auth })).headers.get('kvb-revision')).toBe('1');
  });

  it('a refused import (bad line) changes no revision', async () => {
    const before = await revisionOf();
    const bad = exportFile([{ key: 'z', type: 'int64', value: '"nope"' }]);
    const res = await call(`${server.api}/${bucket}`, {
      method: 'POST',
      body: bad,
      headers: { ...auth, 'content-type': 'application/x-ndjson' },
    });
    expect(res.status).toBe(400);
    expect(await revisionOf()).toBe(before);
  });
});
