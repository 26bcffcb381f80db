import { readFile, readdir } from 'node:fs/promises';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { sendError } from '../error-handling.js';

/** Where `npm run build` puts the console: dist/console beside dist/server. */
export const DEFAULT_CONSOLE_DIR = fileURLToPath(new URL('../../console/', import.meta.url));

/**
 * The console's only scripts and styles are its own files: no inline script or style, no other
 * origin. `connect-src 'self'` keeps its API calls on this server; downloads use blob: URLs.
 */
export const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; " +
  "font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'";

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.json': 'application/json',
};

interface Asset {
  type: string;
  body: Buffer;
}

/**
 * The web console at /console/. Registering costs three routes and nothing else: the files are
 * read on the first request and kept in memory (a handful of small files), so start-up does not
 * grow with the console.
 */
export async function consoleRoute(app: FastifyInstance, { dir = DEFAULT_CONSOLE_DIR }: { dir?: string }): Promise<void> {
  let assets: Promise<Map<string, Asset>> | undefined;
  const load = async (): Promise<Map<string, Asset>> => {
    const files = new Map<string, Asset>();
    for (const name of await readdir(dir)) {
      const type = CONTENT_TYPES[extname(name)];
      if (type) files.set(name, { type, body: await readFile(join(dir, name)) });
    }
    return files;
  };

  const serve = async (name: string, reply: FastifyReply) => {
    assets ??= load().catch((err: unknown) => {
      assets = undefined;
      app.log.warn({ err }, `the console's files are missing from ${dir} (run npm run build)`);
      return new Map<string, Asset>();
    });
    const asset = (await assets).get(name);
    if (!asset) return sendError(reply, 'not_found', 'no such console file');
    return reply
      .header('content-type', asset.type)
      .header('content-security-policy', CONSOLE_CSP)
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      .header('cache-control', 'no-cache')
      .send(asset.body);
  };

  const hidden = { schema: { hide: true } };
  // Relative, so it stays right when a reverse proxy mounts kvb under a path.
  app.get('/console', hidden, async (_request, reply) => reply.redirect('console/', 301));
  // `/` is no API route (the spec defines none there): a browser opening the server's address is
  // sent to the console, while an API client (curl, fetch, kvb) keeps the 404 envelope it had.
  app.get('/', hidden, async (request, reply) => {
    const vary = reply.getHeader('vary');
    reply.header('vary', vary ? `${String(vary)}, Accept` : 'Accept');
    if (request.headers.accept?.includes('text/html')) return reply.redirect('console/', 302);
    return sendError(reply, 'not_found', 'no such route');
  });
  app.get('/console/', hidden, async (_request, reply) => serve('index.html', reply));
  app.get<{ Params: { file: string } }>('/console/:file', hidden, async (request, reply) => serve(request.params.file, reply));
}
