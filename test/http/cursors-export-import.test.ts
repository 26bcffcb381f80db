import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportFile, manyKeys } from '../helpers/export-file.js';
import { call, createBucket, expectError, json } from '../helpers/http.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';

let server: AppServer;

beforeAll(async () => {
  server = await startAppServer({ config: { maxImportBytes: 8 * 1024 * 1024 } });
});
afterAll(async () => {
  await server.stop();
});

const bearer = (credential: string) => ({ authorization: `Bearer ${credential}` });
const importInto = (bucket: string, body: string | Buffer, query = '', headers: Record<string, string> = {}) =>
  call(`${server.api}/${bucket}${query}`, { method: 'POST', body, headers: { 'content-type': 'application/x-ndjson', ...headers } });
const exportOf = (bucket: string, query = '', headers: Record<string, string> = {}) =>
  call(`${server.api}/${bucket}/?export=true${query}`, { headers });

/** Parses one listing page in any format into its keys. */
function keysOf(format: string, text: string): string[] {
  if (format === 'json')
    return (JSON.parse(text) as unknown[]).map((item) => (Array.isArray(item) ? (item[0] as string) : (item as string)));
  const lines = text.split('\n').filter((l) => l !== '');
  if (format === 'jsonl') return lines.map((l) => JSON.parse(l) as string | [string]).map((item) => (Array.isArray(item) ? item[0] : item));
  return lines.map((l) => (l.includes('=') ? l.slice(0, l.indexOf('=')) : l));
}

