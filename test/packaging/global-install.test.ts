import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VERSION } from '../../src/version.js';
import { deadUrl, inTerminal, KEYS } from '../helpers/cli.js';
import { docBlocks } from '../helpers/doc-blocks.js';
import { runInstallBlock } from '../helpers/install-block.js';

/*
 * docs/operations.md's install of the packed tarball, run as written into a temp prefix, then the
 * README's first use of the server and the CLI with the `kvb` it put on the PATH. `npm pack` runs in
 * this checkout and swaps its package.json for the packed one while it packs, so this file runs in a
 * vitest project of its own, after the rest of the suite (`npm run test:install`, a step of .ci/run):
 * beside the other files it would change the manifest they read.
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

interface LockEntry {
  version?: string;
  dev?: boolean;
  link?: boolean;
  optional?: boolean;
}

/** Every package the shrinkwrap pins for a production install whose version differs on disk under `dir`, or is missing. */
function offPins(shrinkwrap: { packages: Record<string, LockEntry> }, dir: string): string[] {
  const off: string[] = [];
  for (const [path, entry] of Object.entries(shrinkwrap.packages)) {
    if (path === '' || entry.dev || entry.link) continue;
    const manifest = join(dir, path, 'package.json');
    if (!existsSync(manifest)) {
      if (!entry.optional) off.push(`${path}: ${entry.version} pinned, missing`);
      continue;
    }
    const { version } = JSON.parse(readFileSync(manifest, 'utf8')) as { version: string };
    if (version !== entry.version) off.push(`${path}: ${entry.version} pinned, ${version} installed`);
  }
  return off;
}

/** The packages installed under dir's node_modules (nested ones included), as lock paths. */
function installed(dir: string, under = 'node_modules'): string[] {
  if (!existsSync(join(dir, under))) return [];
  return readdirSync(join(dir, under)).flatMap((name) => {
    if (name.startsWith('.')) return [];
    if (name.startsWith('@'))
      return readdirSync(join(dir, under, name)).flatMap((sub) => [
        `${under}/${name}/${sub}`,
        ...installed(dir, `${under}/${name}/${sub}/node_modules`),
      ]);
    return [`${under}/${name}`, ...installed(dir, `${under}/${name}/node_modules`)];
  });
}

