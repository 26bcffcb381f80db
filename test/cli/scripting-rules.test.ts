import { existsSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CliOptions, deadUrl, inTerminal, kvb, tempConfigHome } from '../helpers/cli.js';
import { call, createBucket, expectError } from '../helpers/http.js';
import { KVB_BIN, type RunningServer, startServer } from '../helpers/server.js';

/*
 * Where scripts and people tripped, each through the real CLI
 * against a spawned server: the one typing rule for values, int64 as strings in JSON output,
 * typed listings and `ls -l`, the value limit, credentials and connections, import of plain JSONL.
 */

let server: RunningServer;
let bucket: string;
const SECRET = 'scripting-rules-secret';

const env = () => ({ KVB_URL: server.url, KVB_BUCKET: bucket, KVB_TOKEN: SECRET });
const run = (args: string[], options: CliOptions = {}) => kvb(args, { ...options, env: { ...env(), ...options.env } });
const read = (key: string, b = bucket) => call(`${server.api}/${b}/${encodeURIComponent(key)}`, { token: SECRET });
const typeOf = async (key: string) => (await read(key)).headers.get('kvb-type');
const jq = '/usr/bin/jq';

beforeAll(async () => {
  server = await startServer();
  bucket = await createBucket(server.api, { secret_key: SECRET, read_key: 'scripting-rules-read' });
});
afterAll(async () => {
  await server?.stop();
});

