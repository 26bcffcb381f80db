import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type AppServer, startAppServer } from '../helpers/app-server.js';
import { exportFile } from '../helpers/export-file.js';
import { call, createBucket, json } from '../helpers/http.js';
import { testClock } from '../helpers/test-clock.js';
import { type HttpWatch, watchStream } from '../helpers/watch-stream.js';

/**
 * Property: whatever mix of refused requests (4xx) reaches a bucket, on any route, the bucket's
 * revision, usage, history and watch feed are exactly as before. Runs on every backend (the
 * http suite runs again on PostgreSQL and through PgBouncer).
 */
const clock = testClock();
let server: AppServer;
let bucket: string;
let watch: HttpWatch;
const HISTORY_KEYS = ['k', 'n', 'p/a', 'e'];

interface Refusal {
  name: string;
  method: string;
  path: string;
  body?: string;
  headers?: Record<string, string>;
  status: number;
}

const asAdmin = { authorization: 'Bearer admin' };
const asReader = { authorization: 'Bearer r' };
const txn = (body: string, headers: Record<string, string> = asAdmin) => ({
  method: 'POST',
  path: '',
  body,
  headers: { ...headers, 'content-type': 'application/json' },
});
const ndjson = (body: string, headers: Record<string, string> = asAdmin) => ({
  method: 'POST',
  path: '',
  body,
  headers: { ...headers, 'content-type': 'application/x-ndjson' },
});

