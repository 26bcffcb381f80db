import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_URL, resolveConnection } from '../../src/cli/config.js';
import { type FakeServer, deadUrl, fakeServer, kvb, tempConfigHome } from '../helpers/cli.js';
import { call, createBucket } from '../helpers/http.js';
import { type RunningServer, startServer } from '../helpers/server.js';

let server: RunningServer;
let dead: string;
/** Three public buckets whose key `who` names them, to see which one a command reached. */
const buckets: Record<'profile' | 'env' | 'flag', string> = { profile: '', env: '', flag: '' };

function writeProfiles(home: string, profiles: Record<string, unknown>): void {
  mkdirSync(join(home, 'kvb'), { recursive: true });
  writeFileSync(join(home, 'kvb', 'config.json'), JSON.stringify({ profiles }));
}

beforeAll(async () => {
  server = await startServer();
  dead = await deadUrl();
  for (const name of ['profile', 'env', 'flag'] as const) {
    buckets[name] = await createBucket(server.api, { secret_key: `secret-${name}` });
    await call(`${server.api}/${buckets[name]}/who`, { method: 'POST', body: name, headers: { 'content-type': 'text/plain' } });
  }
});
afterAll(async () => {
  await server?.stop();
});

describe('configuration precedence: flag > env > profile > default', () => {
  it('the bucket: flag beats env beats profile', async () => {
    const home = tempConfigHome();
    writeProfiles(home, { default: { url: server.url, bucket: buckets.profile } });
    const [fromProfile, fromEnv, fromFlag] = await Promise.all([
      kvb(['get', 'who'], { configHome: home }),
      kvb(['get', 'who'], { configHome: home, env: { KVB_BUCKET: buckets.env } }),
      kvb(['--bucket', buckets.flag, 'get', 'who'], { configHome: home, env: { KVB_BUCKET: buckets.env } }),
    ]);
    expect([fromProfile.out, fromEnv.out, fromFlag.out]).toEqual(['profile', 'env', 'flag']);
  });

  it('the URL: flag beats env beats profile (the loser points at a dead port)', async () => {
    const home = tempConfigHome();
    writeProfiles(home, { default: { url: dead, bucket: buckets.profile } });
    const [profileOnly, envWins, flagWins] = await Promise.all([
      kvb(['get', 'who'], { configHome: home }),
      kvb(['get', 'who'], { configHome: home, env: { KVB_URL: server.url } }),
      kvb(['get', 'who', '--url', server.url], { configHome: home, env: { KVB_URL: dead } }),
    ]);
    expect(profileOnly.exitCode).toBe(4);
    expect(profileOnly.stderr).toContain(dead);
    expect(envWins.out).toBe('profile');
    expect(flagWins.out).toBe('profile');
  });

  it('the credential: flag beats env beats the profile secret key', async () => {
    const home = tempConfigHome();
    writeProfiles(home, { default: { url: server.url, bucket: buckets.profile, secret_key: 'secret-profile' } });
    const [profile, wrongEnv, flag] = await Promise.all([
      kvb(['bucket', 'exists'], { configHome: home }),
      kvb(['bucket', 'show'], { configHome: home, env: { KVB_TOKEN: 'wrong' } }),
      kvb(['--token', 'secret-profile', 'bucket', 'exists'], { configHome: home, env: { KVB_TOKEN: 'wrong' } }),
    ]);
    expect(profile.exitCode).toBe(0);
    expect(wrongEnv.exitCode).toBe(3);
    expect(flag.exitCode).toBe(0);
  });

  it('the profile: --profile beats KVB_PROFILE beats "default"; an unknown named profile is exit 1', async () => {
    const home = tempConfigHome();
    writeProfiles(home, {
      default: { url: server.url, bucket: buckets.profile },
      e: { url: server.url, bucket: buckets.env },
      f: { url: server.url, bucket: buckets.flag },
    });
    const [byDefault, byEnv, byFlag, unknown] = await Promise.all([
      kvb(['get', 'who'], { configHome: home }),
      kvb(['get', 'who'], { configHome: home, env: { KVB_PROFILE: 'e' } }),
      kvb(['--profile', 'f', 'get', 'who'], { configHome: home, env: { KVB_PROFILE: 'e' } }),
      kvb(['--profile', 'nope', 'get', 'who'], { configHome: home }),
    ]);
    expect([byDefault.out, byEnv.out, byFlag.out]).toEqual(['profile', 'env', 'flag']);
    expect(unknown.exitCode).toBe(1);
    expect(unknown.stderr).toMatch(/^kvb: no profile "nope" in .*config\.json/);
  });

  it('the default URL is http://127.0.0.1:8080 when nothing else is set', () => {
    const home = tempConfigHome();
    const connection = resolveConnection({}, { XDG_CONFIG_HOME: home });
    expect(DEFAULT_URL).toBe('http://127.0.0.1:8080');
    expect(connection).toMatchObject({ url: DEFAULT_URL, bucket: undefined, token: undefined, sources: { url: 'default' } });
    expect(resolveConnection({}, { XDG_CONFIG_HOME: home, KVB_URL: 'http://x:1/' }).url).toBe('http://x:1');
  });

  it('no bucket anywhere is a usage error that says how to give one (exit 1)', async () => {
    const result = await kvb(['get', 'k'], { env: { KVB_URL: server.url } });
    expect(result.exitCode).toBe(1);
    expect(result.stderr).toBe(
      'kvb: no bucket given: pass --bucket ID, set KVB_BUCKET, or save a profile (kvb init, kvb create-bucket --save)\n',
    );
  });

  it('a config file that is not JSON is exit 1 naming the file', async () => {
    const home = tempConfigHome();
    mkdirSync(join(home, 'kvb'));
    writeFileSync(join(home, 'kvb', 'config.json'), '{oops');
    const result = await kvb(['get', 'k'], { configHome: home });
    expect(result.exitCode).toBe(1);
    expect(result.stderr).toContain(join(home, 'kvb', 'config.json'));
  });
});