describe('one typing rule for values from an argument, stdin, --file and txn --set', () => {
  it('stdin: UTF-8 is typed like an argument after dropping the one newline echo adds; other bytes are bytes, exactly', async () => {
    const cases: Array<[string, string | Buffer, string, string | Buffer]> = [
      ['in-echo', 'hello\n', 'text', 'hello'],
      ['in-two-newlines', 'two\n\n', 'text', 'two\n'],
      ['in-crlf', 'dos\r\n', 'text', 'dos'],
      ['in-int', '42\n', 'int64', '42'],
      ['in-float', '2.5\n', 'float64', '2.5'],
      ['in-json', '{"a": [1, 2]}\n', 'json', '{"a": [1, 2]}'],
      ['in-huge', '123456789012345678901234567890\n', 'json', '123456789012345678901234567890'],
      ['in-true', 'true\n', 'text', 'true'],
      ['in-nul', Buffer.from('a\u0000b\n'), 'bytes', Buffer.from('a\u0000b\n')],
      ['in-binary', Buffer.from([0xff, 0xfe, 0x0a]), 'bytes', Buffer.from([0xff, 0xfe, 0x0a])],
    ];
    const results = await Promise.all(cases.map(([key, input]) => run(['set', key, '-'], { input })));
    for (const result of results) expect(result.exitCode, result.stderr).toBe(0);
    for (const [key, , type, stored] of cases) {
      const answer = await read(key);
      expect(answer.headers.get('kvb-type'), key).toBe(type);
      expect(answer.body, key).toEqual(Buffer.isBuffer(stored) ? stored : Buffer.from(stored));
    }
    // `echo hello | kvb set b -` then `kvb get b`: text, printed as it was echoed.
    expect((await run(['get', 'in-echo'])).out).toBe('hello');
  });

  it('an argument, --file and txn --set type the same values the same way; --type and --raw override', async () => {
    const file = join(tmpdir(), `kvb-rules-${process.pid}.txt`);
    writeFileSync(file, '42\n');
    const values: Array<[string, string]> = [
      ['1', 'int64'],
      ['-7', 'int64'],
      ['1.5', 'float64'],
      ['123456789012345678901234567890', 'json'],
      ['{"a":1}', 'json'],
      ['[1,2]', 'json'],
      ['hi there', 'text'],
      ['true', 'text'],
      ['null', 'text'],
      ['"quoted"', 'text'],
    ];
    const txn = await run(['txn', ...values.flatMap(([value], i) => ['--set', `t/${i}=${value}`])]);
    expect(txn.exitCode, txn.stderr).toBe(0);
    const args = await Promise.all(values.map(([value], i) => run(['set', `a/${i}`, value])));
    for (const result of args) expect(result.exitCode, result.stderr).toBe(0);
    for (const [i, [value, type]] of values.entries()) {
      for (const key of [`t/${i}`, `a/${i}`]) {
        const answer = await read(key);
        expect([key, answer.headers.get('kvb-type'), answer.text]).toEqual([key, type, value]);
      }
    }
    await Promise.all([
      run(['set', 'f/int', '--file', file]),
      run(['set', 'f/raw', '--file', file, '--raw']),
      run(['set', 'f/text', '--file', file, '--type', 'text']),
      run(['set', 'o/raw', '-', '--raw'], { input: 'hello\n' }),
    ]);
    expect([await typeOf('f/int'), (await read('f/int')).text]).toEqual(['int64', '42']);
    // --raw: the bytes untouched, typed by the server as for curl (42\n is not in its number grammar, but valid JSON).
    expect([await typeOf('f/raw'), (await read('f/raw')).text]).toEqual(['json', '42\n']);
    expect([await typeOf('f/text'), (await read('f/text')).text]).toEqual(['text', '42']);
    expect([await typeOf('o/raw'), (await read('o/raw')).text]).toEqual(['bytes', 'hello\n']);
  });

  it('on the wire, a transaction set may name its "type" (an extension), written as in an export line', async () => {
    const txn = (ops: unknown[]) =>
      call(`${server.api}/${bucket}`, {
        method: 'POST',
        body: JSON.stringify({ txn: ops }),
        headers: { 'content-type': 'application/json', authorization: `Bearer ${SECRET}` },
      });
    expect(
      (
        await txn([
          { set: 'w/int', value: '9223372036854775807', type: 'int64' },
          { set: 'w/bytes', value: 'AAH/', type: 'bytes' },
          { set: 'w/json-string', value: 'x', type: 'json' },
          { set: 'w/plain', value: 7 },
        ])
      ).status,
    ).toBe(204);
    expect([await typeOf('w/int'), (await read('w/int')).text]).toEqual(['int64', '9223372036854775807']);
    expect((await read('w/bytes')).body).toEqual(Buffer.from([0x00, 0x01, 0xff]));
    expect([await typeOf('w/json-string'), (await read('w/json-string')).text]).toEqual(['json', '"x"']);
    // Without "type", the spec's rule: any non-string JSON value is json.
    expect(await typeOf('w/plain')).toBe('json');
    const badType = await txn([{ set: 'w/x', value: 1, type: 'number' }]);
    expectError(badType, 400, 'bad_request');
    expect(badType.headers.get('kvb-error-detail')).toBe('txn[0]: type must be text, json, int64, float64 or bytes');
    const notInt = await txn([{ set: 'w/x', value: 'seven', type: 'int64' }]);
    expectError(notInt, 400, 'bad_request');
    expect(notInt.headers.get('kvb-error-detail')).toBe('txn[0]: an int64 value must be a decimal string within the int64 range');
    expect((await read('w/x')).status).toBe(404);
  });

  it('kvb set --help, the man page and docs/cli.md state the rule', async () => {
    const help = (await kvb(['set', '--help'])).out;
    const { readFileSync } = await import('node:fs');
    const root = new URL('../../', import.meta.url);
    const man = readFileSync(new URL('man/kvb.1', root), 'utf8').replace(/\\-/g, '-');
    const guide = readFileSync(new URL('docs/cli.md', root), 'utf8');
    for (const text of [help, man, guide]) {
      expect(text).toMatch(/trailing newline/);
      expect(text).toMatch(/--raw/);
      expect(text).toMatch(/beyond int64/);
    }
  });
});

