import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inTerminal, kvb } from '../helpers/cli.js';
import { call, createBucket } from '../helpers/http.js';
import { type RunningServer, startServer } from '../helpers/server.js';

/** What kvb does differently when a person is at a terminal. */

let server: RunningServer;
let bucket: string;
const SECRET = 'tty-secret';
const BLOB = Buffer.from([0x1b, 0x5b, 0x32, 0x4a, 0x00, 0xff, 0xfe, 0x07]);
const env = () => ({ KVB_URL: server.url, KVB_BUCKET: bucket, KVB_TOKEN: SECRET, XDG_CONFIG_HOME: server.dataDir });

beforeAll(async () => {
  server = await startServer();
  bucket = await createBucket(server.api, { secret_key: SECRET });
  await kvb(['txn', '--set', 'greeting=hello', '--set', 'n=42'], { env: env() });
  await kvb(['set', 'blob', '-'], { env: env(), input: BLOB });
});
afterAll(async () => {
  await server?.stop();
});

describe('on a terminal', () => {
  it('get adds a newline after text (never in a pipe)', async () => {
    const result = await inTerminal(['get', 'greeting'], [], env());
    expect(result.exitCode).toBe(0);
    expect(result.output).toBe('hello\r\n');
  });

  it('get refuses to print binary data (exit 1, with a hint); -o FILE writes its exact bytes', async () => {
    const refused = await inTerminal(['get', 'blob'], [], env());
    expect(refused.exitCode).toBe(1);
    expect(refused.output).toBe(
      'kvb: "blob" holds 8 bytes of binary data, not printed to a terminal: use -o FILE, or redirect stdout to a file\r\n',
    );
    const file = join(server.dataDir, 'blob.out');
    const saved = await inTerminal(['get', 'blob', '-o', file], [], env());
    expect(saved).toMatchObject({ exitCode: 0, output: '' });
    expect(readFileSync(file)).toEqual(BLOB);
    // Not at a terminal, the bytes go to stdout as they are.
    expect((await kvb(['get', 'blob'], { env: env() })).stdout).toEqual(BLOB);
  });

  it('ls prints plain columns: a key heading, one line per key, no box', async () => {
    const result = await inTerminal(['ls'], [], env());
    expect(result.exitCode).toBe(0);
    expect(result.output).not.toMatch(/[─│┌]/);
    // A carriage return redraws the line (the progress note on stderr, when the listing is slow): keep what stays on screen.
    const lines = result.output
      .split('\r\n')
      .map((l) => l.slice(l.lastIndexOf('\r') + 1))
      .filter((l) => l !== '');
    expect(lines).toEqual(['key', 'blob', 'greeting', 'n']);
  });

  it('ls --values fits an 80-column terminal: key, type, size, expires, value, one line per key, no rules', async () => {
    const long = `long-${'x'.repeat(100)}`;
    const set = await kvb(['set', long, 'v'.repeat(300)], { env: env() });
    expect(set.exitCode, set.stderr.toString()).toBe(0);
    try {
      const result = await inTerminal(['ls', '--values'], [], { ...env(), PTY_COLUMNS: '80' });
      expect(result.exitCode).toBe(0);
      // A carriage return redraws the line (the progress note on stderr, when the listing is slow): keep what stays on screen.
      const lines = result.output
        .split('\r\n')
        .map((l) => l.slice(l.lastIndexOf('\r') + 1))
        .filter((l) => l !== '');
      expect(lines[0]).toMatch(/^key\s+type\s+size\s+expires\s+value$/);
      expect(lines, result.output).toHaveLength(5);
      for (const l of lines) expect([...l].length, l).toBeLessThanOrEqual(80);
      expect(result.output).not.toMatch(/[─│┌]/);
      expect(lines.find((l) => l.startsWith('greeting'))).toMatch(/^greeting\s+text\s+5\s+in \d+d\s+hello$/);
      expect(lines.find((l) => l.startsWith('blob'))).toMatch(/^blob\s+bytes\s+8\s+in \d+d\s+<8 bytes>$/);
      expect(lines.find((l) => l.startsWith('n '))).toMatch(/\s42$/);
      expect(lines.find((l) => l.startsWith('long-'))).toMatch(/^long-x+…\s.*\sv+…$/);
    } finally {
      await kvb(['del', long], { env: env() });
    }
  });

  it('ls --values shows JSON and numbers as stored: 99999999999999999999 and the float64 3.0 keep their digits', async () => {
    const id = await createBucket(server.api, { secret_key: SECRET });
    const target = { ...env(), KVB_BUCKET: id };
    for (const [key, value] of [
      ['big', '99999999999999999999'],
      ['doc', '{"id":12345678901234567890}'],
      ['three', '3.0'],
    ]) {
      expect((await kvb(['set', key!, value!], { env: target })).exitCode).toBe(0);
    }
    const result = await inTerminal(['ls', '--values'], [], { ...target, PTY_COLUMNS: '120' });
    expect(result.exitCode, result.output).toBe(0);
    const lines = result.output.split('\r\n').map((l) => l.slice(l.lastIndexOf('\r') + 1));
    expect(lines.find((l) => l.startsWith('big'))).toMatch(/^big\s+json\s+20\s+in \d+d\s+99999999999999999999$/);
    expect(lines.find((l) => l.startsWith('doc'))).toMatch(/\s\{"id":12345678901234567890\}$/);
    expect(lines.find((l) => l.startsWith('three'))).toMatch(/^three\s+float64\s+3\s+in \d+d\s+3\.0$/);
  });

  it('failures are coloured, unless NO_COLOR is set', async () => {
    const [coloured, plain] = await Promise.all([
      inTerminal(['get', 'missing'], [], env()),
      inTerminal(['get', 'missing'], [], { ...env(), NO_COLOR: '1' }),
    ]);
    expect(coloured.exitCode).toBe(2);
    expect(coloured.raw).toContain('\u001b[31mkvb:\u001b[0m not_found (404)');
    expect(plain.exitCode).toBe(2);
    expect(plain.raw).not.toContain('\u001b[');
    expect(plain.raw).toContain('kvb: not_found (404)');
  });

  it('bucket delete asks first: "no" keeps the bucket (exit 1), "yes" deletes it', async () => {
    const doomed = await createBucket(server.api, { secret_key: SECRET });
    const target = { ...env(), KVB_BUCKET: doomed };
    const kept = await inTerminal(['bucket', 'delete'], [{ expect: 'Delete bucket', send: '\r' }], target);
    expect(kept.exitCode, kept.output).toBe(1);
    expect((await call(`${server.api}/${doomed}`, { token: SECRET })).status).toBe(200);
    // Left arrow moves to "Yes".
    const deleted = await inTerminal(['bucket', 'delete'], [{ expect: 'Delete bucket', send: '\u001b[D\r' }], target);
    expect(deleted.exitCode, deleted.output).toBe(0);
    expect(deleted.output).toContain(`deleted bucket ${doomed}`);
    expect((await call(`${server.api}/${doomed}`, { token: SECRET })).status).toBe(404);
  });

  it('rollback shows what would change and asks first: "no" changes nothing (exit 1), "yes" rolls back', { timeout: 90_000 }, async () => {
    const id = await createBucket(server.api, { secret_key: SECRET, default_ttl: '0' });
    const target = { ...env(), KVB_BUCKET: id };
    const put = (key: string, value: string) => call(`${server.api}/${id}/${key}`, { method: 'PUT', body: value, token: SECRET });
    await put('cfg', 'old');
    const good = Number((await put('other', 'x')).headers.get('kvb-revision'));
    const now = Number((await put('cfg', 'new')).headers.get('kvb-revision'));
    const kept = await inTerminal(['rollback', '--to', String(good)], [{ expect: 'Roll bucket', send: '\r' }], target);
    expect(kept.exitCode, kept.output).toBe(1);
    expect(kept.output).toContain('cfg');
    expect(kept.output).toContain(`back to revision ${good} (changes 1 key)?`);
    expect((await call(`${server.api}/${id}/cfg`, { token: SECRET })).text).toBe('new');
    const done = await inTerminal(['rollback', '--to', String(good)], [{ expect: 'Roll bucket', send: '\u001b[D\r' }], target);
    expect(done.exitCode, done.output).toBe(0);
    expect(done.output).toContain(`rolled back 1 key: revision ${now + 1}`);
    expect((await call(`${server.api}/${id}/cfg`, { token: SECRET })).text).toBe('old');
  });
});
