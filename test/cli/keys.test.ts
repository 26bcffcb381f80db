import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CliOptions, kvb } from '../helpers/cli.js';
import { call, createBucket } from '../helpers/http.js';
import { type RunningServer, startServer } from '../helpers/server.js';

let server: RunningServer;
let bucket: string;
const SECRET = 'cli-keys-secret';

/** Runs kvb against this file's server and bucket, with the secret key as the credential. */
const run = (args: string[], options: CliOptions = {}) =>
  kvb(args, { ...options, env: { KVB_URL: server.url, KVB_BUCKET: bucket, KVB_TOKEN: SECRET, ...options.env } });

const read = (key: string) => call(`${server.api}/${bucket}/${encodeURIComponent(key)}`, { token: SECRET });

beforeAll(async () => {
  server = await startServer();
  bucket = await createBucket(server.api, { secret_key: SECRET });
});
afterAll(async () => {
  await server?.stop();
});

describe('kvb set and kvb get', () => {
  it('an oversized key is named cut short in the error, not echoed whole (its first 60 characters and its size)', async () => {
    const key = 'k'.repeat(2000);
    for (const args of [
      ['set', key, 'v'],
      ['get', key],
    ]) {
      const res = await run(args);
      expect(res.exitCode).toBe(1);
      expect(res.stderr).toContain(`key "${'k'.repeat(60)}…" (2000 bytes)`);
      expect(res.stderr).toContain('key is longer than 128 bytes');
      expect(res.stderr.length).toBeLessThan(400);
    }
  });

  it('round-trips text: get writes the exact bytes, with no newline added when piped', async () => {
    const set = await run(['set', 'greeting', 'hello', '--type', 'text']);
    expect(set).toMatchObject({ exitCode: 0, out: '', stderr: '' });
    const get = await run(['get', 'greeting']);
    expect(get.exitCode).toBe(0);
    expect(get.stdout).toEqual(Buffer.from('hello'));
    expect((await read('greeting')).headers.get('kvb-type')).toBe('text');
  });

  it('round-trips non-UTF-8 bytes through stdin (set -) and get', async () => {
    const bytes = Buffer.from([0xff, 0x00, 0xfe, 0x80, 0x0a, 0xc3]);
    expect((await run(['set', 'blob', '-'], { input: bytes })).exitCode).toBe(0);
    const get = await run(['get', 'blob']);
    expect(get.exitCode).toBe(0);
    expect(get.stdout).toEqual(bytes);
    expect((await read('blob')).headers.get('kvb-type')).toBe('bytes');
  });

  it('reads stdin when VALUE is absent and stdin is piped', async () => {
    expect((await run(['set', 'piped'], { input: '{"a": [1, 2]}' })).exitCode).toBe(0);
    const stored = await read('piped');
    expect(stored.text).toBe('{"a": [1, 2]}');
    expect(stored.headers.get('kvb-type')).toBe('json');
  });

  it('with no VALUE and nothing piped (stdin is /dev/null) it is a usage error, not an empty value', async () => {
    const result = await run(['set', 'empty']);
    expect(result.exitCode).toBe(1);
    expect(result.stderr).toBe('kvb: no value: give VALUE, --file F, or pipe it on stdin\n');
    expect((await read('empty')).status).toBe(404);
  });

  it('an explicit - reads stdin even when it is empty', async () => {
    expect((await run(['set', 'empty-ok', '-'], { input: '' })).exitCode).toBe(0);
    expect((await read('empty-ok')).body).toEqual(Buffer.alloc(0));
  });

  it('reads --file', async () => {
    const file = join(tmpdir(), `kvb-cli-file-${process.pid}.bin`);
    writeFileSync(file, Buffer.from([1, 2, 3, 250]));
    expect((await run(['set', 'from-file', '--file', file, '--type', 'bytes'])).exitCode).toBe(0);
    expect((await read('from-file')).body).toEqual(Buffer.from([1, 2, 3, 250]));
  });

  it('a VALUE argument is typed by kvb: number -> int64/float64 (json beyond int64), JSON object or array -> json, anything else -> text', async () => {
    const cases: Array<[string, string, string]> = [
      ['arg-int', '42', 'int64'],
      ['arg-negative', '-7', 'int64'],
      ['arg-float', '2.5', 'float64'],
      ['arg-array', '[1]', 'json'],
      ['arg-object', '{"a": 1}', 'json'],
      ['arg-word', 'world', 'text'],
      ['arg-true', 'true', 'text'],
      ['arg-null', 'null', 'text'],
      ['arg-quoted', '"x"', 'text'],
      ['arg-leading-zero', '007', 'text'],
      // Beyond int64: json, as the server types it for curl.
      ['arg-huge', '99999999999999999999', 'json'],
      ['arg-broken-json', '{oops', 'text'],
    ];
    const results = await Promise.all(cases.map(([key, value]) => run(['set', key, value])));
    for (const result of results) expect(result.exitCode, result.stderr).toBe(0);
    for (const [key, value, type] of cases) {
      const stored = await read(key);
      expect(stored.headers.get('kvb-type'), key).toBe(type);
      expect(stored.text, key).toBe(value);
    }
    // What kvb ls --values shows for a word is the word, not its base64.
    expect((await run(['ls', 'arg-word', '--values'])).out).toBe('arg-word=world\n');
  });

  it("stdin and --file follow the same rule (UTF-8 is text, one trailing newline dropped); --raw keeps the server's inference; --type always wins", async () => {
    const file = join(tmpdir(), `kvb-cli-infer-${process.pid}.txt`);
    writeFileSync(file, 'world\n');
    await Promise.all([
      run(['set', 'stdin-word', '-'], { input: 'world' }),
      run(['set', 'stdin-int', '-'], { input: '42\n' }),
      run(['set', 'file-word', '--file', file]),
      run(['set', 'raw-word', '-', '--raw'], { input: 'world\n' }),
      run(['set', 'arg-as-bytes', 'world', '--type', 'bytes']),
      run(['set', 'arg-as-json', 'true', '--type', 'json']),
    ]);
    expect((await read('stdin-word')).headers.get('kvb-type')).toBe('text');
    expect((await read('stdin-int')).headers.get('kvb-type')).toBe('int64');
    expect((await read('file-word')).headers.get('kvb-type')).toBe('text');
    expect((await read('file-word')).text).toBe('world');
    expect((await read('raw-word')).headers.get('kvb-type')).toBe('bytes');
    expect((await read('raw-word')).text).toBe('world\n');
    expect((await read('arg-as-bytes')).headers.get('kvb-type')).toBe('bytes');
    expect((await read('arg-as-json')).headers.get('kvb-type')).toBe('json');
  });

  it('--type float 3 is sent as 3.0 and stored as float64', async () => {
    expect((await run(['set', 'ratio', '3', '--type', 'float'])).exitCode).toBe(0);
    const stored = await read('ratio');
    expect(stored.headers.get('kvb-type')).toBe('float64');
    expect(stored.text).toBe('3.0');
  });

  it('--type int stores int64, --type text keeps digits as text, --type json and bytes use their Content-Types', async () => {
    await Promise.all([
      run(['set', 't-int', '-7', '--type', 'int']),
      run(['set', 't-text', '123', '--type', 'text']),
      run(['set', 't-json', '"quoted"', '--type', 'json']),
      run(['set', 't-bytes', 'abc', '--type', 'bytes']),
    ]);
    expect((await read('t-int')).headers.get('kvb-type')).toBe('int64');
    expect((await read('t-int')).text).toBe('-7');
    expect((await read('t-text')).headers.get('kvb-type')).toBe('text');
    expect((await read('t-json')).headers.get('kvb-type')).toBe('json');
    expect((await read('t-bytes')).headers.get('kvb-type')).toBe('bytes');
  });

  it('--type int refuses a non-integer before sending anything (exit 1)', async () => {
    const result = await run(['set', 'not-int', '3.5', '--type', 'int']);
    expect(result.exitCode).toBe(1);
    expect(result.stderr).toMatch(/^kvb: "3.5" is not a 64-bit integer\n$/);
    expect((await read('not-int')).status).toBe(404);
  });

  it('a value the server refuses is exit 1 with the server reason on one line', async () => {
    const result = await run(['set', 'bad-json', '{oops', '--type', 'json']);
    expect(result.exitCode).toBe(1);
    expect(result.stderr).toBe(`kvb: bad_request (400): key "bad-json" in bucket ${bucket}: body is not valid JSON\n`);
  });

  it('--ttl sets the expiry', async () => {
    const before = Date.now();
    expect((await run(['set', 'short', 'x', '--ttl', '60'])).exitCode).toBe(0);
    const expires = Date.parse((await read('short')).headers.get('kvb-expires-at') ?? '');
    expect(expires).toBeGreaterThanOrEqual(before + 59_000);
    expect(expires).toBeLessThanOrEqual(Date.now() + 61_000);
  });

  it('keys with slashes, spaces and URL characters are sent percent-encoded', async () => {
    const key = 'user/42 a?b#c%d';
    expect((await run(['set', key, 'v', '--type', 'text'])).exitCode).toBe(0);
    expect((await read(key)).text).toBe('v');
    expect((await run(['get', key])).out).toBe('v');
  });

  it('get --json prints key, type, value, expires_at and revision from the headers, JSON kept exact and int64 as a decimal string', async () => {
    await Promise.all([
      run(['set', 'j-big', '{"n": 12345678901234567890}', '--type', 'json', '--ttl', '0']),
      run(['set', 'j-int', '9223372036854775807', '--ttl', '0']),
      run(['set', 'j-text', 'hi', '--type', 'text', '--ttl', '120']),
      run(['set', 'j-bytes', '-', '--ttl', '0'], { input: Buffer.from([0xff, 0xfe]) }),
    ]);
    const [big, int, text, bytes] = await Promise.all(['j-big', 'j-int', 'j-text', 'j-bytes'].map((key) => run(['get', key, '--json'])));
    const rev = async (key: string) => (await read(key)).headers.get('kvb-revision');
    expect(big!.out).toBe(
      `{"key":"j-big","type":"json","value":{"n":12345678901234567890},"expires_at":null,"revision":${await rev('j-big')}}\n`,
    );
    expect(int!.out).toBe(
      `{"key":"j-int","type":"int64","value":"9223372036854775807","expires_at":null,"revision":${await rev('j-int')}}\n`,
    );
    expect(bytes!.out).toBe(`{"key":"j-bytes","type":"bytes","value":"//4=","expires_at":null,"revision":${await rev('j-bytes')}}\n`);
    const parsed = JSON.parse(text!.out) as { key: string; type: string; value: string; expires_at: string };
    expect(parsed).toMatchObject({ key: 'j-text', type: 'text', value: 'hi' });
    expect(parsed.expires_at).toBe((await read('j-text')).headers.get('kvb-expires-at'));
  });

  it('get of a missing key exits 2 with one line on stderr and nothing on stdout', async () => {
    const result = await run(['get', 'nope']);
    expect(result.exitCode).toBe(2);
    expect(result.out).toBe('');
    expect(result.stderr).toBe(`kvb: not_found (404): key "nope" in bucket ${bucket}: no such key\n`);
  });
});

