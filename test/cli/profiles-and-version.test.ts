import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VERSION } from '../../src/version.js';
import { deadUrl, kvb, tempConfigHome } from '../helpers/cli.js';
import { KVB_BIN, type RunningServer, startServer } from '../helpers/server.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** A config home holding two profiles; "default" carries a token, "work" a secret key. */
function homeWithProfiles(): string {
  const home = tempConfigHome();
  mkdirSync(join(home, 'kvb'));
  writeFileSync(
    join(home, 'kvb', 'config.json'),
    JSON.stringify({
      profiles: {
        default: { url: 'http://127.0.0.1:1', bucket: 'B1', token: 'tok-SECRET-1' },
        work: { url: 'http://kv.example:8080', bucket: 'B2', secret_key: 'sk-SECRET-2' },
      },
    }),
  );
  return home;
}

describe('kvb profile', () => {
  it('list marks the profile in use; --names prints names only; nothing secret is ever printed', async () => {
    const home = homeWithProfiles();
    const [list, names, json, envChosen] = await Promise.all([
      kvb(['profile', 'list'], { configHome: home }),
      kvb(['profile', 'list', '--names'], { configHome: home }),
      kvb(['profile', 'list', '--json'], { configHome: home }),
      kvb(['profile', 'list'], { configHome: home, env: { KVB_PROFILE: 'work' } }),
    ]);
    expect(list).toMatchObject({ exitCode: 0, out: '* default\thttp://127.0.0.1:1\tB1\n  work\thttp://kv.example:8080\tB2\n' });
    expect(names.out).toBe('default\nwork\n');
    expect(JSON.parse(json.out)).toEqual([
      { name: 'default', url: 'http://127.0.0.1:1', bucket: 'B1', credential: 'token', in_use: true },
      { name: 'work', url: 'http://kv.example:8080', bucket: 'B2', credential: 'secret key', in_use: false },
    ]);
    expect(envChosen.out).toContain('* work');
    for (const result of [list, names, json, envChosen]) expect(result.out + result.stderr).not.toContain('SECRET');
  });

  it('show prints url, bucket and the kind of credential, for the profile in use or a named one; an unknown one is exit 1', async () => {
    const home = homeWithProfiles();
    const [inUse, named, unknown] = await Promise.all([
      kvb(['profile', 'show', '--json'], { configHome: home }),
      kvb(['profile', 'show', 'work', '--json'], { configHome: home }),
      kvb(['profile', 'show', 'nope'], { configHome: home }),
    ]);
    expect(JSON.parse(inUse.out)).toEqual({ name: 'default', url: 'http://127.0.0.1:1', bucket: 'B1', credential: 'token' });
    expect(JSON.parse(named.out)).toEqual({ name: 'work', url: 'http://kv.example:8080', bucket: 'B2', credential: 'secret key' });
    expect(unknown.exitCode).toBe(1);
    // In a pipe, JSON without being asked (a table is for a terminal).
    expect(JSON.parse((await kvb(['profile', 'show', 'work'], { configHome: home })).out)).toEqual(JSON.parse(named.out));
    expect(unknown.stderr).toMatch(/^kvb: no profile "nope" in .*config\.json \(kvb profile list shows them\)\n$/);
  });

  it('use makes a profile the default (--profile and KVB_PROFILE still win); remove deletes it and forgets it was in use', async () => {
    const home = homeWithProfiles();
    const used = await kvb(['profile', 'use', 'work'], { configHome: home });
    expect(used).toMatchObject({ exitCode: 0, stderr: 'now using profile "work"\n' });
    expect(JSON.parse((await kvb(['profile', 'show', '--json'], { configHome: home })).out).name).toBe('work');
    expect(JSON.parse((await kvb(['--profile', 'default', 'profile', 'show', '--json'], { configHome: home })).out).name).toBe('default');
    expect(JSON.parse((await kvb(['profile', 'show', '--json'], { configHome: home, env: { KVB_PROFILE: 'default' } })).out).name).toBe(
      'default',
    );
    // The chosen profile is what other commands connect with: its URL appears in the failure.
    expect((await kvb(['get', 'k'], { configHome: home, env: { KVB_TIMEOUT: '2' } })).stderr).toContain('http://kv.example:8080');

    expect((await kvb(['profile', 'use', 'nope'], { configHome: home })).exitCode).toBe(1);
    const removed = await kvb(['profile', 'remove', 'work'], { configHome: home });
    expect(removed).toMatchObject({ exitCode: 0, stderr: 'removed profile "work"\n' });
    const config = JSON.parse(readFileSync(join(home, 'kvb', 'config.json'), 'utf8')) as { profiles: object; current?: string };
    expect(Object.keys(config.profiles)).toEqual(['default']);
    expect(config.current).toBeUndefined();
    expect((await kvb(['profile', 'list', '--names'], { configHome: home })).out).toBe('default\n');
  });

  it('bash completes saved profile names after --profile and after profile use', () => {
    const home = homeWithProfiles();
    const bin = join(tempConfigHome(), 'bin');
    mkdirSync(bin);
    writeFileSync(join(bin, 'kvb'), `#!/bin/sh\nexec node ${JSON.stringify(KVB_BIN)} "$@"\n`);
    chmodSync(join(bin, 'kvb'), 0o755);
    const complete = (words: string[]) =>
      execFileSync(
        'bash',
        [
          '-c',
          `source completions/kvb.bash; COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _kvb; printf '%s\\n' "\${COMPREPLY[@]}"`,
        ],
        { cwd: ROOT, encoding: 'utf8', env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, XDG_CONFIG_HOME: home } },
      )
        .split('\n')
        .filter(Boolean);
    expect(complete(['kvb', '--profile', ''])).toEqual(['default', 'work']);
    expect(complete(['kvb', '--profile', 'w'])).toEqual(['work']);
    expect(complete(['kvb', 'profile', 'use', ''])).toEqual(expect.arrayContaining(['default', 'work']));
  });
});

describe('kvb version', () => {
  let server: RunningServer;
  beforeAll(async () => {
    server = await startServer();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("prints the client's and the server's version (from /health)", async () => {
    const [text, json] = await Promise.all([kvb(['version', '--url', server.url]), kvb(['version', '--json', '--url', server.url])]);
    expect(text).toMatchObject({ exitCode: 0, out: `client ${VERSION}\nserver ${VERSION} (${server.url})\n`, stderr: '' });
    expect(JSON.parse(json.out)).toEqual({ client: VERSION, server: VERSION, url: server.url });
  });

  it('with no server answering, prints the client version alone and the reason, and exits 4 (unreachable)', async () => {
    const dead = await deadUrl();
    const [text, json] = await Promise.all([kvb(['version', '--url', dead]), kvb(['version', '--json', '--url', dead])]);
    expect(text).toMatchObject({ exitCode: 4, out: `client ${VERSION}\n` });
    expect(text.stderr).toMatch(
      new RegExp(`^kvb: no server version: cannot reach ${dead} \\(connection refused\\); the URL came from --url.*\\n$`),
    );
    expect(json.exitCode).toBe(4);
    expect(JSON.parse(json.out)).toEqual({ client: VERSION, server: null, url: dead });
  });
});
