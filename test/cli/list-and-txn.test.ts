import { spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CliOptions, kvb } from '../helpers/cli.js';
import { KVB_BIN, type RunningServer, startServer } from '../helpers/server.js';
import { call, createBucket, json } from '../helpers/http.js';

let server: RunningServer;
let bucket: string;
const SECRET = 'cli-list-secret';

const run = (args: string[], options: CliOptions = {}, target = () => bucket) =>
  kvb(args, { ...options, env: { KVB_URL: server.url, KVB_BUCKET: target(), KVB_TOKEN: SECRET, ...options.env } });

const listHttp = (query: string) => call(`${server.api}/${bucket}/?${query}`, { token: SECRET });
const read = (b: string, key: string) => call(`${server.api}/${b}/${encodeURIComponent(key)}`, { token: SECRET });

beforeAll(async () => {
  server = await startServer();
  bucket = await createBucket(server.api, { secret_key: SECRET });
  const ops = [
    { set: 'a', value: 1 },
    { set: 'b', value: 'text with = and\nnewline' },
    { set: 'user/1', value: { name: 'Ada' } },
    { set: 'user/2', value: [1, 2] },
    { set: 'user/3', value: 'three' },
  ];
  const res = await call(`${server.api}/${bucket}`, { method: 'POST', ...json({ txn: ops }, { authorization: `Bearer ${SECRET}` }) });
  expect(res.status).toBe(204);
});
afterAll(async () => {
  await server?.stop();
});