describe('kvb get --prefix', () => {
  it('points to kvb ls PREFIX --values instead of suggesting --profile (exit 1, one line)', async () => {
    const [spaced, joined] = await Promise.all([run(['get', '--prefix', 'user/']), run(['get', '--prefix=user/'])]);
    expect(spaced).toMatchObject({ exitCode: 1, out: '' });
    expect(spaced.stderr).toBe(
      "kvb: unknown option '--prefix' for 'get': kvb get reads keys by name; for every key under a prefix with its value, use kvb ls PREFIX --values (kvb ls user/ --values)\n",
    );
    expect(spaced.stderr).not.toContain('--profile');
    expect(joined.stderr).toContain('kvb ls PREFIX --values');
    // Other unknown flags keep commander's suggestion.
    expect((await run(['get', 'k', '--jsn'])).stderr).toContain('--json');
  });
});

describe('kvb del', () => {
  it('deletes (exit 0), then a second delete and a get exit 2', async () => {
    await run(['set', 'doomed', 'x']);
    expect(await run(['del', 'doomed'])).toMatchObject({ exitCode: 0, out: '', stderr: '' });
    const [again, get] = await Promise.all([run(['del', 'doomed']), run(['get', 'doomed'])]);
    expect(again.exitCode).toBe(2);
    expect(get.exitCode).toBe(2);
  });
});

