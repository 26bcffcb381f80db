import { execa } from 'execa';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { VERSION } from '../../src/version.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** Installing 150 packages takes minutes on a loaded 2-core machine: opt in with KVB_TEST_PACKAGING=1. */
const enabled = process.env.KVB_TEST_PACKAGING === '1';
if (!enabled) console.log('Packaging test: SKIPPED (set KVB_TEST_PACKAGING=1 to pack and install -g into a temp prefix)');

describe('packaging', () => {
  it.skipIf(!enabled)(
    "npm pack, then npm install -g of the tarball: kvb runs from the compiled dist/, the man page is installed, no warning about kvb's own scripts",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'kvb-pack-'));
      try {
        await execa('npm', ['pack', '--pack-destination', dir], { cwd: ROOT });
        const tarball = join(dir, `kvb-${VERSION}.tgz`);
        const { stdout: listing } = await execa('tar', ['tzf', tarball]);
        expect(listing).toContain('package/dist/kvb-cli.cjs');
        expect(listing).toContain('package/dist/kvb-server.cjs');
        expect(listing).not.toContain('.code-cache');
        expect(listing).toContain('package/man/kvb.1');
        expect(listing).toContain('package/npm-shrinkwrap.json');
        expect(listing).not.toMatch(/package\/(src|test)\//);

        const prefix = join(dir, 'prefix');
        const install = await execa('npm', ['install', '-g', '--prefer-offline', '--no-audit', '--no-fund', '--prefix', prefix, tarball], {
          cwd: dir,
          all: true,
        });
        // Installing runs no build of kvb (no prepare/install script of its own to run or to warn about).
        expect(install.all).not.toMatch(/kvb@[\d.]+ \(/);
        expect(install.all).not.toMatch(/npm run build|tsc /);
        // The published npm-shrinkwrap.json pins the dependency tree kvb is tested with, including the
        // overrides that keep every package within kvb's `engines` (no EBADENGINE on Node 20).
        expect(install.all).not.toMatch(/EBADENGINE/);

        const version = await execa(join(prefix, 'bin', 'kvb'), ['--version']);
        expect(version.stdout).toBe(VERSION);
        // The installed bundles find what stays outside them (better-sqlite3, Swagger UI's files) in node_modules.
        const port = 20000 + Math.floor(Math.random() * 20000);
        const server = execa(
          join(prefix, 'bin', 'kvb'),
          ['serve', '--port', String(port), '--host', '127.0.0.1', '--db', join(dir, 'kvb.db')],
          { reject: false },
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
        if (man.exitCode === 0) expect(man.stdout).toContain(prefix);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
    1_200_000,
  );
});
