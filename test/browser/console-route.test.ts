import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/server/app.js';
import { DEFAULT_SERVER_CONFIG } from '../../src/server/server-config.js';
import { openStore } from '../../src/store/open-store.js';
import type { Store } from '../../src/store/store.js';
import { startServer } from '../helpers/server.js';

/** How the server serves the console's files: lazily, with its CSP, only its own files, and not at all when off. */

let dir: string;
let store: Store;
const apps: FastifyInstance[] = [];

async function app(options: { console: boolean; consoleDir?: string }): Promise<FastifyInstance> {
  const built = await buildApp(store, { ...DEFAULT_SERVER_CONFIG, logLevel: 'silent', ...options });
  apps.push(built);
  await built.ready();
  return built;
}

describe('the console route', () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kvb-console-route-'));
    store = await openStore(join(dir, 'kvb.db'), { durability: 'normal', poolSize: 1 });
  });
  afterAll(async () => {
    for (const a of apps) await a.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('reads its files on the first request, not at start-up', async () => {
    const assets = mkdtempSync(join(dir, 'assets-'));
    const server = await app({ console: true, consoleDir: assets });
    // Written after the app is ready: only a lazy route can serve them.
    writeFileSync(join(assets, 'index.html'), '<!doctype html><title>later</title>');
    writeFileSync(join(assets, 'app.js'), 'console.log(1)');
    writeFileSync(join(assets, 'secret.txt'), 'not a console file');
    const page = await server.inject('/console/');
    expect(page.statusCode).toBe(200);
    expect(page.body).toBe('<!doctype html><title>later</title>');
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.headers['content-security-policy']).toMatch(/default-src 'none'; script-src 'self'; style-src 'self';/);
    expect(page.headers['x-content-type-options']).toBe('nosniff');
    const script = await server.inject('/console/app.js');
    expect([script.statusCode, script.headers['content-type']]).toEqual([200, 'text/javascript; charset=utf-8']);
    // Only the console's own kinds of file, and nothing outside its folder.
    for (const url of ['/console/secret.txt', '/console/nope.js', '/console/..%2Fkvb.db', '/console/%2e%2e%2fkvb.db']) {
      const answer = await server.inject(url);
      expect(answer.statusCode, url).toBe(404);
      expect(answer.json(), url).toMatchObject({ error: { code: 404, message: 'not_found' } });
    }
  });

  it('/console redirects to /console/', async () => {
    const server = await app({ console: true });
    const answer = await server.inject('/console');
    expect([answer.statusCode, answer.headers.location]).toEqual([301, 'console/']);
  });

  it('the built console (dist/console) has no inline script or style', async () => {
    const server = await app({ console: true, consoleDir: join(process.cwd(), 'dist/console') });
    const page = await server.inject('/console/');
    expect(page.body).toContain('<script type="module" src="app.js"></script>');
    expect(page.body).not.toMatch(/<script>|<style>| style=/);
  });

  it('the whole console stays under 150 KB gzipped', () => {
    const built = join(process.cwd(), 'dist/console');
    const files = readdirSync(built);
    expect(files.sort()).toEqual(['app.css', 'app.js', 'favicon.svg', 'index.html']);
    const gzipped = files.reduce((sum, f) => sum + gzipSync(readFileSync(join(built, f)), { level: 9 }).length, 0);
    expect(gzipped).toBeLessThan(150 * 1024);
  });

  it('is not there when turned off: --console off and KVB_CONSOLE=off', async () => {
    const server = await app({ console: false });
    for (const url of ['/console', '/console/', '/console/app.js']) expect((await server.inject(url)).statusCode, url).toBe(404);
    const spawned = await startServer({ args: ['--console', 'off'] });
    const fromEnv = await startServer({ env: { KVB_CONSOLE: 'off' } });
    try {
      for (const s of [spawned, fromEnv]) {
        expect((await fetch(`${s.url}/console/`)).status).toBe(404);
        expect((await fetch(`${s.url}/health`)).status).toBe(200);
      }
    } finally {
      await spawned.stop();
      await fromEnv.stop();
    }
  });

  it('an unknown --console value is a usage error', async () => {
    await expect(startServer({ args: ['--console', 'maybe'] })).rejects.toThrow(/argument 'maybe' is invalid.*on, off/s);
  });
});
