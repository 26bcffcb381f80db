import { mkdirSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { storageFailureOf } from '../errors.js';
import { VERSION } from '../version.js';
import { type DbTarget, openStore, parseDbTarget, postgresLocation } from '../store/open-store.js';
import { describeError, readOnlyReason, storageFullReason } from '../store/storage-errors.js';
import type { Store } from '../store/store.js';
import type { Server as HttpsServer } from 'node:https';
import type { Server as HttpServer } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import { stdoutByTurn } from './log-stream.js';
import { sizeCryptoThreadPool } from './crypto-threads.js';
import { type TlsFiles, isLoopback, loadTlsFiles } from './tls.js';
import { startMetricsListener } from './metrics-listener.js';
import { type ServerConfig, parseListenAddress, storeOptions } from './server-config.js';
import { drainServer } from './http-server.js';
import { startSweeper } from './sweeper.js';
import { startWebhookDelivery } from './webhooks/webhook-delivery.js';

/** What `kvb serve` runs, for the functions that stop it. */
interface Serving {
  app: FastifyInstance;
  store: Store;
  config: ServerConfig;
  stoppers: Array<{ stop(): Promise<void> }>;
  metricsServer?: HttpServer;
  stopping: boolean;
  say: Say;
}
type Say = (level: 'info' | 'warn' | 'error', message: string) => void;

/** Until the app (and its logger) exists, a start-up failure is written as one plain line. */
function fail(message: string): never {
  process.stderr.write(`kvb: ${message}\n`);
  process.exit(1);
}

/** `kvb serve`: opens the store, listens, sweeps expired keys, and shuts down cleanly on a signal. */
export async function runServer(config: ServerConfig): Promise<void> {
  // First, before anything starts libuv's thread pool (it is sized once, at its first use).
  sizeCryptoThreadPool();
  // Until the app exists, a background storage error is written as one plain line.
  let onBackgroundError = (err: unknown) => {
    process.stderr.write(`kvb: storage connection error: ${describeError(err)}\n`);
  };
  // A writer thread that fails before the app exists stops the start; after, the server drains and exits 1.
  let onWriterFailure = (err: Error): void => fail(`the SQLite writer thread failed: ${describeError(err)}`);
  const { target, tls, created, store } = await openForServing(config, {
    onBackgroundError: (err) => onBackgroundError(err),
    onWriterFailure: (err) => onWriterFailure(err),
  });
  // The JSON log goes out once per event-loop turn (pretty lines go through pino-pretty's worker).
  const logStream = config.logFormat === 'json' ? stdoutByTurn() : undefined;
  const app = await buildApp(store, config, { ...(tls && { tls }), ...(logStream && { logStream }) });
  onBackgroundError = (err) => app.log.warn(`idle storage connection failed (${describeError(err)}); the pool reconnects on demand`);
  const sweeper = startSweeper(store, config, app.log, app.clock);
  const deliveries = startWebhookDelivery(store, config, app.log, app.clock, app.metricsRegistry);
  app.webhookHealth.lag = () => deliveries.lagging();
  const serving: Serving = { app, store, config, stoppers: [sweeper, deliveries], stopping: false, say: sayTo(app) };
  const { say } = serving;
  process.on('SIGHUP', () => reloadTls(app, config, say));
  // Without its writer the server could only read: it stops (exit 1) rather than answer half the API.
  // Writes waiting when it failed have been answered 503 (their outcome unknown); requests already received are answered.
  onWriterFailure = (err) => {
    say('error', `the SQLite writer thread failed, stopping the server: ${describeError(err)}`);
    void stop(serving, 'a writer thread failure', true);
  };
  const onSignal = signalHandler(serving);
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);

  // Listening on app.server directly keeps start-up to the one log line below.
  await app.ready();
  await listenOrFail(serving);
  for (const dir of created) app.log.info(`created directory ${dir} for the SQLite database`);
  if (config.metricsListen !== undefined) serving.metricsServer = await startMetricsOrFail(serving, config.metricsListen);
  announce(serving, target, tls !== undefined);
}

