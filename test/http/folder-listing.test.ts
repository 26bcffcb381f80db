import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, createBucket, expectError, json } from '../helpers/http.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';

let server: AppServer;
let bucket: string;
const SECRET = 'folder-secret';
const admin = { authorization: `Bearer ${SECRET}` };

const BIG = 3000;

beforeAll(async () => {
  server = await startAppServer();
  bucket = await createBucket(server.api, { secret_key: SECRET, signing_key: 'sign' });
  const keys = [
    'a',
    'a/1',
    'a/2',
    'a/sub/x',
    'a/sub/y',
    'a/sub/deeper/z',
    'a/tmp/1',
    'a/x',
    'a/z/',
    'b',
    'c/d',
    'é/1',
    ...Array.from({ length: BIG }, (_, i) => `big/${String(i).padStart(5, '0')}`),
  ];
  for (let i = 0; i < keys.length; i += 1000) {
    const ops = keys.slice(i, i + 1000).map((key) => ({ set: key, value: key }));
    expect((await call(`${server.api}/${bucket}`, { method: 'POST', ...json({ txn: ops }, admin) })).status).toBe(204);
  }
});
afterAll(async () => {
  await server?.stop();
});

type Item = { key: string } | { prefix: string };
const list = (query: string, headers: Record<string, string> = admin) => call(`${server.api}/${bucket}/?${query}`, { headers });
const items = async (query: string) => {
  const res = await list(query);
  expect(res.status).toBe(200);
  return { items: JSON.parse(res.text) as Array<Item & Record<string, unknown>>, cursor: res.headers.get('kvb-next-cursor'), res };
};

/** How many storage list reads the server has made so far (its own metric). */
async function listReads(): Promise<number> {
  const text = (await call(`${server.url}/metrics`)).text;
  const line = text.split('\n').find((l) => l.startsWith('kvb_store_operation_duration_seconds_count{') && l.includes('op="list"'));
  return Number(line?.split(' ').pop() ?? 0);
}

describe('Delimiter listing: keys directly under the prefix and the folders below it', () => {
  it('top level: direct keys and each folder once, in key order', async () => {
    const { items: top, res } = await items('delimiter=/&format=json');
    expect(top).toEqual([{ key: 'a' }, { prefix: 'a/' }, { key: 'b' }, { prefix: 'big/' }, { prefix: 'c/' }, { prefix: 'é/' }]);
    expect(res.headers.get('kvb-revision')).toMatch(/^\d+$/);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  });
  it('under a prefix: a key ending in the delimiter is a folder of its own name', async () => {
    const { items: under } = await items('prefix=a/&delimiter=/&format=json');
    expect(under).toEqual([{ key: 'a/1' }, { key: 'a/2' }, { prefix: 'a/sub/' }, { prefix: 'a/tmp/' }, { key: 'a/x' }, { prefix: 'a/z/' }]);
  });
  it('reverse, JSONL, meta and values', async () => {
    const { items: reversed } = await items('prefix=a/&delimiter=/&format=json&reverse=true');
    expect(reversed.map((i) => ('key' in i ? i.key : i.prefix))).toEqual(['a/z/', 'a/x', 'a/tmp/', 'a/sub/', 'a/2', 'a/1']);
    const jsonl = await list('prefix=a/sub/&delimiter=/&format=jsonl&meta=true');
    const lines = jsonl.text
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.map((l) => l.key ?? l.prefix)).toEqual(['a/sub/deeper/', 'a/sub/x', 'a/sub/y']);
    expect(lines[1]).toMatchObject({ key: 'a/sub/x', type: 'text', size: 7 });
    const { items: valued } = await items('prefix=a/sub/&delimiter=/&format=json&values=true');
    expect(valued.find((i) => 'key' in i && i.key === 'a/sub/x')).toMatchObject({ value: 'a/sub/x' });
  });
  it("a big folder costs one seek, not a read of its keys (counted by the server's own storage metric)", async () => {
    const before = await listReads();
    const { items: top } = await items('delimiter=/&format=json');
    const reads = (await listReads()) - before;
    expect(top).toHaveLength(6);
    // One read per folder or page at most; reading the 3,000 keys of big/ would take 12 or more.
    expect(reads).toBeLessThanOrEqual(8);
  });
  it('limit counts items and the cursor continues after the last one (past a whole folder), with no repeats', async () => {
    const seen: Item[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const { items: page, cursor: next } = await items(`delimiter=/&format=json&limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      seen.push(...page);
      cursor = next;
      pages++;
    } while (cursor && pages < 10);
    expect(seen).toEqual([{ key: 'a' }, { prefix: 'a/' }, { key: 'b' }, { prefix: 'big/' }, { prefix: 'c/' }, { prefix: 'é/' }]);
    expect(pages).toBe(3);
    const reversed: Item[] = [];
    cursor = null;
    do {
      const { items: page, cursor: next } = await items(`delimiter=/&format=json&limit=4&reverse=true${cursor ? `&cursor=${cursor}` : ''}`);
      reversed.push(...page);
      cursor = next;
    } while (cursor);
    expect(reversed).toEqual([...seen].reverse());
  });
  it('a token lists folders only inside its own prefix', async () => {
    const token = JSON.parse(
      (
        await call(`${server.api}/${bucket}/tokens/`, {
          method: 'POST',
          headers: { ...admin, 'content-type': 'application/x-www-form-urlencoded' },
          body: 'prefix=a/&permissions=enumerate&ttl=60',
        })
      ).text,
    ).access_token as string;
    const res = await list('delimiter=/&format=json', { authorization: `Bearer ${token}` });
    expect(JSON.parse(res.text)).toEqual([
      { key: 'a/1' },
      { key: 'a/2' },
      { prefix: 'a/sub/' },
      { prefix: 'a/tmp/' },
      { key: 'a/x' },
      { prefix: 'a/z/' },
    ]);
    expectError(await list('prefix=b&delimiter=/&format=json', { authorization: `Bearer ${token}` }), 403, 'forbidden');
  });
  it('text format, skip and an empty delimiter are 400; a listing without delimiter is unchanged', async () => {
    expectError(await list('delimiter=/'), 400, 'bad_request');
    expectError(await list('delimiter=/&format=json&skip=1'), 400, 'bad_request');
    expectError(await list('delimiter=&format=json'), 400, 'bad_request');
    const plain = JSON.parse((await list('prefix=a/sub/&format=json')).text) as string[];
    expect(plain).toEqual(['a/sub/deeper/z', 'a/sub/x', 'a/sub/y']);
  });
});
