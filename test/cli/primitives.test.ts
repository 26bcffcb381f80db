import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CliOptions, inTerminal, kvb, kvbRunning, tempConfigHome } from '../helpers/cli.js';
import { call, createBucket, json } from '../helpers/http.js';
import { type RunningServer, startServer } from '../helpers/server.js';

let server: RunningServer;
let bucket: string;
const SECRET = 'cli-primitives-secret';

const env = () => ({ KVB_URL: server.url, KVB_BUCKET: bucket, KVB_TOKEN: SECRET });
const run = (args: string[], options: CliOptions = {}) => kvb(args, { ...options, env: { ...env(), ...options.env } });
const read = (key: string) => call(`${server.api}/${bucket}/${encodeURIComponent(key)}`, { token: SECRET });
const txn = (ops: unknown) =>
  call(`${server.api}/${bucket}`, { method: 'POST', ...json({ txn: ops }, { authorization: `Bearer ${SECRET}` }) });
const keysUnder = async (prefix: string) =>
  JSON.parse((await call(`${server.api}/${bucket}/?format=json&prefix=${encodeURIComponent(prefix)}`, { token: SECRET })).text) as string[];

beforeAll(async () => {
  server = await startServer();
  bucket = await createBucket(server.api, { secret_key: SECRET });
});
afterAll(async () => {
  await server?.stop();
});