/** The store opened, with what was checked before: the --db target, the TLS pair, the SQLite file's directories. */
async function openForServing(
  config: ServerConfig,
  hooks: { onBackgroundError: (err: unknown) => void; onWriterFailure: (err: Error) => void },
): Promise<{ target: DbTarget; tls: TlsFiles | undefined; created: string[]; store: Store }> {
  let target: DbTarget;
  try {
    target = parseDbTarget(config.db);
  } catch (err) {
    return fail(`--db: ${(err as Error).message}`);
  }
  const tls = tlsFilesOrFail(config);
  const storage = target.kind === 'postgres' ? `PostgreSQL at ${safeDbName(target.url)}` : `SQLite database ${target.path}`;
  let created: string[] = [];
  if (target.kind === 'sqlite' && target.path !== ':memory:') {
    try {
      created = createParentDirectories(target.path);
    } catch (err) {
      return fail(`cannot open ${storage}: ${describeError(err)}`);
    }
  }
  try {
    const store = await openStore(config.db, { ...storeOptions(config), ...hooks });
    return { target, tls, created, store };
  } catch (err) {
    // One line a person can act on, not a stack trace.
    const code = (err as { code?: unknown }).code;
    // KVB_DATABASE_IN_USE: another process holds the file's sidecar lock (store/sqlite-lock.ts).
    if (
      target.kind === 'sqlite' &&
      (storageFailureOf(err) === 'KVB_DATABASE_IN_USE' || code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED')
    ) {
      return fail(`cannot open ${storage}: another process (another kvb serve?) has it open; one server per SQLite file`);
    }
    const readOnly = target.kind === 'sqlite' && target.path !== ':memory:' ? readOnlyReason(target.path) : undefined;
    return fail(`cannot open ${storage}: ${readOnly ?? storageFullReason(err) ?? describeError(err)}`);
  }
}

/** TLS files are checked before the store is opened: a bad pair is refused at once, in one line. */
function tlsFilesOrFail(config: ServerConfig): TlsFiles | undefined {
  if ((config.tlsCert === undefined) !== (config.tlsKey === undefined))
    return fail('--tls-cert and --tls-key go together: give both, or neither');
  if (config.tlsCert === undefined || config.tlsKey === undefined) return undefined;
  try {
    return loadTlsFiles(config.tlsCert, config.tlsKey);
  } catch (err) {
    return fail(describeError(err));
  }
}

function sayTo(app: FastifyInstance): Say {
  return (level, message) => {
    try {
      app.log[level](message);
    } catch {
      // stdout is gone (its reader exited): shutting down matters more than the line.
    }
  };
}

/** Drains and exits: 0 on a signal, 1 (like a server that cannot start: a supervisor restarts it) on a failure. */
async function stop(serving: Serving, signal: string, failed = false): Promise<void> {
  const { app, config, say } = serving;
  const exitCode = failed ? 1 : 0;
  if (serving.stopping) return;
  serving.stopping = true;
  // At once: /ready answers 503, so a load balancer stops sending here.
  app.lifecycle.draining = true;
  // A client that never finishes its request (or a pipelined queue behind one) must not hold
  // the process: past the deadline its connection is closed, and the process exits anyway.
  // Armed before anything is logged: a log line that cannot be written (stdout's reader gone)
  // must not keep the process from stopping.
  const deadline = setTimeout(() => {
    say('warn', `open requests did not finish within ${config.shutdownTimeoutSeconds} s; closing their connections`);
    app.server.closeAllConnections();
    setTimeout(() => {
      say('warn', 'requests still running after their connections closed; exiting');
      process.exit(exitCode);
    }, 2000).unref();
  }, config.shutdownTimeoutSeconds * 1000);
  deadline.unref();
  say('info', `received ${signal}, draining: answering requests already received, refusing new connections`);
  try {
    // Watch streams never finish on their own: end them first, so they do not hold the drain.
    app.endStreams();
    // Stop accepting, answer every request received (each with Connection: close), end idle
    // connections after a short grace, and wait for the last connection (see drainServer).
    await Promise.all([...serving.stoppers.map((s) => s.stop()), drainServer(app.server, config.drainIdleGraceMs)]);
    const { metricsServer } = serving;
    if (metricsServer) {
      metricsServer.closeAllConnections();
      await new Promise((resolve) => metricsServer.close(resolve));
    }
    await app.close();
    clearTimeout(deadline);
    await serving.store.close();
    say('info', 'stopped');
    process.exit(exitCode);
  } catch (err) {
    say('error', `unclean shutdown: ${describeError(err)}`);
    process.exit(1);
  }
}

/**
 * SIGHUP (`systemctl reload`) reloads the TLS pair: new handshakes get it, open connections
 * keep theirs, and a pair that cannot be used is refused with the old one kept. It never stops
 * kvb (without TLS there is nothing to reload, and Node's default would end the process).
 */
function reloadTls(app: FastifyInstance, config: ServerConfig, say: Say): void {
  if (config.tlsCert === undefined || config.tlsKey === undefined) {
    say('info', 'SIGHUP: nothing to reload (no --tls-cert); still serving');
    return;
  }
  try {
    (app.server as HttpsServer).setSecureContext(loadTlsFiles(config.tlsCert, config.tlsKey));
    say('info', `SIGHUP: reloaded the TLS certificate ${config.tlsCert} and key ${config.tlsKey}`);
  } catch (err) {
    say('error', `SIGHUP: ${describeError(err)}; still serving the previous certificate`);
  }
}

/**
 * Ctrl-C on `npm start` often reaches kvb twice, from the terminal (the whole process group)
 * and from npm forwarding it: the first signal during a drain is that same request, logged and
 * ignored. The next is a person who does not want to wait: it ends the drain at once, as --shutdown-timeout would.
 */
function signalHandler(serving: Serving): (signal: NodeJS.Signals) => void {
  const { app, say } = serving;
  let repeats = 0;
  return (signal) => {
    if (!serving.stopping) return void stop(serving, signal);
    if (++repeats === 1) return say('info', `received ${signal} again while draining: ignored (one more ends the drain at once)`);
    say('warn', `received ${signal} again: ending the drain now, closing the connections still open`);
    app.server.closeAllConnections();
  };
}

async function listenOrFail({ app, config, store, stoppers }: Serving): Promise<void> {
  try {
    await new Promise<void>((resolve, reject) => {
      app.server.once('error', reject);
      app.server.listen({ port: config.port, host: config.host }, () => resolve());
    });
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    await Promise.all(stoppers.map((s) => s.stop()));
    await store.close().catch(() => undefined);
    if (code === 'EADDRINUSE') return fail(`port ${config.port} is already in use (on ${config.host})`);
    if (code === 'EACCES') return fail(`no permission to listen on port ${config.port} (ports below 1024 need privileges)`);
    if (code === 'EADDRNOTAVAIL') return fail(`cannot listen on ${config.host}: no such local address`);
    return fail(`cannot listen on ${config.host}:${config.port}: ${describeError(err)}`);
  }
}

/** `--metrics-listen`: /metrics on a listener of its own. */
async function startMetricsOrFail({ app, config, store }: Serving, listen: string): Promise<HttpServer> {
  const address = parseListenAddress(listen);
  if (!address) return fail(`--metrics-listen: expected PORT or ADDR:PORT, not ${JSON.stringify(listen)}`);
  try {
    return await startMetricsListener(app, app.metricsRegistry, address, config.metricsToken);
  } catch (err) {
    await store.close().catch(() => undefined);
    return fail(`--metrics-listen: cannot listen on ${listen}: ${describeError(err)}`);
  }
}

/** The start-up lines: where kvb listens (and its metrics), and the warnings its settings earn. */
function announce({ app, config, store, metricsServer }: Serving, target: DbTarget, tls: boolean): void {
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const shownHost = config.host.includes(':') ? `[${config.host}]` : config.host;
  const where =
    target.kind === 'postgres'
      ? `postgres ${safeDbName(target.url)}`
      : `sqlite ${target.path === ':memory:' ? ':memory:' : resolve(target.path)}`;
  const scheme = tls ? 'https' : 'http';
  // Still one line: what the database offers and what kvb uses of it rides along as a field.
  app.log.info(
    { capabilities: store.flags.capabilities },
    `kvb ${VERSION} listening on ${scheme}://${shownHost}:${port} (storage: ${where})`,
  );
  if (metricsServer) {
    const bound = metricsServer.address();
    const metricsAt =
      typeof bound === 'object' && bound
        ? `${bound.family === 'IPv6' ? `[${bound.address}]` : bound.address}:${bound.port}`
        : config.metricsListen;
    app.log.info(`metrics listening on http://${metricsAt} (/metrics, /health, /ready; /metrics is not served on the API port)`);
  }
  if (store.flags.backend === 'postgres' && config.durability !== undefined) {
    app.log.warn(
      `--durability ${config.durability} applies to SQLite only and is ignored here: PostgreSQL commits as durably as its own synchronous_commit setting makes them`,
    );
  }
  if (!tls && !isLoopback(config.host)) {
    app.log.warn(
      `listening on ${shownHost} without TLS: credentials and values travel in clear text unless a proxy in front terminates TLS (or use --tls-cert and --tls-key)`,
    );
  }
}

/**
 * Creates the missing directories above a SQLite file, one level at a time, and returns them.
 * (mkdirSync's recursive mode loops forever under /proc, where mkdir answers ENOENT.)
 */
function createParentDirectories(path: string): string[] {
  const missing: string[] = [];
  let dir = dirname(resolve(path));
  for (;;) {
    try {
      if (!statSync(dir).isDirectory()) throw new Error(`${dir} is not a directory`);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      missing.unshift(dir);
      const parent = dirname(dir);
      if (parent === dir) break;
      dir = parent;
    }
  }
  for (const each of missing) {
    try {
      mkdirSync(each, { mode: 0o750 });
    } catch (err) {
      throw new Error(`cannot create directory ${each}: ${(err as NodeJS.ErrnoException).code ?? describeError(err)}`);
    }
  }
  return missing;
}

/** host:port/db of a PostgreSQL URL, without user or password. */
function safeDbName(url: string): string {
  return postgresLocation(url) ?? 'the given URL';
}