/** One refusal of each kind the routes have; `absent` varies the key a refused delete names. */
const refusals = (absent: string): Refusal[] => [
  { name: 'unknown parameter', method: 'PUT', path: '/k?colour=x', body: 'v', headers: asAdmin, status: 400 },
  { name: 'malformed query', method: 'PUT', path: '/k?ttl=%ZZ', body: 'v', headers: asAdmin, status: 400 },
  { name: 'malformed listing prefix', method: 'GET', path: '/?prefix=%C0%AF', headers: asAdmin, status: 400 },
  { name: 'reader writes', method: 'PUT', path: '/k', body: 'v', headers: asReader, status: 403 },
  { name: 'anonymous writes', method: 'POST', path: '/k', body: 'v', status: 401 },
  { name: 'wrong credential', method: 'DELETE', path: '/k', headers: { authorization: 'Bearer nope' }, status: 401 },
  { name: 'stale If-Match', method: 'PUT', path: '/k', body: 'v', headers: { ...asAdmin, 'if-match': '"999999"' }, status: 412 },
  { name: 'create over a live key', method: 'PUT', path: '/k', body: 'v', headers: { ...asAdmin, 'if-none-match': '*' }, status: 412 },
  { name: 'delete of an absent key', method: 'DELETE', path: `/${absent}`, headers: asAdmin, status: 404 },
  { name: 'delete of an expired key', method: 'DELETE', path: '/e', headers: asAdmin, status: 404 },
  { name: 'conditional delete of an expired key', method: 'DELETE', path: '/e', headers: { ...asAdmin, 'if-match': '*' }, status: 412 },
  { name: 'key too long', method: 'PUT', path: `/${'x'.repeat(200)}`, body: 'v', headers: asAdmin, status: 400 },
  { name: 'value too large', method: 'PUT', path: '/k', body: 'x'.repeat(17_000), headers: asAdmin, status: 400 },
  { name: 'counter overflow', method: 'PATCH', path: '/n', body: '+9223372036854775807', headers: asAdmin, status: 400 },
  { name: 'bad delta', method: 'PATCH', path: '/n', body: '1', headers: asAdmin, status: 400 },
  { name: 'failed check', ...txn('{"txn":[{"check":"k","rev":999999},{"set":"k","value":"z"},{"delete":"p/a"}]}'), status: 409 },
  { name: 'lone surrogate', ...txn('{"txn":[{"set":"k","value":"a\\ud800"}]}'), status: 400 },
  { name: 'invalid JSON', ...txn('{"txn":[{"set":"k",'), status: 400 },
  { name: 'null value', ...txn('{"txn":[{"set":"k","value":null},{"delete":"n"}]}'), status: 400 },
  { name: 'reader transaction', ...txn('{"txn":[{"delete":"p/a"}]}', asReader), status: 403 },
  { name: 'import of a bad line', ...ndjson('x\n'), status: 400 },
  { name: 'import by a reader', ...ndjson(exportFile([{ key: 'k', type: 'text', value: '"i"' }]), asReader), status: 403 },
  {
    name: 'import with a bad checksum',
    ...ndjson(exportFile([{ key: 'k', type: 'text', value: '"i"' }]).replace(/"sha256":"[0-9a-f]{4}/, '"sha256":"0000')),
    status: 400,
  },
  { name: 'rollback into the future', method: 'POST', path: '?rollback=999999', headers: asAdmin, status: 400 },
  { name: 'rollback by a reader', method: 'POST', path: '?rollback=0', headers: asReader, status: 403 },
  {
    name: 'bucket update, unknown field',
    method: 'PATCH',
    path: '',
    body: '{"colour":1}',
    headers: { ...asAdmin, 'content-type': 'application/json' },
    status: 400,
  },
  {
    name: 'bucket update by a reader',
    method: 'PATCH',
    path: '',
    body: '{"default_ttl":5}',
    headers: { ...asReader, 'content-type': 'application/json' },
    status: 403,
  },
  { name: 'bucket delete by a reader', method: 'DELETE', path: '', headers: asReader, status: 403 },
  {
    name: 'token with a bad permission',
    method: 'POST',
    path: '/tokens/',
    body: 'prefix=a&permissions=root&ttl=60',
    headers: { ...asAdmin, 'content-type': 'application/x-www-form-urlencoded' },
    status: 400,
  },
];

async function snapshot() {
  const policy = await call(`${server.api}/${bucket}`, { headers: asAdmin });
  const listing = await call(`${server.api}/${bucket}/?format=json&values=true`, { headers: asAdmin });
  const histories: string[] = [];
  for (const key of HISTORY_KEYS)
    histories.push((await call(`${server.api}/${bucket}/${key}?history=true&values=true`, { headers: asAdmin })).text);
  return {
    revision: listing.headers.get('kvb-revision'),
    keys: policy.headers.get('kvb-usage-keys'),
    bytes: policy.headers.get('kvb-usage-bytes'),
    values: listing.text,
    histories,
  };
}

beforeAll(async () => {
  clock.set(Date.now());
  server = await startAppServer({ clock: clock.now, config: { sweepIntervalSeconds: 86_400 } });
  bucket = await createBucket(server.api, { secret_key: 'admin', read_key: 'r', write_key: 'w', signing_key: 'sign' });
  const setup = await call(`${server.api}/${bucket}`, {
    method: 'POST',
    ...json(
      {
        txn: [
          { set: 'k', value: 'v0' },
          { set: 'p/a', value: 1 },
          { set: 'e', value: 'soon', ttl: 1 },
        ],
      },
      asAdmin,
    ),
  });
  expect(setup.status, setup.text).toBe(204);
  expect((await call(`${server.api}/${bucket}/n`, { method: 'PATCH', body: '+5', headers: asAdmin })).status).toBe(200);
  clock.advance(2_000);
  watch = await watchStream(`${server.api}/${bucket}/?watch=true&format=jsonl`, { headers: asAdmin });
});
afterAll(async () => {
  watch?.stop();
  await server?.stop();
});

let sentinel = 0;
it('any sequence of refused requests leaves revision, usage, values, history and the watch feed unchanged', {
  timeout: 120_000,
}, async () => {
  const kinds = refusals('absent').length;
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.tuple(fc.nat(kinds - 1), fc.stringMatching(/^[a-z]{1,8}$/)), { minLength: 1, maxLength: 6 }),
      async (picks) => {
        const before = await snapshot();
        const seen = watch.events.length;
        for (const [index, absent] of picks) {
          const refusal = refusals(`gone-${absent}`)[index]!;
          const url = `${server.api}/${bucket}${refusal.path}`;
          const res = await call(url, { method: refusal.method, body: refusal.body, headers: refusal.headers });
          expect(res.status, `${refusal.name}: ${res.text}`).toBe(refusal.status);
        }
        expect(await snapshot()).toEqual(before);
        // A write after them: its event is the first the watch gets since they were sent.
        const mark = `run-${++sentinel}`;
        const written = await call(`${server.api}/${bucket}/sentinel`, { method: 'PUT', body: mark, headers: asAdmin });
        expect(written.status).toBe(200);
        const rev = Number(written.headers.get('kvb-revision'));
        await expect.poll(() => watch.events.some((e) => e.rev === rev)).toBe(true);
        const since = watch.events.slice(seen).filter((e) => e.type !== 'progress');
        expect(since.map((e) => [e.type, e.key, e.rev])).toEqual([['set', 'sentinel', rev]]);
      },
    ),
    { numRuns: 25 },
  );
});