describe('kvb get A B …: several keys at one revision', () => {
  it('prints one JSONL row per key in order, int64 as a decimal string, JSON exactly as stored; exits 2 after printing when one is absent', async () => {
    // Written as text: a JS number would round 12345678901234567890 before it is sent.
    await call(`${server.api}/${bucket}`, {
      method: 'POST',
      body: '{"txn":[{"set":"g/json","value":{"n":12345678901234567890}},{"set":"g/text","value":"héllo"}]}',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${SECRET}` },
    });
    await run(['set', 'g/int', '9223372036854775807']);
    const result = await run(['get', 'g/int', 'g/json', 'g/none', 'g/text']);
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toContain('no such key: "g/none"');
    const rows = result.out.trimEnd().split('\n');
    expect(rows).toHaveLength(4);
    expect(rows[0]).toMatch(/^\{"key":"g\/int","type":"int64","value":"9223372036854775807","expires_at":".*","revision":\d+\}$/);
    expect(rows[1]).toContain('"value":{"n":12345678901234567890}');
    expect(JSON.parse(rows[2]!)).toEqual({ key: 'g/none', type: null, value: null, expires_at: null, revision: null });
    expect(JSON.parse(rows[3]!)).toMatchObject({ key: 'g/text', type: 'text', value: 'héllo' });
  });
  it('--json prints one object with the revision read at; all present exits 0', async () => {
    const result = await run(['get', 'g/int', 'g/text', '--json']);
    expect(result.exitCode).toBe(0);
    const body = JSON.parse(result.out) as { revision: number; entries: Array<{ key: string; revision: number }> };
    expect(body.entries.map((e) => e.key)).toEqual(['g/int', 'g/text']);
    expect(typeof body.revision).toBe('number');
    for (const e of body.entries) expect(Number(e.revision)).toBeLessThanOrEqual(Number(body.revision));
  });
  it('-o FILE takes one key', async () => {
    expect((await run(['get', 'g/int', 'g/text', '-o', join(tmpdir(), 'x')])).exitCode).toBe(1);
  });
});

describe('kvb expire and kvb ttl', () => {
  // Each step is one CLI process; the setup goes over HTTP and the refusals run beside the main
  // sequence, so a loaded machine pays for four processes in a row rather than eleven.
  it('changes the expiry, keeps the value and type, and 0 removes it; a missing key exits 2', async () => {
    const refusals = Promise.all([run(['expire', 'e/missing', '5']), run(['ttl', 'e/missing']), run(['expire', 'e/k', '-1'])]);
    const put = await call(`${server.api}/${bucket}/e/k?ttl=0`, {
      method: 'PUT',
      body: 'value',
      token: SECRET,
      headers: { 'content-type': 'text/plain' },
    });
    expect(put.status, put.text).toBe(200);
    const expired = await run(['expire', 'e/k', '600']);
    expect(expired.exitCode).toBe(0);
    const [plain, asJson] = await Promise.all([run(['ttl', 'e/k']), run(['ttl', 'e/k', '--json'])]);
    const left = Number(plain.out);
    expect(left).toBeGreaterThan(500);
    expect(left).toBeLessThanOrEqual(600);
    const json = JSON.parse(asJson.out) as { ttl: number; expires_at: string };
    expect(Date.parse(json.expires_at)).toBeGreaterThan(Date.now());
    const res = await read('e/k');
    expect(res.text).toBe('value');
    expect(res.headers.get('kvb-type')).toBe('text');
    expect((await run(['expire', 'e/k', '0'])).exitCode).toBe(0);
    expect((await run(['ttl', 'e/k'])).out).toBe('none\n');
    const [missingExpire, missingTtl, negative] = await refusals;
    expect(missingExpire.exitCode).toBe(2);
    expect(missingTtl.exitCode).toBe(2);
    expect(negative.exitCode).toBe(1);
  });
});

describe('kvb del --prefix', () => {
  it('refuses without --yes when stdin is not a terminal, deletes with --yes and says how many', async () => {
    await txn(Array.from({ length: 30 }, (_, i) => ({ set: `p/${i}`, value: i })).concat([{ set: 'q/keep', value: 1 }]));
    const refused = await run(['del', '--prefix', 'p/']);
    expect(refused.exitCode).toBe(1);
    expect(refused.stderr).toContain('--yes');
    expect(await keysUnder('p/')).toHaveLength(30);
    const done = await run(['del', '--prefix', 'p/', '--yes']);
    expect(done.exitCode).toBe(0);
    expect(done.stderr).toContain('deleted 30 keys under "p/"');
    expect(await keysUnder('p/')).toEqual([]);
    expect(await keysUnder('q/')).toEqual(['q/keep']);
  });
  it('asks at a terminal with the count; no keeps every key, yes deletes them', async () => {
    await txn(Array.from({ length: 12 }, (_, i) => ({ set: `t/${i}`, value: i })));
    const no = await inTerminal(['del', '--prefix', 't/'], [{ expect: 'Delete 12 keys under "t/"?', send: '\r' }], {
      ...env(),
      XDG_CONFIG_HOME: tempConfigHome(),
    });
    expect(no.timedOut).toBeNull();
    expect(no.exitCode).toBe(1);
    expect(await keysUnder('t/')).toHaveLength(12);
    const yes = await inTerminal(['del', '--prefix', 't/'], [{ expect: 'Delete 12 keys under "t/"?', send: 'y\r' }], {
      ...env(),
      XDG_CONFIG_HOME: tempConfigHome(),
    });
    expect(yes.exitCode).toBe(0);
    expect(yes.output).toContain('deleted 12 keys');
    expect(await keysUnder('t/')).toEqual([]);
  });
  it('rejects an empty prefix, a key together with --prefix, and --prefix with a condition', async () => {
    expect((await run(['del', '--prefix', '', '--yes'])).exitCode).toBe(1);
    expect((await run(['del', 'k', '--prefix', 'x', '--yes'])).exitCode).toBe(1);
    expect((await run(['del', '--prefix', 'x', '--if-rev', '3', '--yes'])).exitCode).toBe(1);
    expect((await run(['del'])).exitCode).toBe(1);
  });
});

describe('kvb ls --folders', () => {
  it('lists the keys directly under the prefix and each folder once, in text, json and jsonl', async () => {
    await txn(['dir/a', 'dir/b/1', 'dir/b/2', 'dir/c', 'dir/d/e/f', 'dirt'].map((key) => ({ set: key, value: 1 })));
    expect((await run(['ls', '--folders', 'dir/'])).out).toBe('dir/a\ndir/b/\ndir/c\ndir/d/\n');
    const json = await run(['ls', '--folders', 'dir/', '--format', 'json']);
    expect(JSON.parse(json.out)).toEqual([{ key: 'dir/a' }, { prefix: 'dir/b/' }, { key: 'dir/c' }, { prefix: 'dir/d/' }]);
    const jsonl = await run(['ls', '--folders', 'dir/', '--format', 'jsonl', '--reverse', '--limit', '3']);
    expect(
      jsonl.out
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l) as unknown),
    ).toEqual([{ prefix: 'dir/d/' }, { key: 'dir/c' }, { prefix: 'dir/b/' }]);
    expect((await run(['ls', '--folders', 'di'])).out).toBe('dir/\ndirt\n');
    expect((await run(['ls', '--folders', '--values'])).exitCode).toBe(1);
  });
});

describe('kvb watch --exec', () => {
  it('runs the command once per change, in order, with the event on stdin and in KVB_* variables', { timeout: 60_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvb-exec-'));
    const out = join(dir, 'events');
    const handler = join(dir, 'handler.sh');
    writeFileSync(
      handler,
      `printf '%s|%s|%s|%s|%s|' "$KVB_OP" "$KVB_KEY" "$KVB_REVISION" "$KVB_VALUE_TYPE" "$KVB_VALUE" >> ${out}\ncat >> ${out}\n`,
    );
    const watch = kvbRunning(['watch', 'x/', '--values', '--exec', `sh ${handler}`], { env: env() });
    try {
      // The watch is live once a write made after it started shows up: write until one does.
      const lines = () => {
        try {
          return readFileSync(out, 'utf8').trimEnd().split('\n');
        } catch {
          return [];
        }
      };
      // The writes that set it up go over HTTP: the CLI under test here is the watcher.
      let probe = 0;
      await expect
        .poll(
          async () => {
            await call(`${server.api}/${bucket}/x/probe`, { method: 'PUT', body: String(probe++), token: SECRET });
            return lines().length;
          },
          { timeout: 20_000, interval: 200 },
        )
        .toBeGreaterThan(0);
      // A probe's event can still arrive after the poll ends: count only the changes made below.
      const changes = () => lines().filter((l) => l.split('|')[1] !== 'x/probe');
      await call(`${server.api}/${bucket}/x/a`, { method: 'PUT', body: 'hello', token: SECRET, headers: { 'content-type': 'text/plain' } });
      // Outside the prefix, and before the last two: once they are handled, it was passed over.
      await call(`${server.api}/${bucket}/y/other`, { method: 'PUT', body: '1', token: SECRET });
      await run(['set', 'x/n', '9223372036854775807']);
      await run(['del', 'x/a']);
      await expect.poll(() => changes().length, { timeout: 20_000 }).toBe(3);
      const [set, int, del] = changes().map((l) => l.split('|'));
      expect(set!.slice(0, 2)).toEqual(['set', 'x/a']);
      expect(set![3]).toBe('text');
      expect(set![4]).toBe('hello');
      expect(JSON.parse(set![5]!)).toMatchObject({ type: 'set', key: 'x/a', value: 'hello', rev: Number(set![2]) });
      expect(int!.slice(3, 5)).toEqual(['int64', '9223372036854775807']);
      expect(del!.slice(0, 2)).toEqual(['delete', 'x/a']);
      expect(Number(del![2])).toBeGreaterThan(Number(int![2]));
      expect(readFileSync(out, 'utf8')).not.toContain('y/other');
      expect(watch.out()).toBe('');
    } finally {
      await watch.stop();
    }
  });
});
