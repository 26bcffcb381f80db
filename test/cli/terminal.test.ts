import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inTerminal, kvb } from '../helpers/cli.js';
import { call, createBucket } from '../helpers/http.js';
import { type RunningServer, startServer } from '../helpers/server.js';

/** What kvb does differently when a person is at a terminal. */

let server: RunningServer;
let bucket: string;
const SECRET = 'tty-secret';
const env = () => ({ KVB_URL: server.url, KVB_BUCKET: bucket, KVB_TOKEN: SECRET, XDG_CONFIG_HOME: server.dataDir });

beforeAll(async () => {
  server = await startServer();
  bucket = await createBucket(server.api, { secret_key: SECRET });
  await kvb(['txn', '--set', 'greeting=hello', '--set', 'n=42'], { env: env() });
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

  it('ls prints a table', async () => {
    const result = await inTerminal(['ls', '--values'], [], env());
    expect(result.exitCode).toBe(0);
    expect(result.output).toMatch(/┌─+┬─+┐/);
    expect(result.output).toMatch(/│ greeting\s+│ hello\s+│/);
    expect(result.output).toMatch(/│ n\s+│ 42\s+│/);
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
});