describe('JSON output: int64 as decimal strings, listings that carry the type', () => {
  beforeAll(async () => {
    await run(['set', 'n/max', '9223372036854775807']);
    await run(['set', 'n/bytes', '-'], { input: Buffer.from([0x00, 0x01, 0xff]) });
    await run(['set', 'n/text', 'AAH/']);
  });

  it('get --json and ls --format json/jsonl --values print int64 as a decimal string', async () => {
    const got = JSON.parse((await run(['get', 'n/max', '--json'])).out) as { value: unknown };
    expect(got.value).toBe('9223372036854775807');
    const jsonl = (await run(['ls', 'n/', '--format', 'jsonl', '--values'])).out.trimEnd().split('\n');
    expect(
      jsonl.map((l) => JSON.parse(l) as { key: string; type: string; value: unknown }).map(({ key, type, value }) => [key, type, value]),
    ).toEqual([
      ['n/bytes', 'bytes', 'AAH/'],
      ['n/max', 'int64', '9223372036854775807'],
      ['n/text', 'text', 'AAH/'],
    ]);
    const array = JSON.parse((await run(['ls', 'n/', '--format', 'json', '--values'])).out) as Array<{
      key: string;
      type: string;
      size: number;
      rev: number;
    }>;
    expect(array.map((o) => [o.key, o.type, o.size])).toEqual([
      ['n/bytes', 'bytes', 3],
      ['n/max', 'int64', 19],
      ['n/text', 'text', 4],
    ]);
    expect(array.every((o) => Number.isInteger(o.rev) && o.rev > 0)).toBe(true);
  });

  it.skipIf(!existsSync(jq))('get --json | jq -r .value keeps an int64 exact', async () => {
    const { stdout } = await execa('bash', ['-c', `node ${JSON.stringify(KVB_BIN)} get n/max --json | ${jq} -r .value`], {
      env: { ...env(), XDG_CONFIG_HOME: tempConfigHome() },
    });
    expect(stdout).toBe('9223372036854775807');
  });

  it('ls -l piped is tab-separated key, type, size, expires_at and rev', async () => {
    const result = await run(['ls', 'n/', '-l']);
    expect(result.exitCode).toBe(0);
    const rows = result.out
      .trimEnd()
      .split('\n')
      .map((l) => l.split('\t'));
    expect(rows.map((r) => r.slice(0, 3))).toEqual([
      ['n/bytes', 'bytes', '3'],
      ['n/max', 'int64', '19'],
      ['n/text', 'text', '4'],
    ]);
    for (const row of rows) {
      expect(row[3]).toMatch(/^\d{4}-\d\d-\d\dT/);
      expect(row[4]).toBe((await read(row[0]!)).headers.get('kvb-revision'));
    }
  });

  it('ls -l at a terminal is a table of key, type, size, expires and rev that fits its width', async () => {
    await run(['set', `n/${'long-key-'.repeat(12)}`, 'x']);
    const result = await inTerminal(['ls', 'n/', '-l'], [], { ...env(), XDG_CONFIG_HOME: tempConfigHome(), PTY_COLUMNS: '60' });
    expect(result.exitCode, result.output).toBe(0);
    // The progress line (stderr, the same terminal) ends with \r; the table starts after it.
    const all = result.output.split(/\r\n|\n|\r/).filter((l) => l.trim() !== '');
    const lines = all.slice(all.findIndex((l) => l.startsWith('key ')));
    expect(lines[0]).toMatch(/^key\s+type\s+size\s+expires\s+rev$/);
    expect(lines.find((l) => l.startsWith('n/max'))).toMatch(/^n\/max\s+int64\s+19\s+in \d+d\s+\d+$/);
    expect(lines.some((l) => l.includes('…'))).toBe(true);
    for (const l of lines) expect([...l].length, l).toBeLessThanOrEqual(60);
    // The --values table shows an int64 with every digit, not as a rounded double.
    const values = await inTerminal(['ls', 'n/max', '--values'], [], { ...env(), XDG_CONFIG_HOME: tempConfigHome() });
    expect(values.output).toContain('9223372036854775807');
  });
});