describe('kvb ls', () => {
  it('prints plain lines (the server text format) when piped', async () => {
    const result = await run(['ls']);
    expect(result.exitCode).toBe(0);
    expect(result.out).toBe('a\nb\nuser/1\nuser/2\nuser/3\n');
  });

  it('--format text|json|jsonl of keys (and text of values) pass the server bytes through unchanged, with prefix, limit, skip, reverse', async () => {
    const cases: Array<[string[], string]> = [
      [['ls', '--format', 'text', '--values'], 'format=text&values=true'],
      [['ls', '--format', 'json'], 'format=json'],
      [['ls', '--format', 'jsonl'], 'format=jsonl'],
      [['ls', 'user/', '--format', 'json'], 'format=json&prefix=user/'],
      [['ls', '--format', 'jsonl', '--limit', '2', '--skip', '1', '--reverse'], 'format=jsonl&limit=2&skip=1&reverse=true'],
    ];
    const results = await Promise.all(cases.map(([args]) => run(args)));
    for (const [i, [, query]] of cases.entries()) {
      expect(results[i]!.exitCode).toBe(0);
      expect(results[i]!.stdout).toEqual((await listHttp(query)).body);
    }
    expect(results[4]!.out).toBe('"user/2"\n"user/1"\n');
  });

  it.skipIf(!existsSync('/usr/bin/jq'))('ls --format jsonl | jq -c . works line by line', async () => {
    const { stdout } = await execa('bash', ['-c', `node ${JSON.stringify(KVB_BIN)} ls --format jsonl --values | /usr/bin/jq -c .`], {
      env: { KVB_URL: server.url, KVB_BUCKET: bucket, KVB_TOKEN: SECRET, XDG_CONFIG_HOME: tmpdir() },
    });
    const lines = stdout.split('\n').map((l) => JSON.parse(l) as { key: string; type: string; value: unknown });
    expect(lines.map(({ key, type, value }) => [key, type, value])).toEqual([
      ['a', 'json', 1],
      ['b', 'text', 'text with = and\nnewline'],
      ['user/1', 'json', { name: 'Ada' }],
      ['user/2', 'json', [1, 2]],
      ['user/3', 'text', 'three'],
    ]);
  });

  let big: string;
  beforeAll(async () => {
    big = await createBucket(server.api, { secret_key: SECRET });
    for (let batch = 0; batch < 3; batch++) {
      const ops = Array.from({ length: 1000 }, (_, i) => ({
        set: `k${String(batch * 1000 + i).padStart(5, '0')}`,
        value: `${'v'.repeat(100)}${i}`,
      }));
      expect(
        (await call(`${server.api}/${big}`, { method: 'POST', ...json({ txn: ops }, { authorization: `Bearer ${SECRET}` }) })).status,
      ).toBe(204);
    }
  });

  it('streams large listings: 3000 keys arrive complete through a pipe', async () => {
    const result = await run(['ls', '--format', 'jsonl', '--values', '--limit', '1000000'], {}, () => big);
    const lines = result.out.trimEnd().split('\n');
    expect(lines).toHaveLength(3000);
    expect(JSON.parse(lines[2999]!)).toMatchObject({ key: 'k02999', type: 'text', value: `${'v'.repeat(100)}999` });
  });

  it('a prefix with * or ? that matches nothing gets a hint that listing is by prefix, on stderr; stdout stays the (empty) listing', async () => {
    const [glob, json, plain, literal] = await Promise.all([
      run(['ls', 'user/*']),
      run(['ls', 'user/?', '--format', 'json']),
      run(['ls', 'nothing/']),
      run(['ls', 'user/1*']),
    ]);
    expect(glob).toMatchObject({ exitCode: 0, out: '' });
    expect(glob.stderr).toBe(
      'kvb: no keys start with "user/*": kvb ls lists by prefix, where * and ? are plain characters (kvb ls user/ lists every key starting with user/)\n',
    );
    expect(json.out).toBe('[]\n');
    expect(json.stderr).toContain('lists by prefix');
    // No wildcard, or nothing empty: nothing to explain.
    expect(plain).toMatchObject({ exitCode: 0, out: '', stderr: '' });
    expect(literal.stderr).toContain('lists by prefix');
    const star = await run(['set', 'star*', 'x']);
    expect(star.exitCode).toBe(0);
    expect(await run(['ls', 'star*'])).toMatchObject({ exitCode: 0, out: 'star*\n', stderr: '' });
    expect((await run(['del', 'star*'])).exitCode).toBe(0);
  });

  it('an unknown --format is a usage error (exit 1)', async () => {
    const result = await run(['ls', '--format', 'xml']);
    expect(result.exitCode).toBe(1);
    expect(result.stderr).toContain('xml');
  });

  it('ls | head closes the pipe early without an error (exit 0, nothing on stderr)', () => {
    // 300 KB of listing: far more than a pipe buffer, so kvb is still writing when head exits.
    const result = spawnSync('bash', ['-c', `set -o pipefail; node ${JSON.stringify(KVB_BIN)} ls --values | head -n 1`], {
      env: { ...process.env, KVB_URL: server.url, KVB_BUCKET: big, KVB_TOKEN: SECRET },
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    expect(result.status).toBe(0);
    expect(result.stderr).toBe('');
    expect(result.stdout).toBe(`k00000=${'v'.repeat(100)}0\n`);
  });
});

describe('kvb txn', () => {
  let target: string;
  beforeAll(async () => {
    target = await createBucket(server.api, { secret_key: SECRET });
  });
  const inTarget = (args: string[], options: CliOptions = {}) => run(args, options, () => target);

  it('flag form: --set k=v (typed as kvb set types an argument) and --del, atomically', async () => {
    await inTarget(['set', 'gone', 'x']);
    const result = await inTarget(['txn', '--set', 'n=5', '--set', 's=hello world', '--set', 'o={"a":1}', '--del', 'gone']);
    expect(result.exitCode).toBe(0);
    expect(result.stderr).toBe('committed\n');
    const [n, s, o, gone] = await Promise.all(['n', 's', 'o', 'gone'].map((k) => read(target, k)));
    expect([n!.headers.get('kvb-type'), n!.text]).toEqual(['int64', '5']);
    expect([s!.headers.get('kvb-type'), s!.text]).toEqual(['text', 'hello world']);
    expect(o!.text).toBe('{"a":1}');
    expect(gone!.status).toBe(404);
  });

  it('a {"txn":[…]} file is sent as written, so big numbers keep every digit', async () => {
    const file = join(tmpdir(), `kvb-cli-txn-${process.pid}.json`);
    writeFileSync(file, '{"txn": [{"set": "big", "value": 12345678901234567890.10}, {"set": "t", "value": "x", "ttl": 60}]}');
    expect((await inTarget(['txn', file])).exitCode).toBe(0);
    expect((await read(target, 'big')).text).toBe('12345678901234567890.10');
    expect((await read(target, 't')).headers.get('kvb-expires-at')).not.toBeNull();
  });

  it('JSONL operations on stdin (txn -, or no FILE with stdin piped)', async () => {
    const jsonl = '{"set":"l1","value":1}\n\n{"set":"l2","value":"two"}\n';
    expect((await inTarget(['txn', '-'], { input: jsonl })).exitCode).toBe(0);
    expect((await inTarget(['txn'], { input: '{"delete":"l1"}\n' })).exitCode).toBe(0);
    expect((await read(target, 'l1')).status).toBe(404);
    expect((await read(target, 'l2')).text).toBe('two');
  });

  it('all or nothing: a bad operation commits none (exit 1)', async () => {
    const result = await inTarget(['txn', '-'], { input: '{"set":"ok","value":1}\n{"set":"bad","value":null}\n' });
    expect(result.exitCode).toBe(1);
    expect(result.stderr).toMatch(/^kvb: bad_request \(400\): transaction in bucket .*: txn\[1\]: value cannot be null\n$/);
    expect((await read(target, 'ok')).status).toBe(404);
  });

  it('no operations, invalid JSONL, or file and flags together are usage errors (exit 1)', async () => {
    const [none, invalid, both] = await Promise.all([
      inTarget(['txn']),
      inTarget(['txn', '-'], { input: '{"set":"a","value":1}\nnot json\n' }),
      inTarget(['txn', '-', '--set', 'a=1'], { input: '{"set":"a","value":1}' }),
    ]);
    expect(none.exitCode).toBe(1);
    expect(invalid.exitCode).toBe(1);
    expect(invalid.stderr).toContain('line 2 is not valid JSON');
    expect(both.exitCode).toBe(1);
  });
});
