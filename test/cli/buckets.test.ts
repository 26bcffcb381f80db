import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeJwt } from 'jose';
import { type CliOptions, inTerminal, kvb, tempConfigHome } from '../helpers/cli.js';
import { call, createBucket } from '../helpers/http.js';
import { type RunningServer, startServer } from '../helpers/server.js';

let server: RunningServer;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\n$/;

const policyOf = async (bucket: string, secret: string) =>
  (await call(`${server.api}/${bucket}`, { token: secret })).json() as Record<string, unknown>;

/** kvb pointed at this file's server; bucket and token as given. */
const on = (bucket: string, token: string | undefined, args: string[], options: CliOptions = {}) =>
  kvb(args, { ...options, env: { KVB_URL: server.url, KVB_BUCKET: bucket, KVB_TOKEN: token, ...options.env } });

beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server?.stop();
});

describe('kvb create-bucket', () => {
  it('prints the bucket id alone on stdout, and the bucket has the keys given', async () => {
    const result = await kvb(
      ['create-bucket', '--email', 'me@example.com', '--secret-key', 'S1', '--read-key', 'R1', '--write-key', 'W1', '--default-ttl', '0'],
      { env: { KVB_URL: server.url } },
    );
    expect(result.exitCode).toBe(0);
    expect(result.out).toMatch(UUID);
    // Private: nothing to warn about.
    expect(result.stderr).toBe('');
    const policy = await policyOf(result.out.trim(), 'S1');
    expect(policy).toMatchObject({ has_secret_key: true, has_read_key: true, has_write_key: true, default_ttl: 0 });
  });

  it('a bucket left open to anonymous callers is warned about in capitals on stderr, as kvb init does; stdout stays the id alone', async () => {
    const secretOnly = await kvb(['create-bucket', '--email', 'me@example.com', '--secret-key', 'S0'], { env: { KVB_URL: server.url } });
    expect(secretOnly.exitCode).toBe(0);
    const id = secretOnly.out.trim();
    expect(secretOnly.out).toBe(`${id}\n`);
    expect(secretOnly.stderr).toBe(
      `kvb: ANONYMOUS ACCESS to bucket ${id}: anyone who can reach the server can read and list every key; write and delete every key.\n`,
    );
    expect(await policyOf(id, 'S0')).toMatchObject({ anonymous_access: { read: true, write: true } });
    const readOnlyOpen = await kvb(['create-bucket', '--email', 'me@example.com', '--secret-key', 'S0', '--write-key', 'W0'], {
      env: { KVB_URL: server.url },
    });
    expect(readOnlyOpen.stderr).toMatch(/ANONYMOUS ACCESS to bucket \S+: anyone who can reach the server can read and list every key\.\n$/);
    // --quiet is asked for: silent.
    expect((await kvb(['--quiet', 'create-bucket', '--email', 'me@example.com'], { env: { KVB_URL: server.url } })).stderr).toBe('');
  });

  it('--save writes url, bucket and secret key to a 0600 profile that later commands use alone', async () => {
    const home = tempConfigHome();
    const created = await kvb(['create-bucket', '--email', 'me@example.com', '--secret-key', 'S2', '--save'], {
      configHome: home,
      env: { KVB_URL: server.url },
    });
    expect(created.exitCode).toBe(0);
    expect(created.stderr).toContain('saved profile "default"\n');
    const id = created.out.trim();
    const file = join(home, 'kvb', 'config.json');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({ profiles: { default: { url: server.url, bucket: id, secret_key: 'S2' } } });
    // No env at all: url, bucket and credential all come from the profile.
    expect((await kvb(['set', 'k', 'from-profile'], { configHome: home })).exitCode).toBe(0);
    expect((await kvb(['get', 'k'], { configHome: home })).out).toBe('from-profile');
    expect((await kvb(['bucket', 'exists'], { configHome: home })).exitCode).toBe(0);
  });

  it('--save NAME adds a named profile next to the others, chosen with --profile', async () => {
    const home = tempConfigHome();
    const first = await kvb(['create-bucket', '--email', 'a@example.com', '--save'], { configHome: home, env: { KVB_URL: server.url } });
    const second = await kvb(['create-bucket', '--email', 'b@example.com', '--secret-key', 'S3', '--save', 'work'], {
      configHome: home,
      env: { KVB_URL: server.url },
    });
    const profiles = (
      JSON.parse(readFileSync(join(home, 'kvb', 'config.json'), 'utf8')) as { profiles: Record<string, { bucket: string }> }
    ).profiles;
    expect(profiles.default!.bucket).toBe(first.out.trim());
    expect(profiles.work!.bucket).toBe(second.out.trim());
    expect((await kvb(['--profile', 'work', 'bucket', 'show', '--json'], { configHome: home })).exitCode).toBe(0);
  });

  it('a missing --email is a usage error (exit 1)', async () => {
    const result = await kvb(['create-bucket'], { env: { KVB_URL: server.url } });
    expect(result.exitCode).toBe(1);
    expect(result.stderr).toContain('--email');
  });
});