let dir: string;
let opt: string;
let prefix: string;
/** The installed `kvb` first on the PATH, no KVB_* setting from this process, a config home of its own. */
let userEnv: Record<string, string>;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'kvb-pack-'));
  opt = join(dir, 'opt-kvb');
  prefix = join(dir, 'prefix');
  const [block, ...more] = docBlocks(ROOT, 'docs/operations.md').filter((b) => b.marker === 'install');
  expect(block, 'docs/operations.md has a block marked docs-test: install').toBeDefined();
  expect(more).toEqual([]);
  const started = Date.now();
  // The block runs in the checkout (its first line is `npm pack` in a clone); -g goes to the temp prefix.
  // npm's cache is warm after the checkout's `npm ci`: nothing needs the registry, and npm is told
  // not to ask it about audits and funding.
  runInstallBlock(block!, {
    cwd: ROOT,
    replace: { 'sudo ': '', '/opt/kvb': opt },
    env: {
      npm_config_prefix: prefix,
      npm_config_prefer_offline: 'true',
      npm_config_audit: 'false',
      npm_config_fund: 'false',
      npm_config_update_notifier: 'false',
      PATH: `${join(prefix, 'bin')}:${process.env.PATH}`,
    },
    timeoutMs: 1_100_000,
  });
  console.log(`docs/operations.md's install: ${((Date.now() - started) / 1000).toFixed(1)} s`);
  const cleared = Object.fromEntries(
    Object.entries(process.env).filter(([name, value]) => !name.startsWith('KVB_') && value !== undefined),
  );
  userEnv = {
    ...(cleared as Record<string, string>),
    PATH: `${join(prefix, 'bin')}:${process.env.PATH}`,
    XDG_CONFIG_HOME: join(dir, 'config'),
    NO_COLOR: '1',
  };
}, 1_200_000);
afterAll(() => {
  rmSync(join(ROOT, `kvb-${VERSION}.tgz`), { force: true });
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("docs/operations.md's install, run as written into a temp prefix", () => {
  it('every dependency at the version npm-shrinkwrap.json pins and nothing else; the packed package.json builds nothing', () => {
    expect(readdirSync(opt)).not.toContain('src');
    const manifest = JSON.parse(readFileSync(join(opt, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
      workspaces?: unknown;
    };
    expect(manifest.scripts.prepare, 'the packed package.json has no build to run').toBeUndefined();
    expect(manifest.workspaces).toBeUndefined();
    expect(existsSync(join(ROOT, '.package.json.checkout')), "the checkout's package.json is put back").toBe(false);
    const shrinkwrap = JSON.parse(readFileSync(join(opt, 'npm-shrinkwrap.json'), 'utf8')) as { packages: Record<string, LockEntry> };
    expect(offPins(shrinkwrap, opt)).toEqual([]);
    expect(installed(opt).filter((path) => !shrinkwrap.packages[path])).toEqual([]);
    expect(Object.keys(shrinkwrap.packages).length).toBeGreaterThan(100);
  });

  it('kvb runs from the compiled dist/ and finds what stays outside its bundles; man finds its page through the prefix', async () => {
    expect((await execa('kvb', ['--version'], { env: userEnv })).stdout).toBe(VERSION);
    expect(existsSync(join(prefix, 'share', 'man', 'man1', 'kvb.1'))).toBe(true);
    const man = await execa('man', ['-w', 'kvb'], { env: { MANPATH: join(prefix, 'share', 'man') }, reject: false });
    // The man page is a link into /opt/kvb: man finds it through the prefix.
    if (man.exitCode === 0) expect(realpathSync(man.stdout.trim())).toBe(realpathSync(join(prefix, 'share', 'man', 'man1', 'kvb.1')));
  });
});

/** The README's blocks marked `docs-test: first-use`: the server's, then the CLI's. */
function firstUseBlocks(): { serve: string; cli: string[] } {
  const blocks = docBlocks(ROOT, 'README.md').filter((b) => b.marker === 'first-use');
  expect(blocks).toHaveLength(2);
  const lines = (text: string) =>
    text
      .split('\n')
      .map((line) => line.replace(/\s+# .*$/, '').trim())
      .filter(Boolean);
  // The server's block has a SQLite line and a PostgreSQL one; the first use is the SQLite one.
  const [serve] = lines(blocks[0]!.text);
  expect(serve).toMatch(/^kvb serve .*--db \.\/kvb\.db$/);
  return { serve: serve!, cli: lines(blocks[1]!.text) };
}

/** What each of the README's CLI commands prints, run in order after `kvb init` (a pipe: exact data, no table). */
const PRINTS: Record<string, (out: string) => void> = {
  'kvb set user/42 \'{"name":"Ada"}\'': (out) => expect(out).toBe(''),
  'kvb get user/42': (out) => expect(out).toBe('{"name":"Ada"}'),
  'kvb incr visits': (out) => expect(out).toBe('1\n'),
  'kvb ls user/ --values': (out) => expect(out).toBe('user/42={"name":"Ada"}\n'),
  'kvb history user/42': (out) => {
    const changes = out
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { operation: string; type: string });
    expect(changes.map((c) => [c.operation, c.type])).toEqual([['set', 'json']]);
  },
};

describe("the README's first use of the server and the CLI, with the installed kvb in a scratch directory", () => {
  it('kvb serve, kvb init at a terminal (its defaults: a private bucket, profile "default"), then every command of the tour', {
    timeout: 180_000,
  }, async () => {
    const { serve, cli } = firstUseBlocks();
    const scratch = join(dir, 'scratch');
    mkdirSync(scratch);
    const url = await deadUrl();
    const port = new URL(url).port;
    const shell = (line: string) =>
      execa('bash', ['-c', line], { cwd: scratch, env: userEnv, extendEnv: false, reject: false, stripFinalNewline: false });
    const server = execa('bash', ['-c', `exec ${serve.replace('--port 8080', `--port ${port}`)}`], {
      cwd: scratch,
      env: userEnv,
      extendEnv: false,
      reject: false,
    });
    try {
      // Listening once /health answers (an event, polled); Swagger UI's files come from node_modules.
      await expect.poll(async () => (await fetch(`${url}/health`).catch(() => undefined))?.status, { timeout: 30_000 }).toBe(200);
      expect((await fetch(`${url}/swagger-ui/static/swagger-ui.css`)).status).toBe(200);
      expect(existsSync(join(scratch, 'kvb.db'))).toBe(true);

      // The wizard's first answer is this server's URL, typed over the default it offers.
      const init = await inTerminal(
        [],
        [
          { expect: 'Server URL', send: `${KEYS.backspace.repeat(40)}${url}\r` },
          { expect: 'Admin email', send: 'me@example.com\r' },
          { expect: 'Credentials to set', send: '\r' },
          { expect: 'Secret key', send: '\r' },
          { expect: 'Read key', send: '\r' },
          { expect: 'Write key', send: '\r' },
          { expect: 'Default TTL', send: '\r' },
          { expect: 'Save as profile', send: '\r' },
        ],
        { PATH: userEnv.PATH!, XDG_CONFIG_HOME: userEnv.XDG_CONFIG_HOME! },
        undefined,
        ['kvb', 'init'],
      );
      expect(init.timedOut, init.output).toBeNull();
      expect(init.exitCode, init.output).toBe(0);
      expect(init.output).toContain('Private bucket: every request needs one of its keys.');
      expect(init.output).toContain('Saved profile "default"');

      expect(
        cli.filter((line) => !(line in PRINTS) && !line.startsWith('kvb watch ')),
        'a README command this test does not check',
      ).toEqual([]);
      let watch: ReturnType<typeof execa> | undefined;
      let watched = '';
      for (const line of cli) {
        if (line.startsWith('kvb watch ')) {
          // It follows changes: started, seen in sync, then sent the tour's first write again (below).
          watch = execa('bash', ['-c', `exec ${line}`], { cwd: scratch, env: userEnv, extendEnv: false, reject: false, buffer: false });
          watch.stdout?.setEncoding('utf8').on('data', (chunk: string) => (watched += chunk));
          await expect.poll(() => watched).toMatch(/^\{"type":"sync"/);
          continue;
        }
        const result = await shell(line);
        expect({ line, exitCode: result.exitCode, stderr: result.stderr }).toEqual({ line, exitCode: 0, stderr: '' });
        PRINTS[line]!(result.stdout);
      }
      expect(watch, 'the tour watches').toBeDefined();
      const rewrite = await shell(cli[0]!);
      expect(rewrite.exitCode).toBe(0);
      await expect.poll(() => watched).toContain('"type":"set","key":"user/42"');
      watch!.kill('SIGINT');
      expect((await watch!).exitCode).toBe(0);
    } finally {
      server.kill('SIGTERM');
      await server;
    }
  });
});