describe('exit codes and failure messages', () => {
  let failing: FakeServer;
  beforeAll(async () => {
    failing = await fakeServer(500, 'internal_error');
  });
  afterAll(async () => {
    await failing?.close();
  });

  it('usage errors found by commander are one `kvb: …` line and exit 1, like every other failure', async () => {
    const results = await Promise.all([
      kvb(['frobnicate']),
      kvb(['sett', 'k', 'v']),
      kvb(['get', 'k', '--bogus']),
      kvb(['get']),
      kvb(['del', 'a', 'b']),
      kvb(['set', 'k', 'v', '--ttl', 'soon']),
      kvb(['set', 'k', 'v', '--type', 'date']),
      kvb(['completion', 'tcsh']),
    ]);
    for (const result of results) {
      expect(result.exitCode, result.stderr).toBe(1);
      expect(result.stderr).toMatch(/^kvb: [^\n]+\n$/);
      expect(result.stderr).not.toContain('error:');
      expect(result.out).toBe('');
    }
    expect(results[1]!.stderr).toBe("kvb: unknown command 'sett' (Did you mean set?)\n");
    expect(results[4]!.stderr).toBe("kvb: too many arguments for 'del'. Expected 1 argument but got 2.\n");
    expect(results[5]!.stderr).toBe(
      "kvb: option '--ttl <seconds>' argument 'soon' is invalid. --ttl must be an integer from 0 to 2147483647\n",
    );
  });

  it('an empty key is refused in words, before any request (exit 1)', async () => {
    failing.requests.length = 0;
    const results = await Promise.all(
      [
        ['get', ''],
        ['del', ''],
        ['set', '', 'v'],
        ['incr', ''],
      ].map((args) => kvb([...args, '--bucket', 'b', '--url', failing.url])),
    );
    for (const result of results) expect(result).toMatchObject({ exitCode: 1, stderr: 'kvb: a key must not be empty\n' });
    expect(failing.requests).toHaveLength(0);
  });

  it('a server URL ending in /api/v1 (a common mistake) is explained, naming where it came from (exit 1)', async () => {
    failing.requests.length = 0;
    const [flag, env] = await Promise.all([
      kvb(['get', 'k', '--bucket', 'b', '--url', `${failing.url}/api/v1`]),
      kvb(['get', 'k', '--bucket', 'b'], { env: { KVB_URL: `${failing.url}/api/v1/` } }),
    ]);
    expect(flag).toMatchObject({
      exitCode: 1,
      stderr: `kvb: the server URL is its address without /api/v1: use "${failing.url}", not "${failing.url}/api/v1" (from --url)\n`,
    });
    expect(env.exitCode).toBe(1);
    expect(env.stderr).toContain('(from KVB_URL)');
    expect(failing.requests).toHaveLength(0);
  });

  it('--help and --version exit 0; --help documents the exit codes', async () => {
    const [help, getHelp, version] = await Promise.all([kvb(['--help']), kvb(['get', '--help']), kvb(['--version'])]);
    expect(help.exitCode).toBe(0);
    expect(help.out).toContain('4  server or network unreachable');
    expect(getHelp.out).toContain('Examples:');
    expect(getHelp.out).toContain('2  key or bucket not found');
    expect(version.out).toMatch(/^\d+\.\d+\.\d+\n$/);
  });

  it('an unreachable server is exit 4, naming the URL tried and how to point elsewhere', async () => {
    const result = await kvb(['get', 'k', '--bucket', 'b'], { env: { KVB_URL: dead } });
    expect(result.exitCode).toBe(4);
    expect(result.stderr).toBe(
      `kvb: cannot reach ${dead} (connection refused); the URL came from KVB_URL: point elsewhere with --url, KVB_URL or a profile\n`,
    );
  });

  it('a server error (500 in the envelope) is exit 5, one line, no stack trace', async () => {
    const result = await kvb(['get', 'k', '--bucket', 'b', '--url', failing.url]);
    expect(result.exitCode).toBe(5);
    expect(result.stderr).toBe('kvb: internal_error (500): key "k" in bucket b: simulated failure\n');
  });

  it('credentials go in Authorization: Bearer, never in the URL', async () => {
    failing.requests.length = 0;
    await kvb(['get', 'some/key', '--bucket', 'b', '--url', failing.url, '--token', 'tok-123']);
    expect(failing.requests).toHaveLength(1);
    expect(failing.requests[0]!.headers.authorization).toBe('Bearer tok-123');
    expect(failing.requests[0]!.url).toBe('/api/v1/b/some%2Fkey');
  });

  it('a URL with a path prefix keeps it', async () => {
    failing.requests.length = 0;
    await kvb(['del', 'k', '--bucket', 'b', '--url', `${failing.url}/kv/`]);
    expect(failing.requests[0]).toMatchObject({ method: 'DELETE', url: '/kv/api/v1/b/k' });
  });

  it('--quiet silences messages but not failures', async () => {
    const env = { KVB_URL: server.url, KVB_BUCKET: buckets.flag, KVB_TOKEN: 'secret-flag' };
    const [quiet, loud, failed] = await Promise.all([
      kvb(['--quiet', 'txn', '--set', 'q=1'], { env }),
      kvb(['txn', '--set', 'q=1'], { env }),
      kvb(['-q', 'get', 'missing'], { env }),
    ]);
    expect(quiet).toMatchObject({ exitCode: 0, stderr: '' });
    expect(loud.stderr).toBe('committed\n');
    expect(failed.exitCode).toBe(2);
    expect(failed.stderr).toMatch(/^kvb: not_found/);
  });

  it('--timeout (or KVB_TIMEOUT) gives up on a server that never answers: exit 4 naming the URL and the timeout', async () => {
    const silent = createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(silent.address() as { port: number }).port}`;
    try {
      const [flag, env, bad] = await Promise.all([
        kvb(['get', 'k', '--bucket', 'b', '--url', url, '--timeout', '0.5']),
        kvb(['get', 'k', '--bucket', 'b', '--url', url], { env: { KVB_TIMEOUT: '0.5' } }),
        kvb(['get', 'k', '--bucket', 'b', '--url', url], { env: { KVB_TIMEOUT: 'soon' } }),
      ]);
      for (const result of [flag, env]) {
        expect(result.exitCode).toBe(4);
        expect(result.stderr).toMatch(
          new RegExp(
            `^kvb: cannot reach ${url} \\(timed out waiting for the response\\) after 0.5 s \\(--timeout or KVB_TIMEOUT allows longer\\)`,
          ),
        );
        expect(result.stderr.split('\n')).toHaveLength(2);
      }
      expect(bad.exitCode).toBe(1);
      expect(bad.stderr).toBe('kvb: KVB_TIMEOUT must be a number of seconds above 0, at most 86400, not "soon"\n');
    } finally {
      silent.closeAllConnections();
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  it('a body that stops mid-way is a timeout, a connection the server drops is named so: exit 4 either way', async () => {
    // Headers and half the promised body, then nothing; or the connection closed without an answer.
    const stalling = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': '10', 'kvb-type': 'binary' });
      res.write('12345');
    });
    const dropping = createServer((req) => req.socket.destroy());
    const urls: string[] = [];
    for (const s of [stalling, dropping]) {
      await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
      urls.push(`http://127.0.0.1:${(s.address() as { port: number }).port}`);
    }
    try {
      const [stalled, dropped] = await Promise.all([
        kvb(['get', 'k', '--bucket', 'b', '--url', urls[0]!, '--timeout', '0.5']),
        kvb(['get', 'k', '--bucket', 'b', '--url', urls[1]!]),
      ]);
      expect(stalled.exitCode).toBe(4);
      expect(stalled.stdout.length).toBe(0);
      expect(stalled.stderr).toMatch(new RegExp(`^kvb: cannot reach ${urls[0]} \\(timed out reading the response\\) after 0.5 s`));
      expect(dropped.exitCode).toBe(4);
      expect(dropped.stderr).toMatch(new RegExp(`^kvb: cannot reach ${urls[1]} \\(connection closed by the server\\);`));
    } finally {
      for (const s of [stalling, dropping]) {
        s.closeAllConnections();
        await new Promise((resolve) => s.close(resolve));
      }
    }
  });

  it('colour is never used when stderr is not a terminal', async () => {
    const result = await kvb(['get', 'k', '--bucket', 'b', '--url', failing.url]);
    expect(result.stderr).not.toContain('\u001b[');
  });
});
