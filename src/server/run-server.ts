import { isPostgresUrl, openStore } from '../store/open-store.js';
import { describeError } from '../store/storage-errors.js';
import type { Store } from '../store/store.js';
import { buildApp } from './app.js';
import type { ServerConfig } from './server-config.js';
import { startSweeper } from './sweeper.js';

/** `kvb serve`: opens the store, listens, sweeps expired keys, and shuts down cleanly on a signal. */
export async function runServer(config: ServerConfig): Promise<void> {
  // Until the app (and its logger) exists, a background storage error is written as a plain line.
  let onBackgroundError = (err: unknown) => {
    process.stderr.write(`kvb: storage connection error: ${describeError(err)}\n`);
  };
  let store: Store;
  try {
    store = await openStore(config.db, {
      durability: config.durability,
      poolSize: config.poolSize,
      onBackgroundError: (err) => onBackgroundError(err),
    });
  } catch (err) {
    // One line a person can act on, not a stack trace.
    const what = isPostgresUrl(config.db) ? `PostgreSQL at ${safeDbName(config.db)}` : `SQLite database ${config.db}`;
    process.stderr.write(`kvb: cannot open ${what}: ${describeError(err)}\n`);
    process.exit(1);
  }
  const app = await buildApp(store, config);
  onBackgroundError = (err) =>
    app.log.warn(`idle storage connection failed (${describeError(err)}); the pool reconnects on demand`);
  const sweeper = startSweeper(store, config.sweepIntervalSeconds * 1000, app.log);

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    app.log.info(`received ${signal}, finishing in-flight requests`);
    try {
      await sweeper.stop();
      await app.close();
      await store.close();
      app.log.info('stopped');
      process.exit(0);
    } catch (err) {
      app.log.error({ err }, 'unclean shutdown');
      process.exit(1);
    }
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));

  // Listening on app.server directly keeps start-up to the one log line below.
  await app.ready();
  await new Promise<void>((resolve, reject) => {
    app.server.once('error', reject);
    app.server.listen({ port: config.port, host: config.host }, () => resolve());
  });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const shownHost = config.host.includes(':') ? `[${config.host}]` : config.host;
  app.log.info(`kvb listening on http://${shownHost}:${port} (storage: ${store.backend})`);
}

/** host:port/db of a PostgreSQL URL, without user or password. */
function safeDbName(url: string): string {
  try {
    const u = new URL(url);
    return `${u.host || 'localhost'}${u.pathname}`;
  } catch {
    return 'the given URL';
  }
}
