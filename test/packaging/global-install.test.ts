import { existsSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';
import { VERSION } from '../../src/version.js';
import { docBlocks } from '../helpers/doc-blocks.js';
import { runInstallBlock } from '../helpers/install-block.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** Installing 150 packages takes minutes on a loaded 2-core machine: opt in with KVB_TEST_PACKAGING=1. */
const enabled = process.env.KVB_TEST_PACKAGING === '1';
if (!enabled) console.log('Packaging test: SKIPPED (set KVB_TEST_PACKAGING=1 to run the install of docs/operations.md into a temp prefix)');

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

describe('packaging', () => {
  it.skipIf(!enabled)(
    "docs/operations.md's install, run as written into a temp prefix: every dependency at the version npm-shrinkwrap.json pins, no warning, kvb runs from the compiled dist/ with its man page",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'kvb-pack-'));
      const opt = join(dir, 'opt-kvb');
      const prefix = join(dir, 'prefix');
      try {
        const [block, ...more] = docBlocks(ROOT, 'docs/operations.md').filter((b) => b.marker === 'install');
        expect(block, 'docs/operations.md has a block marked docs-test: install').toBeDefined();
        expect(more).toEqual([]);
        // The block runs in the checkout (its first line is `npm pack` in a clone); -g goes to the temp prefix.
        runInstallBlock(block!, {
          cwd: ROOT,
          replace: { 'sudo ': '', '/opt/kvb': opt },
          env: {
            npm_config_prefix: prefix,
            npm_config_prefer_offline: 'true',
            npm_config_audit: 'false',
            npm_config_fund: 'false',
            PATH: `${join(prefix, 'bin')}:${process.env.PATH}`,
          },
          timeoutMs: 1_100_000,
        });

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
        // …and nothing the shrinkwrap does not pin.
        expect(installed(opt).filter((path) => !shrinkwrap.packages[path])).toEqual([]);
        expect(Object.keys(shrinkwrap.packages).length).toBeGreaterThan(100);

        const version = await execa(join(prefix, 'bin', 'kvb'), ['--version']);
        expect(version.stdout).toBe(VERSION);
        // The installed bundles find what stays outside them (better-sqlite3, Swagger UI's files) in node_modules.
        const port = 20000 + Math.floor(Math.random() * 20000);
        const server = execa(
          join(prefix, 'bin', 'kvb'),
          ['serve', '--port', String(port), '--host', '127.0.0.1', '--db', join(dir, 'kvb.db')],
          {
            reject: false,
          },
        );
        try {
          // Listening once /health answers (an event, polled).
          await expect
            .poll(async () => (await fetch(`http://127.0.0.1:${port}/health`).catch(() => undefined))?.status, {
              timeout: 20_000,
              interval: 100,
            })
            .toBe(200);
          expect((await fetch(`http://127.0.0.1:${port}/swagger-ui/static/swagger-ui.css`)).status).toBe(200);
        } finally {
          server.kill('SIGTERM');
          await server;
        }
        expect(existsSync(join(prefix, 'share', 'man', 'man1', 'kvb.1'))).toBe(true);
        const man = await execa('man', ['-w', 'kvb'], { env: { MANPATH: join(prefix, 'share', 'man') }, reject: false });
        // The man page is a link into /opt/kvb: man finds it through the prefix.
        if (man.exitCode === 0) expect(realpathSync(man.stdout.trim())).toBe(realpathSync(join(prefix, 'share', 'man', 'man1', 'kvb.1')));
      } finally {
        rmSync(join(ROOT, `kvb-${VERSION}.tgz`), { force: true });
        rmSync(dir, { recursive: true, force: true });
      }
    },
    1_200_000,
  );
});
