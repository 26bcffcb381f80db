import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumPresent, launchChromium } from '../helpers/browser.js';
import { type RunningServer, startServer } from '../helpers/server.js';

/**
 * `kvb/client` bundled for the browser (esbuild, platform browser: a node: import would fail the
 * build) and driven in Debian's Chromium from a page on another origin than the server, so the
 * round trip goes through CORS as an app's would: preflights, the Authorization header, and the
 * Kvb-Type / Kvb-Revision / ETag headers the client reads, exposed.
 */

// What the callback given to page.evaluate uses: it runs in the page, where the bundle defined it.
declare const kvbClient: typeof import('../../src/client/index.js');

const hasChromium = chromiumPresent('test/browser/client-library.test.ts');

let server: RunningServer;
let pageServer: Server;
let pageOrigin = '';
let browser: Browser;

beforeAll(async () => {
  if (!hasChromium) return;
  const bundle = await build({
    entryPoints: [fileURLToPath(new URL('../../src/client/index.ts', import.meta.url))],
    bundle: true,
    format: 'iife',
    globalName: 'kvbClient',
    platform: 'browser',
    target: 'es2022',
    write: false,
  });
  const script = bundle.outputFiles[0]!.text;
  pageServer = createServer((request, response) => {
    if (request.url === '/kvb-client.js') {
      response.writeHead(200, { 'content-type': 'text/javascript' }).end(script);
      return;
    }
    response.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>app</title><script src="/kvb-client.js"></script>');
  });
  await new Promise<void>((resolve) => pageServer.listen(0, '127.0.0.1', resolve));
  pageOrigin = `http://127.0.0.1:${(pageServer.address() as AddressInfo).port}`;
  server = await startServer();
  browser = await launchChromium();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await server?.stop();
  await new Promise((resolve) => pageServer?.close(resolve));
});

describe('kvb/client in a browser', () => {
  it.skipIf(!hasChromium)(
    'runs a scripted round trip from another origin: typed set/get, increment, list, atomic, delete, typed errors',
    async () => {
      const page = await browser.newPage();
      const errors: string[] = [];
      page.on('pageerror', (error) => errors.push(error.message));
      await page.goto(`${pageOrigin}/`);
      // The page and the server are different origins (different ports).
      expect(new URL(pageOrigin).origin).not.toBe(new URL(server.url).origin);
      const result = await page.evaluate(async (url) => {
        const { connect, createBucket, NotFoundError, PreconditionFailedError } = kvbClient;
        const bucket = await createBucket({ url }, { email: 'browser@example.com', secret_key: 'S', default_ttl: 0 });
        const kv = connect({ url, bucket, token: 'S' });
        const max = await kv.set('max', 9223372036854775807n);
        const bytes = Uint8Array.from({ length: 256 }, (_, i) => i);
        await kv.set('bytes', bytes);
        await kv.set('doc', { hello: 'world' });
        const readMax = await kv.get('max');
        const readBytes = await kv.get('bytes');
        const count = await kv.increment('visits', 2n);
        const stale = await kv.set('max', 1n, { ifRevision: max.revision - 1 }).catch((e: unknown) => e);
        const keys: string[] = [];
        for await (const { key } of kv.list({ pageSize: 2 })) keys.push(key);
        const commit = await kv.atomic().check('doc', null).set('x', 'y').commit();
        const deleted = await kv.delete('doc');
        const missing = await connect({ url, bucket: '00000000-0000-4000-8000-000000000000', token: 'S' })
          .get('k')
          .catch((e: unknown) => e);
        return {
          max: `${typeof readMax?.value}:${String(readMax?.value)}`,
          maxRevision: readMax?.revision === max.revision,
          bytesOk: readBytes?.value instanceof Uint8Array && readBytes.value.length === 256 && readBytes.value.every((b, i) => b === i),
          bytesType: readBytes?.type,
          count: `${typeof count.value}:${String(count.value)}`,
          stale: stale instanceof PreconditionFailedError ? `412 current ${stale.currentRevision === max.revision}` : String(stale),
          keys,
          commit: commit.ok ? 'ok' : commit.failedChecks.map((c) => c.key).join(','),
          deleted,
          doc: await kv.get('doc'),
          missing: missing instanceof NotFoundError ? `${missing.status} ${missing.detail}` : String(missing),
        };
      }, server.url);
      expect(result).toEqual({
        max: 'bigint:9223372036854775807',
        maxRevision: true,
        bytesOk: true,
        bytesType: 'bytes',
        count: 'bigint:2',
        stale: '412 current true',
        keys: ['bytes', 'doc', 'max', 'visits'],
        commit: 'doc',
        deleted: true,
        doc: null,
        missing: '404 no such bucket',
      });
      expect(errors).toEqual([]);
      await page.close();
    },
  );

  it.skipIf(!hasChromium)(
    "import() of a Blob tells its upload's progress as it goes (through XMLHttpRequest), then 1; a refused one is the typed error; a client with cache: 'no-store' works",
    async () => {
      const page = await browser.newPage();
      const errors: string[] = [];
      page.on('pageerror', (error) => errors.push(error.message));
      await page.goto(`${pageOrigin}/`);
      const result = await page.evaluate(async (url) => {
        const { connect, createBucket, BadRequestError, KvbNetworkError } = kvbClient;
        const from = connect({
          url,
          bucket: await createBucket({ url }, { email: 'b@example.com', secret_key: 'S' }),
          token: 'S',
          cache: 'no-store',
        });
        const big = 'x'.repeat(4000);
        await from.atomic().set('a', big).set('b', big).set('c', 1).commit();
        const parts: Uint8Array[] = [];
        for await (const chunk of await from.export()) parts.push(chunk.slice());
        const to = connect({ url, bucket: await createBucket({ url }, { email: 'b@example.com', secret_key: 'S' }), token: 'S' });
        const fractions: number[] = [];
        const imported = await to.import(new Blob(parts), { onUploadProgress: (f) => fractions.push(f) });
        const refusedProgress: number[] = [];
        const refused = await to
          .import(new Blob(['not json\n']), { onUploadProgress: (f) => refusedProgress.push(f) })
          .catch((e: unknown) => e);
        const dead = await connect({ url: 'http://127.0.0.1:9', bucket: 'b', token: 'S' })
          .import(new Blob(['{}\n']), { onUploadProgress: () => undefined })
          .catch((e: unknown) => e);
        return {
          imported: [imported.imported, imported.skipped],
          read: (await to.get('c'))?.value?.toString(),
          last: fractions.at(-1),
          told: fractions.length >= 2,
          rising: fractions.every((f, i) => f > 0 && f <= 1 && (i === 0 || f >= fractions[i - 1]!)),
          refused: refused instanceof BadRequestError ? refused.status : String(refused),
          refusedProgress: refusedProgress.filter((f) => f === 1).length,
          dead: dead instanceof KvbNetworkError,
        };
      }, server.url);
      expect(result).toEqual({
        imported: [3, 0],
        read: '1',
        last: 1,
        told: true,
        rising: true,
        refused: 400,
        refusedProgress: 1,
        dead: true,
      });
      expect(errors).toEqual([]);
      await page.close();
    },
  );
});