describe('the value limit: --max-value-bytes, named by the server and checked by the CLI', () => {
  it("the CLI refuses a value over the server's limit before sending it, naming the limit; the server names it too", async () => {
    const big = Buffer.alloc(20_000, 0x61);
    const result = await run(['set', 'too-big', '-'], { input: big });
    expect(result.exitCode).toBe(1);
    // Not the server's 400 (that would read "bad_request (400): …"): the CLI's own check.
    expect(result.stderr).toBe(
      "kvb: the value (20000 bytes) is larger than the server's limit of 16384 bytes (16 KiB), set by kvb serve --max-value-bytes\n",
    );
    expect((await read('too-big')).status).toBe(404);
    const answer = await call(`${server.api}/${bucket}/too-big`, { method: 'POST', body: big, token: SECRET });
    expectError(answer, 400, 'bad_request');
    expect(answer.headers.get('kvb-error-detail')).toBe(
      "the value (20000 bytes) is larger than the server's limit of 16384 bytes (16 KiB), set by kvb serve --max-value-bytes",
    );
    expect(((await call(`${server.url}/health`)).json() as { max_value_bytes: number }).max_value_bytes).toBe(16384);
  });

  it('an operator may raise it: the server and the CLI then take larger values, up to the new limit', async () => {
    const raised = await startServer({ args: ['--max-value-bytes', '65536'] });
    try {
      const b = await createBucket(raised.api, { secret_key: SECRET });
      const on = (args: string[], options: CliOptions = {}) =>
        kvb(args, { ...options, env: { KVB_URL: raised.url, KVB_BUCKET: b, KVB_TOKEN: SECRET } });
      const value = Buffer.alloc(35_000, 0x62);
      expect((await on(['set', 'ok', '-'], { input: value })).exitCode).toBe(0);
      expect((await call(`${raised.api}/${b}/ok`, { token: SECRET })).body).toEqual(value);
      const txn = await on(['txn', '--set', `t=${'c'.repeat(30_000)}`]);
      expect(txn.exitCode, txn.stderr).toBe(0);
      const over = await on(['set', 'no', '-'], { input: Buffer.alloc(70_000, 0x62) });
      expect(over.exitCode).toBe(1);
      expect(over.stderr).toContain("larger than the server's limit of 65536 bytes (64 KiB)");
      const answer = await call(`${raised.api}/${b}/no`, { method: 'POST', body: Buffer.alloc(70_000), token: SECRET });
      expect(answer.headers.get('kvb-error-detail')).toContain('limit of 65536 bytes');
    } finally {
      await raised.stop();
    }
  });
});

