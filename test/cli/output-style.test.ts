import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inTerminal, kvb, kvbRunning, tempConfigHome } from '../helpers/cli.js';
import { call, createBucket } from '../helpers/http.js';
import { type RunningServer, startServer } from '../helpers/server.js';

/**
 * One table style and one value rendering for people, whatever the command: plain columns under a
 * lower-case heading (no boxes, no rules), bytes as `<N bytes>`, int64 as a number, JSON as
 * stored, expiry relative ("in 59m"). Pipes get JSON or JSONL instead.
 */

let server: RunningServer;
let bucket: string;
const SECRET = 'style-secret';
const BINARY = Buffer.alloc(3000, 0xff);
let env: Record<string, string>;
let lastRevision = 0;

const lines = (output: string) =>
  output
    .split('\r\n')
    .map((l) => l.slice(l.lastIndexOf('\r') + 1))
    .filter((l) => l !== '');

beforeAll(async () => {
  server = await startServer();
  bucket = await createBucket(server.api, { secret_key: SECRET, default_ttl: '0' });
  env = { KVB_URL: server.url, KVB_BUCKET: bucket, KVB_TOKEN: SECRET, XDG_CONFIG_HOME: tempConfigHome() };
  const put = async (key: string, body: string | Buffer, query = '', contentType?: string) => {
    const answer = await call(`${server.api}/${bucket}/${key}${query}`, {
      method: 'PUT',
      body,
      token: SECRET,
      ...(contentType && { headers: { 'content-type': contentType } }),
    });
    expect(answer.status).toBe(200);
    lastRevision = Number(answer.headers.get('kvb-revision'));
  };
  await put('w/bin', BINARY, '', 'application/octet-stream');
  // Bytes, not strings: fetch would label a string text/plain, and these must be typed by the server's inference.
  await put('w/n', Buffer.from('6'), '?ttl=3600');
  await put('w/big', Buffer.from('99999999999999999999'));
  await put('max', Buffer.from('9223372036854775807'));
});
afterAll(async () => {
  await server?.stop();
});

describe('at a terminal: plain columns, one value rendering', () => {
  it('ls draws no box: a heading and one line per key', async () => {
    const result = await inTerminal(['ls'], [], env);
    expect(result.exitCode, result.output).toBe(0);
    expect(result.output).not.toMatch(/[─│┌└]/);
    expect(lines(result.output)).toEqual(['key', 'max', 'w/big', 'w/bin', 'w/n']);
  });

  it('history is plain lower-case columns: bytes as <N bytes>, int64 as a number, JSON as stored, expiry relative, who made it', async () => {
    const results = await Promise.all(
      ['w/bin', 'w/n', 'w/big'].map((key) => inTerminal(['history', key, '--values'], [], { ...env, PTY_COLUMNS: '200' })),
    );
    for (const result of results) {
      expect(result.exitCode, result.output).toBe(0);
      expect(result.output).not.toMatch(/[─│┌└]/);
      expect(lines(result.output)[0]).toMatch(/^rev\s+operation\s+time\s+type\s+size\s+expires\s+actor\s+value$/);
    }
    expect(lines(results[0]!.output)[1]).toMatch(/\sset\s+\S+\s+bytes\s+3000\s+-\s+secret@127\.0\.0\.1\s+<3000 bytes>$/);
    expect(lines(results[1]!.output)[1]).toMatch(/\sset\s+\S+\s+int64\s+1\s+in (59|60)m\s+secret@127\.0\.0\.1\s+6$/);
    expect(lines(results[2]!.output)[1]).toMatch(/\sjson\s+20\s+-\s+secret@127\.0\.0\.1\s+99999999999999999999$/);
  });

  it('an empty rollback --dry-run says there is nothing to change', async () => {
    const result = await inTerminal(['rollback', '--to', String(lastRevision), '--dry-run'], [], env);
    expect(result.exitCode, result.output).toBe(0);
    expect(result.output).toContain(`nothing to change: already as at revision ${lastRevision}`);
    expect(result.output).not.toMatch(/[─│┌└]/);
  });
});

describe('in a pipe: JSON exact', () => {
  it('history --values is JSONL with int64 as a decimal string and JSON numbers as stored', async () => {
    const [max, big] = await Promise.all([kvb(['history', 'max', '--values'], { env }), kvb(['history', 'w/big', '--values'], { env })]);
    expect(max.exitCode, max.stderr).toBe(0);
    expect((JSON.parse(max.out) as { value: unknown }).value).toBe('9223372036854775807');
    expect(big.out).toMatch(/,"value":99999999999999999999\}\n$/);
  });
});

describe('kvb watch --values renders values as ls does', () => {
  it('text format: a 3,000-byte value is <3000 bytes>, int64 6 is 6 (not "6"), expiry relative', { timeout: 30_000 }, async () => {
    const watch = kvbRunning(['watch', 'w/', '--since', '0', '--values', '--format', 'text'], { env });
    try {
      await expect.poll(() => watch.out().split('\n').filter(Boolean).length, { timeout: 20_000 }).toBe(3);
      const [bin, n, big] = watch.out().split('\n');
      expect(bin).toMatch(/^\s*\d+\s+set\s+w\/bin = <3000 bytes>$/);
      expect(n).toMatch(/^\s*\d+\s+set\s+w\/n = 6 {2}\(expires in (59|60)m\)$/);
      expect(big).toMatch(/^\s*\d+\s+set\s+w\/big = 99999999999999999999$/);
    } finally {
      await watch.stop();
    }
  });

  it('in a pipe, JSONL with int64 as a decimal string and bytes as base64', { timeout: 30_000 }, async () => {
    const watch = kvbRunning(['watch', 'w/', '--since', '0', '--values'], { env });
    try {
      await expect.poll(() => watch.events().length, { timeout: 20_000 }).toBe(3);
      const events = watch.events();
      expect(events.map((e) => [e.key, e.value])).toEqual([
        ['w/bin', BINARY.toString('base64')],
        ['w/n', '6'],
        ['w/big', 1e20],
      ]);
      expect(watch.out()).toContain('"value":99999999999999999999}');
    } finally {
      await watch.stop();
    }
  });
});

describe('the CLI no longer carries a table library', () => {
  it('cli-table3 is no longer a dependency, and nothing in src/ imports it', async () => {
    const { readFileSync } = await import('node:fs');
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    expect(Object.keys(pkg.dependencies)).not.toContain('cli-table3');
    expect(readFileSync(new URL('../../src/cli/output.ts', import.meta.url), 'utf8')).not.toContain('cli-table3');
  });
});