describe('Cursor pagination', () => {
  let bucket: string;
  const original = manyKeys(25_000);
  beforeAll(async () => {
    bucket = await createBucket(server.api, { secret_key: 'admin', signing_key: 'sign' });
    const res = await importInto(bucket, exportFile(original), '', bearer('admin'));
    expect(res.status, res.text).toBe(200);
    expect(res.json()).toMatchObject({ imported: 25_000, skipped: 0 });
  }, 60_000);

  it('walks 25,000 keys with limit=1000 in every format and both directions while others write: each key once, no empty last page', async () => {
    // Writers add and remove keys between the walked ones for the whole walk.
    let writing = true;
    let writes = 0;
    const writer = async (id: number) => {
      while (writing) {
        const n = Math.floor(Math.random() * 25_000);
        const key = `k${String(n).padStart(6, '0')}-new${id}`;
        await call(`${server.api}/${bucket}/${key}`, { method: 'PUT', body: 'x', headers: bearer('admin') });
        await call(`${server.api}/${bucket}/${key}`, { method: 'DELETE', headers: bearer('admin') });
        writes++;
        // Steady, not flooding: the walk is what is measured, on a machine with two cores.
        await new Promise((r) => setTimeout(r, 5));
      }
    };
    const writers = [writer(1), writer(2)];
    try {
      for (const format of ['text', 'json', 'jsonl']) {
        for (const reverse of [false, true]) {
          const seen = new Map<string, number>();
          let next: string | undefined =
            `${server.api}/${bucket}/?limit=1000&format=${format}${reverse ? '&reverse=true' : ''}${format === 'jsonl' ? '&values=true' : ''}`;
          let pages = 0;
          while (next) {
            const res = await call(next, { headers: bearer('admin') });
            expect(res.status, res.text).toBe(200);
            const keys = keysOf(format, res.text);
            expect(keys.length, 'no empty page').toBeGreaterThan(0);
            for (const key of keys) seen.set(key, (seen.get(key) ?? 0) + 1);
            pages++;
            const cursor = res.headers.get('kvb-next-cursor');
            const link = res.headers.get('link');
            if (cursor) {
              expect(link).toMatch(/^<\/api\/v1\/[^>]+cursor=[^>]+>; rel="next"$/);
              next = `${server.url}${/^<([^>]+)>/.exec(link!)![1]}`;
              expect(new URL(next).searchParams.get('cursor')).toBe(cursor);
            } else {
              expect(link).toBeNull();
              next = undefined;
            }
          }
          expect(pages).toBeGreaterThanOrEqual(25);
          for (const { key } of original) expect(seen.get(key), `${format} ${reverse ? 'desc' : 'asc'} ${key}`).toBe(1);
          for (const [key, times] of seen) expect(times, key).toBe(1);
        }
      }
    } finally {
      writing = false;
      await Promise.all(writers);
    }
    expect(writes).toBeGreaterThan(0);
  }, 240_000);

  it('a limit that ends exactly at the last key gives no cursor (never an empty last page)', async () => {
    const id = await createBucket(server.api);
    await call(`${server.api}/${id}`, {
      method: 'POST',
      ...json({
        txn: [
          { set: 'a', value: 1 },
          { set: 'b', value: 2 },
          { set: 'c', value: 3 },
          { set: 'd', value: 4 },
        ],
      }),
    });
    const first = await call(`${server.api}/${id}/?limit=2`);
    expect(first.text).toBe('a\nb\n');
    const cursor = first.headers.get('kvb-next-cursor')!;
    expect(cursor).toBeTruthy();
    const second = await call(`${server.api}/${id}/?limit=2&cursor=${cursor}`);
    expect(second.text).toBe('c\nd\n');
    expect(second.headers.get('kvb-next-cursor')).toBeNull();
    expect(second.headers.get('link')).toBeNull();
    // Limits above one storage page stream, and still know their cursor up front.
    const all = await call(`${server.api}/${bucket}/?limit=1500&values=true`, { headers: bearer('admin') });
    expect(all.text.split('\n').filter(Boolean)).toHaveLength(1500);
    const rest = await call(`${server.api}/${bucket}/?limit=100000&cursor=${all.headers.get('kvb-next-cursor')}`, {
      headers: bearer('admin'),
    });
    expect(rest.text.split('\n').filter(Boolean)).toHaveLength(25_000 - 1500);
    expect(rest.headers.get('kvb-next-cursor')).toBeNull();
  });

  it('skip keeps working, alone and with a cursor', async () => {
    const res = await call(`${server.api}/${bucket}/?limit=2&skip=3`, { headers: bearer('admin') });
    expect(res.text).toBe('k000003\nk000004\n');
    const next = await call(`${server.api}/${bucket}/?limit=2&cursor=${res.headers.get('kvb-next-cursor')}`, { headers: bearer('admin') });
    expect(next.text).toBe('k000005\nk000006\n');
  });

  it('a forged, altered, cross-bucket, cross-prefix or cross-direction cursor is 400', async () => {
    const page = await call(`${server.api}/${bucket}/?limit=10&prefix=k0001`, { headers: bearer('admin') });
    const cursor = page.headers.get('kvb-next-cursor')!;
    const [payload, mac] = cursor.split('.') as [string, string];
    const fields = JSON.parse(Buffer.from(payload, 'base64url').toString()) as unknown[];
    const altered = `${Buffer.from(JSON.stringify([...fields.slice(0, 4), 'k000999'])).toString('base64url')}.${mac}`;
    const other = await createBucket(server.api, { secret_key: 'admin', signing_key: 'sign' });
    const list = (id: string, query: string) => call(`${server.api}/${id}/?limit=10${query}`, { headers: bearer('admin') });
    expectError(await list(bucket, '&prefix=k0001&cursor=forged.cursor'), 400, 'bad_request');
    expectError(await list(bucket, '&prefix=k0001&cursor=not-a-cursor'), 400, 'bad_request');
    expectError(await list(bucket, `&prefix=k0001&cursor=${altered}`), 400, 'bad_request');
    expectError(await list(other, `&prefix=k0001&cursor=${cursor}`), 400, 'bad_request');
    expectError(await list(bucket, `&prefix=k000&cursor=${cursor}`), 400, 'bad_request');
    expectError(await list(bucket, `&cursor=${cursor}`), 400, 'bad_request');
    expectError(await list(bucket, `&prefix=k0001&reverse=true&cursor=${cursor}`), 400, 'bad_request');
    expect((await list(bucket, `&prefix=k0001&cursor=${cursor}`)).text.startsWith('k000110\n')).toBe(true);
  });

  it("a cursor cannot widen a token's prefix", async () => {
    const minted = await call(`${server.api}/${bucket}/tokens/`, {
      method: 'POST',
      headers: bearer('admin'),
      body: new URLSearchParams({ prefix: 'k0002', permissions: 'enumerate', ttl: '60' }),
    });
    const token = (minted.json() as { access_token: string }).access_token;
    const adminCursor = (await call(`${server.api}/${bucket}/?limit=10`, { headers: bearer('admin') })).headers.get('kvb-next-cursor')!;
    // The token lists k0002… only, so a cursor for the whole bucket is not for its listing.
    expectError(await call(`${server.api}/${bucket}/?limit=10&cursor=${adminCursor}`, { headers: bearer(token) }), 400, 'bad_request');
    const own = await call(`${server.api}/${bucket}/?limit=10`, { headers: bearer(token) });
    expect(own.text.startsWith('k000200\n')).toBe(true);
    const next = await call(`${server.api}/${bucket}/?limit=10&cursor=${own.headers.get('kvb-next-cursor')}`, { headers: bearer(token) });
    expect(next.text.startsWith('k000210\n')).toBe(true);
  });

  it('CORS exposes the cursor headers', async () => {
    const res = await call(`${server.api}/${bucket}/?limit=1`, { headers: { ...bearer('admin'), origin: 'https://example.com' } });
    expect(res.headers.get('access-control-expose-headers')).toMatch(/Kvb-Next-Cursor.*Link/);
  });
});

