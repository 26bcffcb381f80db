import type { FastifyInstance } from 'fastify';
import inject from 'light-my-request';
import { fileURLToPath } from 'node:url';
import { test as base } from 'vitest';
import { buildApp } from '../../src/server/app.js';
import type { Clock } from '../../src/server/clock.js';
import { DEFAULT_SERVER_CONFIG, type ServerConfig, storeOptions } from '../../src/server/server-config.js';
import { startSweeper } from '../../src/server/sweeper.js';
import { openStore } from '../../src/store/open-store.js';
import type { Store } from '../../src/store/store.js';
import { type Injector, injectors } from './injected.js';
import type { RunningServer } from './server.js';
import { testDatabase } from './test-database.js';

/**
 * The HTTP contract suites' server: `buildApp` on a real store (a SQLite file, or a fresh schema
 * of the project's PostgreSQL, through PgBouncer in that project), in the test's own process.
 * It listens on a free loopback port (watch streams, the client library, raw sockets and
 * concurrent clients need one), and `call` (http.ts) reaches it through `app.inject()` instead.
 * `kvb serve` is spawned (server.ts) only where the process itself is under test.
 */
export interface AppServer extends Omit<RunningServer, 'process'> {
  app: FastifyInstance;
  store: Store;
}

export interface AppServerOptions {
  /** Settings beyond the defaults of `kvb serve` (what its flags would set). */
  config?: Partial<ServerConfig>;
  /** A database another server used (its `db`): this one shares it, and leaves it in place. */
  db?: string;
  /** The time the app decides by (test-clock.ts); the real clock when absent. */
  clock?: Clock;
  /** The store the app is given, made from the real one (a test's faults around it); the real one when absent. */
  wrapStore?: (store: Store) => Store;
}

const CONSOLE_DIR = fileURLToPath(new URL('../../dist/console/', import.meta.url));

/** Opens the store and starts the app on 127.0.0.1 at a free port. */
export async function startAppServer(options: AppServerOptions = {}): Promise<AppServer> {
  const database = testDatabase({ db: options.db, prefix: 'kvb-app-' });
  const { dataDir, db, backend, applicationName } = database;
  // Access lines are what `kvb serve` logs by default; tests read them through logs(). The console
  // is the build's (next to src it would be looked for in src/console).
  const config: ServerConfig = { ...DEFAULT_SERVER_CONFIG, consoleDir: CONSOLE_DIR, ...options.config, db, host: '127.0.0.1', port: 0 };
  let output = '';
  let store: Store | undefined;
  try {
    store = await openStore(database.connectWith, storeOptions(config));
    const app = await buildApp(options.wrapStore ? options.wrapStore(store) : store, config, {
      logStream: { write: (line) => void (output += line) },
      ...(options.clock && { clock: options.clock }),
    });
    const sweeper = startSweeper(store, config, app.log, app.clock);
    const url = await app.listen({ host: config.host, port: 0 });
    const origin = new URL(url).origin;
    injectors.set(origin, injector(app, origin));
    const opened = store;
    let stopped: Promise<void> | undefined;
    return {
      url,
      api: `${url}/api/v1`,
      dataDir,
      db,
      backend,
      ...(applicationName && { applicationName }),
      logs: () => output,
      app,
      store: opened,
      // Like a spawned server's, stop may be called again (a test's finally after a keepData stop):
      // the server stops once, and a later call only removes the data.
      async stop({ keepData = false } = {}) {
        stopped ??= (async () => {
          injectors.delete(origin);
          // As `kvb serve` on SIGTERM: watch streams end (preClose), connections close, then the store.
          app.server.closeAllConnections();
          await app.close();
          await sweeper.stop();
          await opened.close();
        })();
        await stopped;
        await database.remove({ keepData });
        return 0;
      },
    };
  } catch (err) {
    await store?.close().catch(() => undefined);
    await database.remove();
    throw new Error(`in-process server did not start: ${(err as Error).message}\n${output}`, { cause: err });
  }
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/**
 * A fetch-shaped `app.inject()`, on the HTTP server's handler (light-my-request, as inject is): the
 * request is built as fetch builds it (a URLSearchParams body gets its form Content-Type, and so
 * on), with fetch's default headers, and redirects are followed unless `redirect: 'manual'`, so an
 * answer reads the same as over the socket.
 */
function injector(app: FastifyInstance, origin: string): Injector {
  const send = async (url: URL, init: RequestInit, hops: number): Promise<Response> => {
    const request = new Request(url, init);
    const headers: Record<string, string> = { host: url.host, accept: '*/*', 'accept-encoding': 'gzip, deflate', 'user-agent': 'node' };
    for (const [name, value] of request.headers) headers[name] = value;
    const payload = request.body ? Buffer.from(await request.arrayBuffer()) : undefined;
    // Through the HTTP server's own handler (the fast lane, then Fastify), as a socket's request goes.
    const answer = await inject(app.dispatch, {
      method: request.method as 'GET',
      url: `${url.pathname}${url.search}`,
      headers,
      remoteAddress: '127.0.0.1',
      ...(payload && { payload }),
    });
    const location = answer.headers.location;
    if (REDIRECTS.has(answer.statusCode) && typeof location === 'string' && init.redirect !== 'manual' && hops < 20) {
      const next = new URL(location, url);
      const keepsBody = answer.statusCode === 307 || answer.statusCode === 308;
      const { body: _body, ...rest } = init;
      if (next.origin === origin)
        return send(next, keepsBody ? init : { ...rest, method: request.method === 'HEAD' ? 'HEAD' : 'GET' }, hops + 1);
    }
    const responseHeaders = new Headers();
    for (const [name, value] of Object.entries(answer.headers)) {
      if (value === undefined) continue;
      for (const each of Array.isArray(value) ? value : [value]) responseHeaders.append(name, String(each));
    }
    const empty = request.method === 'HEAD' || answer.statusCode === 204 || answer.statusCode === 304;
    return new Response(empty ? null : answer.rawPayload, {
      status: answer.statusCode,
      statusText: answer.statusMessage,
      headers: responseHeaders,
    });
  };
  return (url, init) => send(url, init, 0);
}

/**
 * `test` with a `server` fixture: one in-process server per file, started when a test (or a
 * `beforeAll`) first asks for it and stopped after the file's last test. `config` is what the
 * file would have given `kvb serve` as flags.
 */
export const serverTest = (config: Partial<ServerConfig> = {}) =>
  // biome-ignore lint/correctness/noEmptyPattern: vitest reads the fixtures a fixture needs from this pattern, and refuses anything but one
  base.extend('server', { scope: 'file' }, async ({}, { onCleanup }) => {
    const server = await startAppServer({ config });
    onCleanup(async () => void (await server.stop()));
    return server;
  });