describe('kvb bucket', () => {
  let bucket: string;
  beforeAll(async () => {
    bucket = await createBucket(server.api, { secret_key: 'admin', signing_key: 'sig' });
  });

  it('show --json prints the policy projection exactly as the server sends it', async () => {
    const result = await on(bucket, 'admin', ['bucket', 'show', '--json']);
    expect(result.exitCode).toBe(0);
    expect(JSON.parse(result.out)).toEqual(await policyOf(bucket, 'admin'));
  });

  it('show prints plain name/value columns at a terminal (no box), and the policy JSON in a pipe', async () => {
    const result = await inTerminal(['bucket', 'show'], [], { KVB_URL: server.url, KVB_BUCKET: bucket, KVB_TOKEN: 'admin' });
    expect(result.exitCode, result.output).toBe(0);
    expect(result.output).toContain(bucket);
    expect(result.output).not.toMatch(/[─│┌└]/);
    expect(result.output).toMatch(/^secret key\s+yes\r$/m);
    expect(result.output).toMatch(/^anonymous access\s+read, write, enumerate, delete\r$/m);
    // What the bucket stores (the policy GET's Kvb-Usage-* headers); no quota on this server.
    expect(result.output).toMatch(/^keys stored\s+\d+\r$/m);
    expect(result.output).toMatch(/^bytes stored\s+[\d,]+ \(keys \+ values\)\r$/m);
    const piped = await on(bucket, 'admin', ['bucket', 'show']);
    expect(piped.exitCode).toBe(0);
    expect(JSON.parse(piped.out)).toEqual(await policyOf(bucket, 'admin'));
  });

  it('update sets and clears the read key; anonymous reads follow (exit 3 while it is set)', async () => {
    await on(bucket, 'admin', ['set', 'public', 'x']);
    expect((await on(bucket, 'admin', ['bucket', 'update', '--read-key', 'R'])).exitCode).toBe(0);
    expect(await policyOf(bucket, 'admin')).toMatchObject({ has_read_key: true });
    const anonymous = await on(bucket, undefined, ['get', 'public']);
    expect(anonymous.exitCode).toBe(3);
    expect(anonymous.stderr).toMatch(/^kvb: unauthorized \(401\): key "public"/);
    expect((await on(bucket, 'R', ['get', 'public'])).out).toBe('x');
    expect((await on(bucket, 'admin', ['bucket', 'update', '--clear-read-key', '--default-ttl', '60'])).exitCode).toBe(0);
    expect(await policyOf(bucket, 'admin')).toMatchObject({ has_read_key: false, default_ttl: 60 });
    expect((await on(bucket, undefined, ['get', 'public'])).exitCode).toBe(0);
  });

  it('update --rotate-signing-key generates a key, bumps the generation and invalidates earlier tokens', async () => {
    const token = (await on(bucket, 'admin', ['mint-token', '--prefix', 'p/', '--permissions', 'read', '--ttl', '60'])).out.trim();
    await on(bucket, 'admin', ['set', 'p/1', 'one']);
    expect((await on(bucket, token, ['get', 'p/1'])).exitCode).toBe(0);
    const before = (await policyOf(bucket, 'admin')).signing_key_generation as number;
    const rotated = await on(bucket, 'admin', ['bucket', 'update', '--rotate-signing-key']);
    expect(rotated.exitCode).toBe(0);
    expect(rotated.stderr).toContain('earlier tokens are no longer valid');
    expect(await policyOf(bucket, 'admin')).toMatchObject({ has_signing_key: true, signing_key_generation: before + 1 });
    expect((await on(bucket, token, ['get', 'p/1'])).exitCode).toBe(3);
  });

  it('update with nothing to change, or contradictory flags, is a usage error (exit 1)', async () => {
    const [nothing, both] = await Promise.all([
      on(bucket, 'admin', ['bucket', 'update']),
      on(bucket, 'admin', ['bucket', 'update', '--read-key', 'x', '--clear-read-key']),
    ]);
    expect(nothing.exitCode).toBe(1);
    expect(nothing.stderr).toContain('nothing to update');
    expect(both.exitCode).toBe(1);
  });

  it('update --secret-key keeps a profile that held the old secret key working', async () => {
    const home = tempConfigHome();
    const id = (
      await kvb(['create-bucket', '--email', 'a@example.com', '--secret-key', 'old', '--save'], {
        configHome: home,
        env: { KVB_URL: server.url },
      })
    ).out.trim();
    const result = await kvb(['bucket', 'update', '--secret-key', 'new'], { configHome: home });
    expect(result.exitCode).toBe(0);
    expect(JSON.parse(readFileSync(join(home, 'kvb', 'config.json'), 'utf8')).profiles.default.secret_key).toBe('new');
    expect(await policyOf(id, 'new')).toMatchObject({ has_secret_key: true });
    expect((await kvb(['bucket', 'show', '--json'], { configHome: home })).exitCode).toBe(0);
  });

  it('exists: 0 with the secret key, 2 with a wrong one or for an unknown bucket, printing nothing', async () => {
    const [ok, wrong, unknown] = await Promise.all([
      on(bucket, 'admin', ['bucket', 'exists']),
      on(bucket, 'nope', ['bucket', 'exists']),
      on('00000000-0000-4000-8000-000000000000', 'admin', ['bucket', 'exists']),
    ]);
    expect(ok).toMatchObject({ exitCode: 0, out: '', stderr: '' });
    expect(wrong).toMatchObject({ exitCode: 2, out: '' });
    expect(unknown).toMatchObject({ exitCode: 2, out: '' });
  });

  it('delete refuses without --yes when it cannot ask (exit 1), deletes with --yes', async () => {
    const doomed = await createBucket(server.api, { secret_key: 'd' });
    const refused = await on(doomed, 'd', ['bucket', 'delete']);
    expect(refused.exitCode).toBe(1);
    expect(refused.stderr).toContain('--yes');
    expect((await on(doomed, 'd', ['bucket', 'exists'])).exitCode).toBe(0);
    const deleted = await on(doomed, 'd', ['bucket', 'delete', '--yes']);
    expect(deleted.exitCode).toBe(0);
    expect(deleted.stderr).toBe(`deleted bucket ${doomed}\n`);
    expect((await on(doomed, 'd', ['bucket', 'exists'])).exitCode).toBe(2);
    expect((await on(doomed, 'd', ['bucket', 'show'])).exitCode).toBe(2);
  });
});