/** Every type's edge values, and keys that need care. */
const EDGE: Array<{ key: string; body: Buffer; contentType?: string; type: string; ttl?: number }> = [
  { key: 'int/max', body: Buffer.from('9223372036854775807'), type: 'int64' },
  { key: 'int/min', body: Buffer.from('-9223372036854775808'), type: 'int64' },
  { key: 'float/0.1', body: Buffer.from('0.1'), type: 'float64' },
  { key: 'float/1e308', body: Buffer.from('1e308'), type: 'float64' },
  { key: 'float/-0.0', body: Buffer.from('-0.0'), type: 'float64' },
  { key: 'float/5e-324', body: Buffer.from('5e-324'), type: 'float64' },
  { key: 'bytes/all', body: Buffer.from(Array.from({ length: 256 }, (_, i) => i)), contentType: 'application/octet-stream', type: 'bytes' },
  {
    key: 'bytes/16k',
    body: Buffer.from(Array.from({ length: 16384 }, (_, i) => (i * 7919) % 256)),
    contentType: 'application/octet-stream',
    type: 'bytes',
  },
  { key: 'text/16k', body: Buffer.from('é'.repeat(8192)), contentType: 'text/plain', type: 'text' },
  { key: 'text/controls', body: Buffer.from('a\nb\r\u0000"\\\u2028'), contentType: 'text/plain', type: 'text' },
  { key: 'json/doc', body: Buffer.from('{"a":[1,2.50,"x"],"b":{"c":null}}'), contentType: 'application/json', type: 'json' },
  { key: 'json/big', body: Buffer.from('12345678901234567890123'), contentType: 'application/json', type: 'json' },
  { key: 'with space/and slash', body: Buffer.from('x'), contentType: 'text/plain', type: 'text', ttl: 3600 },
  { key: 'ключ/日本語/🔑', body: Buffer.from('multi'), contentType: 'text/plain', type: 'text', ttl: 7200 },
];

describe('Import and the bucket default TTL', () => {
  it('an entry line without expires_at gets the bucket\'s default TTL; "expires_at": null keeps it without expiry', async () => {
    const bucket = await createBucket(server.api, { default_ttl: '3600' });
    const header = `{"kvb":"export","version":1,"bucket":"x","exported_at":"${new Date().toISOString()}"}\n`;
    const lines = `${header}{"key":"absent","type":"text","value":"a"}\n{"key":"never","type":"text","value":"b","expires_at":null}\n`;
    const { createHash } = await import('node:crypto');
    const body = `${lines}{"kvb":"end","count":2,"sha256":"${createHash('sha256').update(lines).digest('hex')}"}\n`;
    const before = Date.now();
    const res = await importInto(bucket, body);
    expect(res.status, res.text).toBe(200);
    const absent = (await call(`${server.api}/${bucket}/absent`)).headers.get('kvb-expires-at');
    expect(Date.parse(absent ?? '') - before).toBeGreaterThanOrEqual(3600_000 - 1000);
    expect((await call(`${server.api}/${bucket}/never`)).headers.get('kvb-expires-at')).toBeNull();
  });
});

