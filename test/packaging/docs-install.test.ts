import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { docBlocks } from '../helpers/doc-blocks.js';
import { runInstallBlock } from '../helpers/install-block.js';
import { type RunningServer, startServer } from '../helpers/server.js';

/*
 * The client's install and first use as the README and docs/client.md give them, run word for word in
 * an empty app directory: `/path/to/kvb` is this checkout (built), http://127.0.0.1:8080 a spawned server.
 * `npm install kvb-client` is not among them: the package is not on the registry yet.
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const installBlocks = (page: string) => docBlocks(ROOT, page).filter((b) => b.marker === 'install');

let server: RunningServer;
let work: string;
beforeAll(async () => {
  server = await startServer();
  work = mkdtempSync(join(tmpdir(), 'kvb-docs-install-'));
}, 60_000);
afterAll(async () => {
  await server?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

function emptyApp(name: string): string {
  const app = join(work, name);
  mkdirSync(app, { recursive: true });
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
  return app;
}

const replace = () => ({ '/path/to/kvb': ROOT, 'http://127.0.0.1:8080': server.url });

describe('the client install the docs give, in a scratch app', () => {
  it('no page tells an app developer to `npm install kvb-client` as if it were on the registry', () => {
    for (const page of ['README.md', 'docs/client.md', 'packages/client/README.md']) {
      const commands = docBlocks(ROOT, page).filter((b) => b.lang === 'sh' && /^npm install kvb-client\b/m.test(b.text));
      expect(commands.map((b) => `${b.page}:${b.line}`)).toEqual([]);
    }
  });

  it('README.md: its one-line install gives the app `kvb-client`, importable by that name', { timeout: 120_000 }, async () => {
    const [block, ...more] = installBlocks('README.md');
    expect(block, 'README.md has a block marked docs-test: install').toBeDefined();
    expect(more).toEqual([]);
    const app = emptyApp('readme');
    runInstallBlock(block!, { cwd: app, replace: replace(), timeoutMs: 110_000 });
    const manifest = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    expect(manifest.dependencies['kvb-client']).toBe('file:kvb-client-0.1.0.tgz');
    const imported = await execa('node', ['--input-type=module', '-e', "import('kvb-client').then((m) => console.log(typeof m.connect))"], {
      cwd: app,
    });
    expect(imported.stdout).toBe('function');
  });

  it('docs/client.md: the install, then the first use against a running server, print what the page says', {
    timeout: 120_000,
  }, () => {
    const blocks = installBlocks('docs/client.md');
    expect(blocks).toHaveLength(2);
    const app = emptyApp('client-md');
    for (const block of blocks) runInstallBlock(block, { cwd: app, replace: replace(), timeoutMs: 110_000 });
    expect(existsSync(join(app, 'node_modules', 'kvb-client', 'LICENSE'))).toBe(true);
  });
});

describe('kvb-client is ready to publish', () => {
  const manifest = JSON.parse(readFileSync(join(ROOT, 'packages', 'client', 'package.json'), 'utf8')) as Record<string, unknown> & {
    repository: { url: string; directory: string };
  };
  const server = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { repository: { url: string }; license: string };

  it('has a license file, the license of kvb, and names the repository and a homepage', () => {
    expect(manifest.license).toBe(server.license);
    expect(readFileSync(join(ROOT, 'packages', 'client', 'LICENSE'), 'utf8')).toBe(readFileSync(join(ROOT, 'LICENSE'), 'utf8'));
    expect(manifest.repository).toEqual({ ...server.repository, directory: 'packages/client' });
    expect(manifest.homepage).toMatch(/^https:\/\//);
    expect(manifest.files).toContain('LICENSE');
  });

  it('its README links only to absolute URLs (a registry page cannot follow a relative one) in the repository', () => {
    const readme = readFileSync(join(ROOT, 'packages', 'client', 'README.md'), 'utf8');
    const links = [...readme.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!);
    expect(links.length).toBeGreaterThan(0);
    const base = server.repository.url.replace(/^git\+/, '').replace(/\.git$/, '');
    for (const link of links) expect(link.startsWith(`${base}/`) || link.startsWith(`${base}#`), link).toBe(true);
  });
});