describe('credentials and connections', () => {
  it("mint-token on a bucket without a signing key explains the cause and the fix, exit 1; the wire keeps the spec's 503", async () => {
    const result = await run(['mint-token', '--prefix', 'u/', '--permissions', 'read', '--ttl', '60']);
    expect(result.exitCode).toBe(1);
    expect(result.stderr).toBe(
      `kvb: bucket ${bucket} has no signing key, so it cannot mint tokens (the server answered 503): give it one with kvb bucket update --rotate-signing-key\n`,
    );
    const answer = await call(`${server.api}/${bucket}/tokens/`, {
      method: 'POST',
      body: 'prefix=u/&permissions=read&ttl=60',
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Bearer ${SECRET}` },
    });
    expectError(answer, 503, 'service_unavailable');
  });

  it('an expired token says when it expired; a token outside its prefix names the prefix', async () => {
    const signed = await createBucket(server.api, {
      secret_key: SECRET,
      read_key: 'signed-read-key',
      signing_key: 'signing-key-for-rules',
    });
    const on = (args: string[], token?: string) =>
      kvb(args, { env: { KVB_URL: server.url, KVB_BUCKET: signed, KVB_TOKEN: token ?? SECRET } });
    const [short, long] = (
      await Promise.all(['1', '600'].map((ttl) => on(['mint-token', '--prefix', 'u/', '--permissions', 'read', '--ttl', ttl])))
    ).map((minted) => minted.out.trim());
    const { exp } = JSON.parse(Buffer.from(short!.split('.')[1]!, 'base64url').toString()) as { exp: number };
    // The server checks exp against the real clock (1 s is the shortest ttl, and the token's key
    // never leaves the server, so a test cannot sign an expired one): wait once, until exp has
    // passed on this machine's clock, which the server shares. Checking the prefix meanwhile.
    const outside = on(['get', 'v/x'], long);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, exp * 1000 + 50 - Date.now())));
    expect((await outside).exitCode).toBe(3);
    expect((await outside).stderr).toContain(`key "v/x" is outside the token's prefix "u/"`);
    const expired = await on(['get', 'u/x'], short);
    expect(expired.exitCode).toBe(3);
    expect(expired.stderr).toContain(`token expired at ${new Date(exp * 1000).toISOString()}`);
    const answer = await call(`${server.api}/${signed}/u/x`, { token: short });
    expectError(answer, 401, 'unauthorized');
  });

  it('profile add saves a profile for an existing bucket, which then works; an existing name needs --force', async () => {
    await run(['set', 'shared', 'team value']);
    const home = tempConfigHome();
    const add = await kvb(
      ['profile', 'add', 'team', '--url', server.url.replace('http://', ''), '--bucket', bucket, '--token', 'scripting-rules-read'],
      {
        configHome: home,
      },
    );
    expect(add.exitCode, add.stderr).toBe(0);
    expect((await kvb(['--profile', 'team', 'get', 'shared'], { configHome: home })).out).toBe('team value');
    const shown = JSON.parse((await kvb(['profile', 'show', 'team', '--json'], { configHome: home })).out) as Record<string, string>;
    expect(shown).toEqual({ name: 'team', url: server.url, bucket, credential: 'token' });
    const again = await kvb(['profile', 'add', 'team', '--bucket', 'other'], { configHome: home });
    expect(again.exitCode).toBe(1);
    expect(again.stderr).toContain('already exists');
    expect((await kvb(['profile', 'add', 'team', '--bucket', 'other', '--force'], { configHome: home })).exitCode).toBe(0);
    expect((await kvb(['profile', 'add', 'nobucket'], { configHome: home })).stderr).toContain('needs --bucket');
  });

  it('--url without a scheme means http://; a wrong path or a server that is not kvb is not "key missing" (exit 1, not 2)', async () => {
    await run(['set', 'here', 'yes']);
    const bare = await run(['get', 'here'], { env: { KVB_URL: server.url.replace('http://', '') } });
    expect([bare.exitCode, bare.out]).toEqual([0, 'yes']);
    const wrongPath = await run(['get', 'here'], { env: { KVB_URL: `${server.url}/foo` } });
    expect(wrongPath.exitCode).toBe(1);
    expect(wrongPath.stderr).toContain(`the server at ${server.url}/foo does not answer as kvb (404 no such route)`);
    const other = createServer((_req, res) => res.writeHead(404, { 'content-type': 'text/html' }).end('<h1>Not Found</h1>'));
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(other.address() as AddressInfo).port}`;
      const result = await run(['get', 'here'], { env: { KVB_URL: url } });
      expect(result.exitCode).toBe(1);
      expect(result.stderr).toContain('not a kvb error');
    } finally {
      other.close();
    }
    // A real missing key still exits 2.
    expect((await run(['get', 'absent'])).exitCode).toBe(2);
  });

  it('--token "" means anonymous, not KVB_TOKEN', async () => {
    const anonymous = await run(['--token', '', 'get', 'here']);
    expect(anonymous.exitCode).toBe(3);
    expect(anonymous.stderr).toContain('needs a credential');
    expect((await run(['get', 'here'])).exitCode).toBe(0);
  });

  it('kvb watch against a server that is down from the start exits 4 at once', async () => {
    const result = await kvb(['watch'], { env: { KVB_URL: await deadUrl(), KVB_BUCKET: bucket } });
    expect(result.exitCode).toBe(4);
    expect(result.stderr).toMatch(/^kvb: cannot reach http:\/\/127\.0\.0\.1:\d+ \(connection refused\)/);
  });
});

describe('kvb import --format jsonl', () => {
  it('loads plain {"key","value"} and {"key","type","value"} lines in one revision', async () => {
    const target = await createBucket(server.api, { secret_key: SECRET });
    const file = join(tmpdir(), `kvb-plain-${process.pid}.jsonl`);
    writeFileSync(
      file,
      [
        '{"key":"r/text","value":"hello"}',
        '{"key":"r/int","value":42}',
        '{"key":"r/big","type":"int64","value":9223372036854775807}',
        '{"key":"r/str-int","type":"int64","value":"-5"}',
        '{"key":"r/float","value":1.5}',
        '{"key":"r/bytes","type":"bytes","value":"AAH/"}',
        '{"key":"r/json","value":{"x":[1]},"ttl":600}',
        '',
      ].join('\n'),
    );
    const result = await kvb(['import', '--format', 'jsonl', file], { env: { ...env(), KVB_BUCKET: target } });
    expect(result.exitCode, result.stderr).toBe(0);
    expect(result.stderr).toMatch(/^imported 7 keys, skipped 0 already expired \(revision \d+\)/);
    const expected: Array<[string, string, string]> = [
      ['r/text', 'text', 'hello'],
      ['r/int', 'int64', '42'],
      ['r/big', 'int64', '9223372036854775807'],
      ['r/str-int', 'int64', '-5'],
      ['r/float', 'float64', '1.5'],
      ['r/json', 'json', '{"x":[1]}'],
    ];
    for (const [key, type, text] of expected) {
      const answer = await read(key, target);
      expect([key, answer.headers.get('kvb-type'), answer.text]).toEqual([key, type, text]);
    }
    expect((await read('r/bytes', target)).body).toEqual(Buffer.from([0x00, 0x01, 0xff]));
    expect((await read('r/json', target)).headers.get('kvb-expires-at')).not.toBeNull();
  });

  it('a line without "ttl" or "expires_at" gets the bucket\'s default TTL, as every other write; "ttl":0 and "expires_at":null never expire', async () => {
    const target = await createBucket(server.api, { secret_key: SECRET, default_ttl: '3600' });
    const before = Date.now();
    const result = await kvb(['import', '--format', 'jsonl', '-'], {
      env: { ...env(), KVB_BUCKET: target },
      input: [
        '{"key":"d/default","value":"a"}',
        '{"key":"d/never","value":"b","ttl":0}',
        '{"key":"d/null","value":"c","expires_at":null}',
        '{"key":"d/own","value":"d","ttl":60}',
        '',
      ].join('\n'),
    });
    expect(result.exitCode, result.stderr).toBe(0);
    const expiry = async (key: string) => {
      const header = (await read(key, target)).headers.get('kvb-expires-at');
      return header === null ? null : Date.parse(header) - before;
    };
    // kvb set without --ttl, the same bucket: the import must match it.
    expect((await kvb(['set', 'd/set', 'e'], { env: { ...env(), KVB_BUCKET: target } })).exitCode).toBe(0);
    const [fromImport, fromSet] = [await expiry('d/default'), await expiry('d/set')];
    expect(fromImport).toBeGreaterThanOrEqual(3600_000 - 1000);
    expect(fromImport).toBeLessThanOrEqual(fromSet!);
    expect(await expiry('d/never')).toBeNull();
    expect(await expiry('d/null')).toBeNull();
    // Its own 60 s, not the bucket's hour.
    expect(await expiry('d/own')).toBeLessThan(fromImport! - 3000_000);
  });

  it('a bad line changes nothing and is named; a missing file says there is no such file', async () => {
    const target = await createBucket(server.api, { secret_key: SECRET });
    const bad = await kvb(['import', '--format', 'jsonl', '-'], {
      env: { ...env(), KVB_BUCKET: target },
      input: '{"key":"a","value":1}\n{"key":"b"}\n',
    });
    expect(bad.exitCode).toBe(1);
    expect(bad.stderr).toMatch(/^kvb: line 2: "value" is missing or null/);
    expect((await read('a', target)).status).toBe(404);
    const missing = await kvb(['import', 'missing.ndjson'], { env: { ...env(), KVB_BUCKET: target } });
    expect(missing.exitCode).toBe(1);
    expect(missing.stderr).toBe('kvb: cannot read missing.ndjson: no such file\n');
  });
});