describe('Export and import', () => {
  let source: string;
  beforeAll(async () => {
    source = await createBucket(server.api, { default_ttl: '0' });
    for (const item of EDGE) {
      const res = await call(`${server.api}/${source}/${encodeURIComponent(item.key)}${item.ttl ? `?ttl=${item.ttl}` : ''}`, {
        method: 'PUT',
        body: item.body,
        headers: item.contentType ? { 'content-type': item.contentType } : {},
      });
      expect(res.status, `${item.key}: ${res.text}`).toBeLessThan(300);
    }
  });

  it('exports a header, one typed line per key and an end line with count and sha256', async () => {
    const res = await exportOf(source);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/x-ndjson');
    const lines = res.text.split('\n');
    expect(lines.pop()).toBe('');
    const header = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(header).toMatchObject({ kvb: 'export', version: 1, bucket: source });
    expect(Date.parse(header.exported_at as string)).toBeGreaterThan(Date.now() - 60_000);
    const end = JSON.parse(lines.at(-1)!) as { kvb: string; count: number; sha256: string };
    expect(end.kvb).toBe('end');
    expect(end.count).toBe(EDGE.length);
    const { createHash } = await import('node:crypto');
    expect(end.sha256).toBe(
      createHash('sha256')
        .update(
          lines
            .slice(0, -1)
            .map((l) => `${l}\n`)
            .join(''),
        )
        .digest('hex'),
    );
    const byKey = new Map(lines.slice(1, -1).map((l) => [(JSON.parse(l) as { key: string }).key, l]));
    expect(byKey.get('int/max')).toBe('{"key":"int/max","type":"int64","value":"9223372036854775807","expires_at":null}');
    expect(JSON.parse(byKey.get('float/5e-324')!).value).toBe(5e-324);
    // The line carries the stored text itself, which parses back to the same double.
    const zero = await call(`${server.api}/${source}/float%2F-0.0`);
    expect(Object.is(JSON.parse(byKey.get('float/-0.0')!).value, Number(zero.text))).toBe(true);
    expect(byKey.get('float/1e308')).toContain(`"value":${(await call(`${server.api}/${source}/float%2F1e308`)).text},`);
    expect(JSON.parse(byKey.get('json/doc')!).value).toEqual({ a: [1, 2.5, 'x'], b: { c: null } });
    expect(Buffer.from(JSON.parse(byKey.get('bytes/all')!).value as string, 'base64')).toEqual(EDGE[6]!.body);
    expect(JSON.parse(byKey.get('with space/and slash')!).expires_at).toMatch(/^\d{4}-\d\d-\d\dT/);
  });

  it('round trips every type exactly: bytes, type and expiry', async () => {
    const exported = await exportOf(source);
    const target = await createBucket(server.api, { default_ttl: '0' });
    const res = await importInto(target, exported.body);
    expect(res.status, res.text).toBe(200);
    expect(res.json()).toMatchObject({ imported: EDGE.length, skipped: 0 });
    for (const item of EDGE) {
      const [a, b] = await Promise.all([source, target].map((id) => call(`${server.api}/${id}/${encodeURIComponent(item.key)}`)));
      expect(b!.status, item.key).toBe(200);
      expect(b!.body.equals(a!.body), item.key).toBe(true);
      expect(b!.headers.get('kvb-type'), item.key).toBe(item.type);
      expect(b!.headers.get('kvb-expires-at'), item.key).toBe(a!.headers.get('kvb-expires-at'));
    }
    // And a second export of the copy is the same, line for line, but for the header.
    const again = await exportOf(target);
    expect(again.text.split('\n').slice(1, -2)).toEqual(exported.text.split('\n').slice(1, -2));
  });

  it('a truncated, altered or miscounted export is refused and writes nothing', async () => {
    const exported = (await exportOf(source)).text;
    const target = await createBucket(server.api);
    const lines = exported.split('\n');
    const cases: Array<[string, string]> = [
      ['cut mid-line', exported.slice(0, exported.length - 40)],
      ['no end line', `${lines.slice(0, -2).join('\n')}\n`],
      ['cut after a line', `${lines.slice(0, 5).join('\n')}\n`],
      ['altered value', exported.replace('"0.1"', '"0.2"').replace(':0.1,', ':0.2,')],
      ['empty', ''],
      ['no header', `${lines.slice(1).join('\n')}`],
      ['end line without newline', exported.slice(0, -1)],
      ['text after the end', `${exported}{"key":"x","type":"text","value":"y","expires_at":null}\n`],
    ];
    for (const [what, body] of cases) {
      const res = await importInto(target, body);
      expectError(res, 400, 'bad_request');
      expect(res.headers.get('kvb-error-detail'), what).toBeTruthy();
    }
    expect((await call(`${server.api}/${target}/`)).text).toBe('');
  });

  it('a bad line is 400 naming its line; nothing is written', async () => {
    const target = await createBucket(server.api);
    const items = manyKeys(20);
    items[15] = { key: 'bad', type: 'int64', value: '"12.5"' };
    const res = await importInto(target, exportFile(items));
    expectError(res, 400, 'bad_request');
    expect(res.headers.get('kvb-error-detail')).toMatch(/^line 17: /);
    for (const [value, type] of [
      ['"!!"', 'bytes'],
      ['1', 'text'],
      ['"1e999"', 'float64'],
      ['1e999', 'float64'],
      ['"99999999999999999999"', 'int64'],
    ]) {
      const bad = await importInto(target, exportFile([{ key: 'k', type: type as 'text', value: value! }]));
      expectError(bad, 400, 'bad_request');
      expect(bad.headers.get('kvb-error-detail')).toMatch(/^line 2: /);
    }
    const tooBig = await importInto(target, exportFile([{ key: 'k', type: 'text', value: JSON.stringify('x'.repeat(16385)) }]));
    expect(tooBig.headers.get('kvb-error-detail')).toMatch(
      /^line 2: the value \(\d+ bytes\) is larger than the server's limit of 16384 bytes/,
    );
    expect((await call(`${server.api}/${target}/`)).text).toBe('');
  });

  it('skips lines already expired; keeps expiry absolute', async () => {
    const target = await createBucket(server.api);
    const past = new Date(Date.now() - 1000).toISOString();
    const future = new Date(Date.now() + 3_600_000).toISOString();
    const res = await importInto(
      target,
      exportFile([
        { key: 'old', type: 'text', value: '"o"', expires_at: past },
        { key: 'new', type: 'text', value: '"n"', expires_at: future },
      ]),
    );
    expect(res.json()).toMatchObject({ imported: 1, skipped: 1 });
    expect((await call(`${server.api}/${target}/old`)).status).toBe(404);
    const got = await call(`${server.api}/${target}/new`);
    expect(Math.abs(Date.parse(got.headers.get('kvb-expires-at')!) - Date.parse(future))).toBeLessThan(1000);
  });

  it('merge sets every line; replace leaves the bucket (or the prefix) exactly as the file', async () => {
    const target = await createBucket(server.api);
    await call(`${server.api}/${target}`, {
      method: 'POST',
      ...json({
        txn: [
          { set: 'a/1', value: 'old' },
          { set: 'a/2', value: 'old' },
          { set: 'b/1', value: 'keep' },
        ],
      }),
    });
    const file = exportFile([
      { key: 'a/1', type: 'text', value: '"new"' },
      { key: 'a/3', type: 'text', value: '"new"' },
    ]);
    expect((await importInto(target, file)).json()).toMatchObject({ imported: 2, skipped: 0 });
    expect((await call(`${server.api}/${target}/?values=true`)).text).toBe('a/1=new\na/2=old\na/3=new\nb/1=keep\n');
    expect((await importInto(target, file, '?mode=replace&prefix=a/')).status).toBe(200);
    expect((await call(`${server.api}/${target}/?values=true`)).text).toBe('a/1=new\na/3=new\nb/1=keep\n');
    expectError(
      await importInto(target, exportFile([{ key: 'b/2', type: 'text', value: '"x"' }]), '?mode=replace&prefix=a/'),
      400,
      'bad_request',
    );
    expect((await importInto(target, file, '?mode=replace')).status).toBe(200);
    expect((await call(`${server.api}/${target}/?values=true`)).text).toBe('a/1=new\na/3=new\n');
    expectError(await importInto(target, file, '?mode=overwrite'), 400, 'bad_request');
  });

  it('a token imports only inside its prefix (403, nothing written); replace needs delete permission', async () => {
    const target = await createBucket(server.api, { secret_key: 's', signing_key: 'sign', write_key: 'w' });
    const mint = async (permissions: string) =>
      (
        (
          await call(`${server.api}/${target}/tokens/`, {
            method: 'POST',
            headers: bearer('s'),
            body: new URLSearchParams({ prefix: 'p/', permissions, ttl: '60' }),
          })
        ).json() as { access_token: string }
      ).access_token;
    const writer = await mint('write');
    const inside = exportFile([{ key: 'p/1', type: 'text', value: '"x"' }]);
    const outside = exportFile([
      { key: 'p/2', type: 'text', value: '"x"' },
      { key: 'q/1', type: 'text', value: '"x"' },
    ]);
    expectError(await importInto(target, outside, '', bearer(writer)), 403, 'forbidden');
    expectError(await importInto(target, inside, '?mode=replace', bearer(writer)), 403, 'forbidden');
    expect((await importInto(target, inside, '', bearer(writer))).json()).toMatchObject({ imported: 1, skipped: 0 });
    expect((await importInto(target, inside, '?mode=replace', bearer(await mint('write,delete')))).status).toBe(200);
    expectError(await importInto(target, inside), 401, 'unauthorized');
    expect((await call(`${server.api}/${target}/`, { headers: bearer('s') })).text).toBe('p/1\n');
    // A token's export holds only its prefix.
    const reader = await mint('read');
    const exported = await exportOf(target, '', bearer(reader));
    expect(exported.text.split('\n').filter((l) => l.includes('"key"'))).toHaveLength(1);
    expectError(await exportOf(target, '&prefix=q/', bearer(reader)), 403, 'forbidden');
  });

  it('a JSON body is still a transaction; an import over --max-import-bytes is 400', async () => {
    const target = await createBucket(server.api);
    expect((await call(`${server.api}/${target}`, { method: 'POST', ...json({ txn: [{ set: 'a', value: 1 }] }) })).status).toBe(204);
    const huge = exportFile(manyKeys(20_000).map((i) => ({ ...i, value: JSON.stringify('v'.repeat(500)) })));
    expect(huge.length).toBeGreaterThan(8 * 1024 * 1024);
    const res = await importInto(target, huge);
    expectError(res, 400, 'bad_request');
    expect(res.headers.get('kvb-error-detail')).toMatch(/larger than 8388608 bytes/);
    expect((await call(`${server.api}/${target}/`)).text).toBe('a\n');
  });

  it('an export under write load is one consistent snapshot holding every write acknowledged before it began', async () => {
    const target = await createBucket(server.api);
    for (let i = 0; i < 10; i++) {
      const ops = Array.from({ length: 100 }, (_, j) => ({ set: `before/${String(i * 100 + j).padStart(4, '0')}`, value: i * 100 + j }));
      expect((await call(`${server.api}/${target}`, { method: 'POST', ...json({ txn: ops }) })).status).toBe(204);
    }
    let writing = true;
    let n = 0;
    const writer = (async () => {
      while (writing) await call(`${server.api}/${target}/during%2F${n++}`, { method: 'PUT', body: 'x' });
    })();
    try {
      const exports = await Promise.all([exportOf(target), exportOf(target)]);
      for (const res of exports) {
        expect(res.status).toBe(200);
        const lines = res.text.split('\n').filter(Boolean);
        const end = JSON.parse(lines.at(-1)!) as { count: number; sha256: string };
        const { createHash } = await import('node:crypto');
        expect(end.sha256).toBe(
          createHash('sha256')
            .update(
              lines
                .slice(0, -1)
                .map((l) => `${l}\n`)
                .join(''),
            )
            .digest('hex'),
        );
        const keys = lines.slice(1, -1).map((l) => (JSON.parse(l) as { key: string }).key);
        expect(end.count).toBe(keys.length);
        expect(keys.filter((k) => k.startsWith('before/'))).toHaveLength(1000);
        // The `during/` writes are a prefix of the writer's sequence: a snapshot, not a mix.
        const during = keys
          .filter((k) => k.startsWith('during/'))
          .map((k) => Number(k.slice(7)))
          .sort((a, b) => a - b);
        expect(during).toEqual(Array.from({ length: during.length }, (_, i) => i));
      }
    } finally {
      writing = false;
      await writer;
    }
    expect(n).toBeGreaterThan(0);
  });

  it('an export takes only prefix', async () => {
    expectError(await exportOf(source, '&limit=3'), 400, 'bad_request');
    const part = await exportOf(source, '&prefix=float/');
    expect(part.text.split('\n').filter((l) => l.includes('"key"'))).toHaveLength(4);
  });
});