describe('kvb mint-token', () => {
  let bucket: string;
  beforeAll(async () => {
    bucket = await createBucket(server.api, { secret_key: 'admin', signing_key: 'sig', read_key: 'r', write_key: 'w' });
  });

  it('prints the token alone; it works inside its prefix and is refused outside (exit 3)', async () => {
    const minted = await on(bucket, 'admin', ['mint-token', '--prefix', 'user/42/', '--permissions', 'read,write', '--ttl', '600']);
    expect(minted.exitCode).toBe(0);
    expect(minted.out).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+\n$/);
    const token = minted.out.trim();
    // Its id, for people, on stderr: the one history records for the token's changes.
    expect(minted.stderr).toContain(`token id ${String(decodeJwt(token).jti)} `);
    expect((await on(bucket, token, ['set', 'user/42/name', 'Ada'])).exitCode).toBe(0);
    expect((await on(bucket, token, ['get', 'user/42/name'])).out).toBe('Ada');
    const outside = await on(bucket, token, ['set', 'user/43/name', 'Bob']);
    expect(outside.exitCode).toBe(3);
    expect(outside.stderr).toMatch(/^kvb: forbidden \(403\)/);
  });

  it('--json prints the whole response: the token and its id (which history records for its changes)', async () => {
    const result = await on(bucket, 'admin', ['mint-token', '--prefix', 'a', '--permissions', 'enumerate', '--ttl', '60', '--json']);
    const answer = JSON.parse(result.out) as { access_token: string; id: string };
    expect(Object.keys(answer)).toEqual(['access_token', 'id']);
    expect(decodeJwt(answer.access_token).jti).toBe(answer.id);
  });

  it('bad permissions are a usage error (exit 1); a bucket without a signing key is a set-up matter: the fix, exit 1', async () => {
    const plain = await createBucket(server.api, { secret_key: 'p' });
    const [bad, unsigned] = await Promise.all([
      on(bucket, 'admin', ['mint-token', '--prefix', 'a', '--permissions', 'read,fly', '--ttl', '60']),
      on(plain, 'p', ['mint-token', '--prefix', 'a', '--permissions', 'read', '--ttl', '60']),
    ]);
    expect(bad.exitCode).toBe(1);
    expect(unsigned.exitCode).toBe(1);
    expect(unsigned.stderr).toBe(
      `kvb: bucket ${plain} has no signing key, so it cannot mint tokens (the server answered 503): give it one with kvb bucket update --rotate-signing-key\n`,
    );
  });
});
