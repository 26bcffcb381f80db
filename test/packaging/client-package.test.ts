import { copyFileSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deadUrl } from '../helpers/cli.js';
import { CLIENT_SCENARIO, SCENARIO_EXPECTED, scenarioCommands } from '../helpers/client-scenario.js';
import { type RunningServer, startServer } from '../helpers/server.js';

/*
 * kvb-client (packages/client), the client published on its own: packed with `npm pack`, installed
 * from that tarball alone into an empty app (offline: nothing else may be needed), then used by the
 * client scenario under Node, Deno and Bun with a bare `import('kvb-client')`, as an app would.
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const PACKAGE = join(ROOT, 'packages', 'client');
const { version } = JSON.parse(readFileSync(join(PACKAGE, 'package.json'), 'utf8')) as { version: string };

let work: string;
let app: string;
let server: RunningServer;
let dead: string;

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? filesUnder(join(dir, e.name)) : [join(dir, e.name)]));
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'kvb-client-pack-'));
  app = join(work, 'app');
  server = await startServer();
  dead = await deadUrl();
}, 60_000);
afterAll(async () => {
  await server?.stop();
  rmSync(work, { recursive: true, force: true });
});

describe('kvb-client, packed and installed on its own', () => {
  it('packs the built client and nothing else; installs offline from the tarball with no dependency, no native module, at the size docs/client.md states', {
    timeout: 180_000,
  }, async () => {
    await execa('npm', ['pack', '--pack-destination', work], { cwd: PACKAGE });
    const tarball = join(work, `kvb-client-${version}.tgz`);
    const listing = (await execa('tar', ['tzf', tarball])).stdout.split('\n');
    expect(listing).toContain('package/package.json');
    expect(listing).toContain('package/dist/client/index.js');
    expect(listing).toContain('package/dist/client/index.d.ts');
    expect(listing.filter((f) => !/^package\/(package\.json|README\.md|LICENSE|dist\/.+\.(js|d\.ts))$/.test(f))).toEqual([]);

    await execa('mkdir', ['-p', app]);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
    // --offline: the tarball must be all there is to install.
    await execa('npm', ['install', '--offline', '--no-audit', '--no-fund', tarball], { cwd: app });
    const installed = readdirSync(join(app, 'node_modules')).filter((name) => !name.startsWith('.'));
    expect(installed).toEqual(['kvb-client']);
    const lock = JSON.parse(readFileSync(join(app, 'package-lock.json'), 'utf8')) as { packages: Record<string, unknown> };
    expect(Object.keys(lock.packages).filter((p) => p !== '')).toEqual(['node_modules/kvb-client']);
    const files = filesUnder(join(app, 'node_modules', 'kvb-client'));
    expect(files.filter((f) => f.endsWith('.node'))).toEqual([]);
    const manifest = JSON.parse(readFileSync(join(app, 'node_modules', 'kvb-client', 'package.json'), 'utf8')) as Record<string, unknown>;
    expect(manifest.dependencies ?? {}).toEqual({});
    expect(manifest.peerDependencies ?? {}).toEqual({});
    expect(manifest.optionalDependencies ?? {}).toEqual({});

    const kB = files.reduce((sum, f) => sum + statSync(f).size, 0) / 1000;
    const stated = /install size: about (\d+) kB/.exec(readFileSync(join(ROOT, 'docs', 'client.md'), 'utf8'));
    expect(stated, 'docs/client.md states "install size: about N kB"').not.toBeNull();
    console.log(`kvb-client install size: ${kB.toFixed(1)} kB (docs/client.md: about ${stated![1]} kB)`);
    expect(Math.abs(kB - Number(stated![1])) / Number(stated![1])).toBeLessThanOrEqual(0.1);
  });

  // Each runtime imports the installed package by its name from the app's directory.
  const runtimes = scenarioCommands(join('APP', 'scenario.mjs'));
  for (const runtime of runtimes) {
    it.skipIf(!existsSync(runtime.command))(
      `${runtime.name}: the client scenario passes against the installed package`,
      { timeout: 120_000 },
      async () => {
        expect(existsSync(join(app, 'node_modules', 'kvb-client')), 'installed by the test above').toBe(true);
        const scenario = join(app, 'scenario.mjs');
        copyFileSync(CLIENT_SCENARIO, scenario);
        const result = await execa(
          runtime.command,
          runtime.args.map((a) => (a === join('APP', 'scenario.mjs') ? scenario : a)),
          {
            cwd: app,
            env: { KVB_URL: server.url, DEAD_URL: dead, KVB_CLIENT_MODULE: 'kvb-client', NO_COLOR: '1', DENO_NO_UPDATE_CHECK: '1' },
            reject: false,
            timeout: 110_000,
          },
        );
        expect({ exitCode: result.exitCode, stderr: result.stderr }).toEqual({ exitCode: 0, stderr: '' });
        expect(JSON.parse(result.stdout)).toEqual(SCENARIO_EXPECTED);
      },
    );
  }
  for (const runtime of runtimes) {
    if (!existsSync(runtime.command))
      console.warn(`client-package: ${runtime.name} SKIPPED (${runtime.command} is missing: npm install --no-save deno bun)`);
  }
});
