import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KEYS, type TerminalStep, inTerminal, kvb, tempConfigHome } from '../helpers/cli.js';
import { call } from '../helpers/http.js';
import { type RunningServer, startServer } from '../helpers/server.js';

const { down: DOWN, up: UP, backspace: BACKSPACE, ctrlC: CTRL_C } = KEYS;
const wizard = (steps: TerminalStep[], env: Record<string, string>, onSent?: (step: number) => void) =>
  inTerminal(['init'], steps, env, onSent);

let server: RunningServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server?.stop();
});

describe('kvb init', () => {
  it('asks, checks /health, creates the bucket with generated keys shown once, and saves a 0600 profile', async () => {
    const home = tempConfigHome();
    const result = await wizard(
      [
        { expect: 'Server URL', send: '\r' },
        { expect: 'Admin email', send: 'me@example.com\r' },
        // secret, read and write keys are preselected (a private bucket); select the signing key too.
        { expect: 'Credentials to set', send: `${DOWN}${DOWN}${DOWN} \r` },
        { expect: 'Secret key', send: '\r' },
        { expect: 'Read key', send: '\r' },
        { expect: 'Write key', send: '\r' },
        { expect: 'Signing key', send: '\r' },
        { expect: 'Default TTL', send: `${BACKSPACE.repeat(6)}3600\r` },
        { expect: 'Save as profile', send: `${BACKSPACE.repeat(7)}wizard\r` },
      ],
      { KVB_URL: server.url, XDG_CONFIG_HOME: home },
    );
    expect(result.timedOut, result.output).toBeNull();
    expect(result.exitCode, result.output).toBe(0);
    expect(result.output).toContain('Server is up');

    const file = join(home, 'kvb', 'config.json');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const profile = (
      JSON.parse(readFileSync(file, 'utf8')) as { profiles: Record<string, { url: string; bucket: string; secret_key: string }> }
    ).profiles.wizard!;
    expect(profile.url).toBe(server.url);
    expect(profile.secret_key).toMatch(/^[A-Za-z0-9_][A-Za-z0-9_-]{42}$/);
    // The generated keys are shown once, in the wizard's output.
    expect(result.output).toContain(`secret_key: ${profile.secret_key}`);
    expect(result.output).toMatch(/signing_key: [A-Za-z0-9_-]{43}/);

    const policy = (await call(`${server.api}/${profile.bucket}`, { token: profile.secret_key })).json();
    expect(policy).toMatchObject({
      has_secret_key: true,
      has_signing_key: true,
      has_read_key: true,
      has_write_key: true,
      default_ttl: 3600,
    });
    expect(result.output).toContain('Private bucket: every request needs one of its keys.');
    expect(result.output).not.toContain('ANONYMOUS ACCESS');
    // The profile works on its own.
    expect((await kvb(['--profile', 'wizard', 'bucket', 'exists'], { configHome: home })).exitCode).toBe(0);
  });

  it('a short key of your own is warned about and a generated one offered; "No" to replacing a profile asks for another name', async () => {
    const home = tempConfigHome();
    const taken = { url: 'http://elsewhere:1', bucket: 'OLD', secret_key: 'old-secret-key-kept' };
    mkdirSync(join(home, 'kvb'), { recursive: true });
    writeFileSync(join(home, 'kvb', 'config.json'), JSON.stringify({ profiles: { taken } }));
    const result = await wizard(
      [
        { expect: 'Server URL', send: '\r' },
        { expect: 'Admin email', send: 'me@example.com\r' },
        { expect: 'Credentials to set', send: '\r' },
        { expect: 'generate a strong random key', send: `${DOWN}\r` },
        { expect: 'Enter the secret key', send: 'short\r' },
        { expect: 'use a generated strong key instead', send: '\r' },
        { expect: 'Read key', send: '\r' },
        { expect: 'Write key', send: '\r' },
        { expect: 'Default TTL', send: '\r' },
        { expect: 'Save as profile', send: `${BACKSPACE.repeat(7)}taken\r` },
        { expect: 'exists. Replace it?', send: '\r' },
        { expect: 'Save as profile (another name)', send: 'fresh\r' },
      ],
      { KVB_URL: server.url, XDG_CONFIG_HOME: home },
    );
    expect(result.timedOut, result.output).toBeNull();
    expect(result.exitCode, result.output).toBe(0);
    expect(result.output).toContain('That secret key is 5 characters');
    const profiles = (
      JSON.parse(readFileSync(join(home, 'kvb', 'config.json'), 'utf8')) as {
        profiles: Record<string, { secret_key: string; bucket: string }>;
      }
    ).profiles;
    expect(profiles.taken).toEqual(taken);
    expect(profiles.fresh!.secret_key).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(result.output).toContain(`secret_key: ${profiles.fresh!.secret_key}`);
    expect((await call(`${server.api}/${profiles.fresh!.bucket}`, { token: profiles.fresh!.secret_key })).status).toBe(200);
  });

  it('a choice that leaves anonymous access says so loudly and must be confirmed; No asks again', async () => {
    const home = tempConfigHome();
    const result = await wizard(
      [
        { expect: 'Server URL', send: '\r' },
        { expect: 'Admin email', send: 'me@example.com\r' },
        // Untick the write key (third row): anyone could write.
        { expect: 'Credentials to set', send: `${DOWN}${DOWN} \r` },
        { expect: 'open to anonymous callers like this?', send: '\r' }, // default No: asked again
        // Asked again with the cursor on the write key, not the first row: untick the read key
        // too (one row up), and accept this time.
        { expect: 'Credentials to set', send: `${UP} \r` },
        { expect: 'open to anonymous callers like this?', send: 'y\r' },
        { expect: 'Secret key', send: '\r' },
        { expect: 'Default TTL', send: '\r' },
        { expect: 'Save as profile', send: '\r' },
      ],
      { KVB_URL: server.url, XDG_CONFIG_HOME: home },
    );
    expect(result.timedOut, result.output).toBeNull();
    expect(result.exitCode, result.output).toBe(0);
    expect(result.output).toContain(`ANONYMOUS ACCESS: anyone who can reach ${server.url} will be able to write and delete every key.`);
    expect(result.output).toContain('will be able to read and list every key; write and delete every key.');
    expect(result.output).toMatch(
      /ANONYMOUS ACCESS to bucket [0-9a-f-]{36}: anyone who can reach the server can read and list every key; write and delete every key\./,
    );
    const profile = (
      JSON.parse(readFileSync(join(home, 'kvb', 'config.json'), 'utf8')) as {
        profiles: Record<string, { bucket: string; secret_key: string }>;
      }
    ).profiles.default!;
    const policy = (await call(`${server.api}/${profile.bucket}`, { token: profile.secret_key })).json();
    expect(policy).toMatchObject({ has_secret_key: true, has_read_key: false, has_write_key: false });
  });

  it('asked again after "No", the checklist keeps its cursor on the key that was left out, not its first row', async () => {
    const home = tempConfigHome();
    const result = await wizard(
      [
        { expect: 'Server URL', send: '\r' },
        { expect: 'Admin email', send: 'me@example.com\r' },
        { expect: 'Credentials to set', send: `${DOWN}${DOWN} \r` },
        { expect: 'open to anonymous callers like this?', send: '\r' },
        // Space where the cursor is: on the write key it ticks it back (a private bucket, no
        // question); on the first row it would untick the secret key and ask again.
        { expect: 'Credentials to set', send: ' \r' },
        { expect: 'Secret key', send: '\r' },
        { expect: 'Read key', send: '\r' },
        { expect: 'Write key', send: '\r' },
        { expect: 'Default TTL', send: '\r' },
        { expect: 'Save as profile', send: '\r' },
      ],
      { KVB_URL: server.url, XDG_CONFIG_HOME: home },
    );
    expect(result.timedOut, result.output).toBeNull();
    expect(result.exitCode, result.output).toBe(0);
    expect(result.output).toContain('Private bucket: every request needs one of its keys.');
    const profile = (
      JSON.parse(readFileSync(join(home, 'kvb', 'config.json'), 'utf8')) as {
        profiles: Record<string, { bucket: string; secret_key: string }>;
      }
    ).profiles.default!;
    const policy = (await call(`${server.api}/${profile.bucket}`, { token: profile.secret_key })).json();
    expect(policy).toMatchObject({ has_secret_key: true, has_read_key: true, has_write_key: true });
  });

  it('Ctrl-C at a question leaves nothing behind: no profile file, exit 1', async () => {
    const home = tempConfigHome();
    const result = await wizard(
      [
        { expect: 'Server URL', send: '\r' },
        { expect: 'Admin email', send: CTRL_C },
      ],
      { KVB_URL: server.url, XDG_CONFIG_HOME: home },
    );
    expect(result.timedOut, result.output).toBeNull();
    expect(result.exitCode).toBe(1);
    expect(result.output).toContain('Cancelled: nothing was created or saved.');
    expect(existsSync(join(home, 'kvb'))).toBe(false);
  });

  it('an unreachable URL is reported and asked again', async () => {
    const home = tempConfigHome();
    const result = await wizard(
      [
        { expect: 'Server URL', send: `${BACKSPACE.repeat(40)}http://127.0.0.1:9\r` },
        { expect: 'No kvb server answered', send: CTRL_C },
      ],
      { KVB_URL: server.url, XDG_CONFIG_HOME: home },
    );
    expect(result.timedOut, result.output).toBeNull();
    expect(result.output).toContain('cannot reach http://127.0.0.1:9');
    expect(result.exitCode).toBe(1);
  });

  it('Ctrl-C while the bucket is being created finishes the bucket and its profile: nothing half-written', async () => {
    // A front for the real server that holds bucket creation until Ctrl-C is in the terminal, so
    // the interruption lands mid-request however slowly the machine runs.
    let interrupt!: () => void;
    const interrupted = new Promise<void>((resolve) => (interrupt = resolve));
    const slow = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', async () => {
        if (req.method === 'POST' && req.url === '/api/v1/') await interrupted;
        const answer = await fetch(`${server.url}${req.url}`, {
          method: req.method,
          headers: { 'content-type': req.headers['content-type'] ?? 'text/plain' },
          ...(req.method === 'GET' || req.method === 'HEAD' ? {} : { body: Buffer.concat(chunks) }),
        });
        res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'text/plain' });
        res.end(Buffer.from(await answer.arrayBuffer()));
      });
    });
    await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
    const slowUrl = `http://127.0.0.1:${(slow.address() as AddressInfo).port}`;
    try {
      const home = tempConfigHome();
      const result = await wizard(
        [
          { expect: 'Server URL', send: '\r' },
          { expect: 'Admin email', send: 'me@example.com\r' },
          { expect: 'Credentials to set', send: '\r' },
          { expect: 'Secret key', send: '\r' },
          { expect: 'Read key', send: '\r' },
          { expect: 'Write key', send: '\r' },
          { expect: 'Default TTL', send: '\r' },
          { expect: 'Save as profile', send: '\r' },
          { expect: 'Creating the bucket', send: CTRL_C },
        ],
        { KVB_URL: slowUrl, XDG_CONFIG_HOME: home },
        (step) => step === 8 && interrupt(),
      );
      expect(result.timedOut, result.output).toBeNull();
      expect(result.output).toMatch(/Bucket [0-9a-f-]{36} was created and its profile saved despite the interruption/);
      expect(result.exitCode, result.output).toBe(0);
      const profile = (
        JSON.parse(readFileSync(join(home, 'kvb', 'config.json'), 'utf8')) as {
          profiles: Record<string, { bucket: string; secret_key: string }>;
        }
      ).profiles.default!;
      expect(result.output).toContain(`secret_key: ${profile.secret_key}`);
      expect((await call(`${server.api}/${profile.bucket}`, { token: profile.secret_key })).status).toBe(200);
    } finally {
      slow.close();
    }
  });

  it('refuses when stdin is not a terminal, pointing to create-bucket (exit 1)', async () => {
    const home = tempConfigHome();
    const result = await kvb(['init'], { configHome: home, env: { KVB_URL: server.url }, input: '' });
    expect(result.exitCode).toBe(1);
    expect(result.out).toBe('');
    expect(result.stderr).toMatch(/^kvb: kvb init is interactive and stdin is not a terminal; in scripts use: kvb create-bucket/);
    expect(existsSync(join(home, 'kvb'))).toBe(false);
  });
});
