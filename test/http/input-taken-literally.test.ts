import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AppServer, startAppServer } from '../helpers/app-server.js';
import { exportFile } from '../helpers/export-file.js';
import { call, createBucket, expectError } from '../helpers/http.js';

/** Input that cannot be stored as sent is refused with a 400, never altered and stored. */
let server: AppServer;
let bucket: string;
const admin = { authorization: 'Bearer admin' };

beforeAll(async () => {
  server = await startAppServer();
  bucket = await createBucket(server.api, { secret_key: 'admin' });
});
afterAll(async () => {
  await server?.stop();
});

const txn = (body: string | Buffer) =>
  call(`${server.api}/${bucket}`, { method: 'POST', body, headers: { ...admin, 'content-type': 'application/json' } });
const revision = async () => (await call(`${server.api}/${bucket}/`, { headers: admin })).headers.get('kvb-revision');

describe('a text value with a lone surrogate is refused, not stored as U+FFFD', () => {
  it('in a transaction, typed or not', async () => {
    const before = await revision();
    for (const body of [
      '{"txn":[{"set":"s","value":"a\\ud800b"}]}',
      '{"txn":[{"set":"s","value":"\\udc00"}]}',
      '{"txn":[{"set":"s","value":"x\\ud800","type":"text"}]}',
    ]) {
      const res = await txn(body);
      expectError(res, 400, 'bad_request');
      expect(res.json()).toMatchObject({ error: { detail: expect.stringMatching(/lone surrogate/) } });
    }
    // A surrogate pair is a character like any other; JSON keeps its escapes as written.
    expect((await txn('{"txn":[{"set":"pair","value":"\\ud83d\\ude00"},{"set":"j","value":["\\ud800"]}]}')).status).toBe(204);
    expect((await call(`${server.api}/${bucket}/pair`, { headers: admin })).text).toBe('\u{1F600}');
    expect((await call(`${server.api}/${bucket}/j`, { headers: admin })).text).toBe('["\\ud800"]');
    expect((await call(`${server.api}/${bucket}/s`, { headers: admin })).status).toBe(404);
    expect(Number(await revision())).toBe(Number(before) + 1);
  });

  it('in a transaction body that is not valid UTF-8', async () => {
    const before = await revision();
    const body = Buffer.concat([Buffer.from('{"txn":[{"set":"u","value":"'), Buffer.from([0xed, 0xa0, 0x80, 0xff]), Buffer.from('"}]}')]);
    expectError(await txn(body), 400, 'bad_request');
    expect(await revision()).toBe(before);
  });

  it('in an NDJSON import', async () => {
    const before = await revision();
    const file = exportFile([
      { key: 'ok', type: 'text', value: '"fine"' },
      { key: 'bad', type: 'text', value: '"a\\ud800b"' },
    ]);
    const res = await call(`${server.api}/${bucket}`, {
      method: 'POST',
      body: file,
      headers: { ...admin, 'content-type': 'application/x-ndjson' },
    });
    expectError(res, 400, 'bad_request');
    expect(res.json()).toMatchObject({ error: { detail: expect.stringMatching(/^line 3: .*lone surrogate/) } });
    expect(await revision()).toBe(before);
    expect((await call(`${server.api}/${bucket}/ok`, { headers: admin })).status).toBe(404);
  });
});