describe('kvb incr', () => {
  it('adds +1 by default, takes -1 as a delta (not an option) and 5 as +5, printing each new value', async () => {
    expect((await run(['incr', 'counter'])).out).toBe('1\n');
    expect((await run(['incr', 'counter', '-1'])).out).toBe('0\n');
    expect((await run(['incr', 'counter', '5'])).out).toBe('5\n');
    expect((await run(['incr', 'counter', '+2.5'])).out).toBe('7.5\n');
    expect((await read('counter')).headers.get('kvb-type')).toBe('float64');
  });

  it('--ttl sets the expiry of the counter', async () => {
    await run(['incr', 'ttl-counter', '3', '--ttl', '100']);
    expect((await read('ttl-counter')).headers.get('kvb-expires-at')).not.toBeNull();
  });

  it('a malformed delta is a usage error (exit 1); a non-numeric stored value is a 400 (exit 1)', async () => {
    await run(['set', 'words', 'abc', '--type', 'text']);
    const [bad, text] = await Promise.all([run(['incr', 'x', 'abc']), run(['incr', 'words'])]);
    expect(bad.exitCode).toBe(1);
    expect(bad.stderr).toMatch(/^kvb: delta must be a number/);
    expect(text.exitCode).toBe(1);
    expect(text.stderr).toMatch(/^kvb: bad_request \(400\): key "words"/);
  });
});
