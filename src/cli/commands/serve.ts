import { InvalidArgumentError, Option } from '@commander-js/extra-typings';
import { DEFAULT_SERVER_CONFIG, type ServerConfig, parseListenAddress, parseRateLimit } from '../../server/server-config.js';
import { parseBooleanSetting } from '../../values/boolean-setting.js';
import { DEFAULT_DURABILITY, DURABILITY_MODES, MAX_TTL_SECONDS, MAX_VALUE_BYTES, MAX_VALUE_BYTES_CEILING } from '../../limits.js';
import { defineCommand } from '../define-command.js';
import { UsageError } from '../session.js';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

function integer(min: number, max: number) {
  return (value: string) => {
    if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
      throw new InvalidArgumentError(`expected an integer from ${min} to ${max}`);
    }
    return Number(value);
  };
}

const d = DEFAULT_SERVER_CONFIG;

/** A boolean flag that an environment variable can also set, read by the one shared parser. */
function flagOrEnv(flag: true | undefined, name: string): boolean {
  if (flag) return true;
  const value = process.env[name];
  if (value === undefined || value === '') return false;
  try {
    return parseBooleanSetting(name, value);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

/** A boolean option given as a word (`--access-log off`), read by the one shared parser. */
function setting(name: string, value: string): boolean {
  try {
    return parseBooleanSetting(name, value);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

/** `kvb serve`: the only command that loads server code, and only when it runs. */
export const serve = defineCommand({
  define: (parent) =>
    parent
      .command('serve')
      .description('run the HTTP key-value bucket service')
      // Only serve's own options and exit codes: the client's global flags do not apply here.
      .configureHelp({ showGlobalOptions: false })
      .addOption(new Option('--port <n>', 'TCP port (0 picks a free one)').env('KVB_PORT').default(d.port).argParser(integer(0, 65535)))
      .addOption(new Option('--host <addr>', 'address to bind').env('KVB_HOST').default(d.host))
      .addOption(new Option('--tls-cert <file>', 'serve HTTPS with this PEM certificate (chain); reloaded on SIGHUP').env('KVB_TLS_CERT'))
      .addOption(new Option('--tls-key <file>', 'the PEM private key of --tls-cert; reloaded on SIGHUP').env('KVB_TLS_KEY'))
      .addOption(
        new Option(
          '--db <url>',
          'SQLite file (a path, sqlite:PATH or file:PATH; a missing directory is created) or a postgres:// / postgresql:// URL (several hosts: postgres://h1:5432,h2:5432/db?target_session_attrs=read-write)',
        )
          .env('KVB_DB')
          .default(d.db),
      )
      .addOption(new Option('--log-level <level>', 'log level').env('KVB_LOG_LEVEL').default(d.logLevel).choices(LOG_LEVELS))
      .addOption(
        new Option('--default-ttl <seconds>', 'TTL of buckets created without default_ttl (0 = no expiry)')
          .env('KVB_DEFAULT_TTL')
          .default(d.defaultTtl)
          .argParser(integer(0, MAX_TTL_SECONDS)),
      )
      .addOption(
        new Option('--bucket-creation-key <key>', 'require this Bearer credential to create buckets').env('KVB_BUCKET_CREATION_KEY'),
      )
      .option(
        '--require-secret-key',
        'refuse to create buckets without a secret_key (env: KVB_REQUIRE_SECRET_KEY=1/0, true/false, yes/no, on/off)',
      )
      .addOption(
        new Option('--cors-origin <origins>', "allowed CORS origins, comma-separated, or '*'").env('KVB_CORS_ORIGIN').default(d.corsOrigin),
      )
      .addOption(
        new Option('--durability <mode>', 'normal: safe on process crash; full: fsync every commit, also safe on power loss')
          .env('KVB_DURABILITY')
          .default(DEFAULT_DURABILITY)
          .choices(DURABILITY_MODES),
      )
      .addOption(
        new Option('--sweep-interval <seconds>', 'seconds between deletions of expired keys')
          .env('KVB_SWEEP_INTERVAL')
          .default(d.sweepIntervalSeconds)
          .argParser(integer(1, 86400)),
      )
      .addOption(
        new Option('--access-log <on|off>', 'one info line per request: method, route, status, time, bytes, client IP, request id').env(
          'KVB_ACCESS_LOG',
        ),
      )
      .addOption(
        new Option(
          '--trust-proxy <proxies>',
          'take the client IP from X-Forwarded-For only from these proxies: addresses/CIDRs, comma-separated, or a hop count',
        ).env('KVB_TRUST_PROXY'),
      )
      .addOption(
        new Option('--log-format <format>', 'pretty (default at a terminal) or json (default otherwise)')
          .env('KVB_LOG_FORMAT')
          .choices(['pretty', 'json'] as const),
      )
      .addOption(
        new Option('--pool-size <n>', 'PostgreSQL connection pool size')
          .env('KVB_POOL_SIZE')
          .default(d.poolSize)
          .argParser(integer(1, 1000)),
      )
      .addOption(
        new Option(
          '--pg-prepare <mode>',
          'PostgreSQL named prepared statements: on, off (needed behind a transaction pooler such as PgBouncer), or auto (off when a pooler is detected)',
        )
          .env('KVB_PG_PREPARE')
          .default(d.pgPrepare)
          .choices(['on', 'off', 'auto'] as const),
      )
      .addOption(
        new Option(
          '--pg-batch-writes <on|off>',
          'PostgreSQL: write concurrent writes to one bucket together, one statement per batch (each answered after its batch commits); off: one at a time',
        )
          .env('KVB_PG_BATCH_WRITES')
          .default('on')
          .choices(['on', 'off'] as const),
      )
      .addOption(
        new Option('--console <on|off>', 'serve the web console at /console/')
          .env('KVB_CONSOLE')
          .default('on')
          .choices(['on', 'off'] as const),
      )
      .addOption(
        new Option('--max-import-bytes <n>', 'largest NDJSON import body in bytes (streamed)')
          .env('KVB_MAX_IMPORT_BYTES')
          .default(d.maxImportBytes)
          .argParser(integer(1, Number.MAX_SAFE_INTEGER)),
      )
      .addOption(
        new Option('--max-value-bytes <n>', `largest value in bytes (default ${MAX_VALUE_BYTES}, the spec's 16 KiB)`)
          .env('KVB_MAX_VALUE_BYTES')
          .default(d.maxValueBytes)
          .argParser(integer(1, MAX_VALUE_BYTES_CEILING)),
      )
      .addOption(
        new Option('--stalled-reader-timeout <seconds>', 'disconnect a client that accepts no response byte for this long (0 = never)')
          .env('KVB_STALLED_READER_TIMEOUT')
          .default(d.stalledReaderTimeoutSeconds)
          .argParser(integer(0, 86400)),
      )
      .addOption(
        new Option('--max-streamed-responses <n>', 'multi-page listings and exports streaming at once (more get 503)')
          .env('KVB_MAX_STREAMED_RESPONSES')
          .default(d.maxStreamedResponses)
          .argParser(integer(1, 100000)),
      )
      .addOption(
        new Option(
          '--verification-wait <seconds>',
          "how long one client address's unseen credentials may queue for their slow hash before more get 429 (the whole queue: twice that)",
        )
          .env('KVB_VERIFICATION_WAIT')
          .default(d.verificationWaitSeconds)
          .argParser(integer(1, 3600)),
      )
      .option(
        '--webhook-allow-private',
        'let webhooks reach loopback, private and link-local addresses, over http:// too (env: KVB_WEBHOOK_ALLOW_PRIVATE)',
      )
      .addOption(
        new Option('--webhook-timeout <seconds>', 'a webhook delivery not answered with a 2xx within this long has failed')
          .env('KVB_WEBHOOK_TIMEOUT')
          .default(d.webhookTimeoutSeconds)
          .argParser(integer(1, 300)),
      )
      .addOption(
        new Option('--webhook-retry <seconds>', 'a webhook failing for this long is paused (retries back off exponentially until then)')
          .env('KVB_WEBHOOK_RETRY')
          .default(d.webhookRetrySeconds)
          .argParser(integer(1, 30 * 86400)),
      )
      .addOption(
        new Option('--max-webhooks-per-bucket <n>', 'most webhooks one bucket may have')
          .env('KVB_MAX_WEBHOOKS_PER_BUCKET')
          .default(d.maxWebhooksPerBucket)
          .argParser(integer(0, 1000)),
      )
      .addOption(
        new Option('--max-watchers <n>', 'open watch streams per instance (over it: 503)')
          .env('KVB_MAX_WATCHERS')
          .default(d.maxWatchers)
          .argParser(integer(1, 1_000_000)),
      )
      .addOption(
        new Option(
          '--history-retention <seconds>',
          'seconds of changes kept as history: reads at a past revision, key history, rollback, and watchers resuming (default 3600)',
        )
          .env('KVB_HISTORY_RETENTION')
          .argParser(integer(1, 31_536_000)),
      )
      .addOption(
        new Option('--watch-retention <seconds>', 'the same setting as --history-retention (its older name)')
          .env('KVB_WATCH_RETENTION')
          .argParser(integer(1, 31_536_000)),
      )
      // Limits on what one client can consume, all off by default: a single-user install needs none.
      .addOption(
        new Option('--shutdown-timeout <seconds>', 'on SIGTERM, seconds to finish open requests before closing their connections')
          .env('KVB_SHUTDOWN_TIMEOUT')
          .default(d.shutdownTimeoutSeconds)
          .argParser(integer(0, 3600)),
      )
      .addOption(
        new Option(
          '--metrics-listen <[addr:]port>',
          'serve /metrics (and /health, /ready) on this separate listener instead of the API port; a port alone means 127.0.0.1',
        )
          .env('KVB_METRICS_LISTEN')
          .argParser(listenAddress),
      )
      .addOption(new Option('--metrics-token <token>', '/metrics needs Authorization: Bearer with this token').env('KVB_METRICS_TOKEN'))
      .addOption(
        new Option('--max-buckets <n>', 'most buckets this server holds (0 = no limit)')
          .env('KVB_MAX_BUCKETS')
          .default(d.maxBuckets)
          .argParser(integer(0, 1_000_000_000)),
      )
      .addOption(
        new Option('--max-keys-per-bucket <n>', 'most keys one bucket stores; a write past it gets 507 (0 = no limit)')
          .env('KVB_MAX_KEYS_PER_BUCKET')
          .default(d.maxKeysPerBucket)
          .argParser(integer(0, 1_000_000_000_000)),
      )
      .addOption(
        new Option(
          '--max-bytes-per-bucket <bytes>',
          'most bytes (keys + values) one bucket stores; a write past it gets 507 (0 = no limit)',
        )
          .env('KVB_MAX_BYTES_PER_BUCKET')
          .default(d.maxBytesPerBucket)
          .argParser(integer(0, Number.MAX_SAFE_INTEGER)),
      )
      .addOption(
        new Option(
          '--max-history-bytes-per-bucket <bytes>',
          'most bytes of history (keys + values of changes kept for --history-retention) one bucket keeps; past it the oldest go, each sweep (default: --max-bytes-per-bucket; 0 = no limit)',
        )
          .env('KVB_MAX_HISTORY_BYTES_PER_BUCKET')
          .argParser(integer(0, Number.MAX_SAFE_INTEGER)),
      )
      .addOption(
        new Option('--bucket-creation-rate <N/WINDOW>', 'bucket creations per client address, e.g. 10/1h (default: no limit)')
          .env('KVB_BUCKET_CREATION_RATE')
          .argParser(rate),
      )
      .addOption(
        new Option('--rate-limit <N/WINDOW>', 'requests per credential (per address when anonymous), e.g. 600/1m (default: no limit)')
          .env('KVB_RATE_LIMIT')
          .argParser(rate),
      )
      .addHelpText(
        'after',
        `
Every option can also be set by the environment variable shown; a flag wins.

Examples:
  kvb serve                                  # :8080, ./kvb.db
  kvb serve --port 9000 --db /var/lib/kvb/kvb.db
  KVB_DB=postgres://kvb@db:5432/kvb kvb serve --pool-size 20
  kvb serve --db 'postgres://kvb@db1,db2/kvb?target_session_attrs=read-write'   # follows a failover
  kvb serve --console off                    # no web console at /console/
  kvb serve --tls-cert /etc/kvb/cert.pem --tls-key /etc/kvb/key.pem   # HTTPS; kill -HUP reloads them`,
      ),
  async run(options, command) {
    const config: ServerConfig = {
      ...d,
      port: options.port,
      host: options.host,
      tlsCert: options.tlsCert || undefined,
      tlsKey: options.tlsKey || undefined,
      db: options.db,
      logLevel: options.logLevel,
      defaultTtl: options.defaultTtl,
      bucketCreationKey: options.bucketCreationKey || undefined,
      requireSecretKey: flagOrEnv(options.requireSecretKey, 'KVB_REQUIRE_SECRET_KEY'),
      corsOrigin: options.corsOrigin,
      // Told apart from the default so that a setting PostgreSQL would ignore is warned about.
      durability: command.getOptionValueSource('durability') === 'default' ? undefined : options.durability,
      sweepIntervalSeconds: options.sweepInterval,
      poolSize: options.poolSize,
      pgPrepare: options.pgPrepare,
      pgBatchWrites: options.pgBatchWrites === 'on',
      console: options.console !== 'off',
      accessLog:
        options.accessLog === undefined
          ? true
          : setting(command.getOptionValueSource('accessLog') === 'env' ? 'KVB_ACCESS_LOG' : '--access-log', options.accessLog),
      trustProxy: options.trustProxy || undefined,
      logFormat: options.logFormat ?? (process.stdout.isTTY ? 'pretty' : 'json'),
      maxImportBytes: options.maxImportBytes,
      maxValueBytes: options.maxValueBytes,
      stalledReaderTimeoutSeconds: options.stalledReaderTimeout,
      maxStreamedResponses: options.maxStreamedResponses,
      shutdownTimeoutSeconds: options.shutdownTimeout,
      metricsListen: options.metricsListen,
      metricsToken: options.metricsToken || undefined,
      maxBuckets: options.maxBuckets,
      maxKeysPerBucket: options.maxKeysPerBucket,
      maxBytesPerBucket: options.maxBytesPerBucket,
      maxHistoryBytesPerBucket: options.maxHistoryBytesPerBucket,
      bucketCreationRate: options.bucketCreationRate,
      rateLimit: options.rateLimit,
      verificationWaitSeconds: options.verificationWait,
      maxWatchers: options.maxWatchers,
      webhookAllowPrivate: flagOrEnv(options.webhookAllowPrivate, 'KVB_WEBHOOK_ALLOW_PRIVATE'),
      webhookTimeoutSeconds: options.webhookTimeout,
      webhookRetrySeconds: options.webhookRetry,
      maxWebhooksPerBucket: options.maxWebhooksPerBucket,
      // Not a flag: tests shorten the 30 s lease to see a dead instance's webhooks taken over.
      webhookLeaseMs: Number(process.env.KVB_WEBHOOK_LEASE_MS) || d.webhookLeaseMs,
      watchRetentionSeconds: options.historyRetention ?? options.watchRetention ?? d.watchRetentionSeconds,
      // Not a flag: tests shorten the 15 s heartbeat.
      watchProgressMs: Number(process.env.KVB_WATCH_PROGRESS_MS) || d.watchProgressMs,
      // Not a flag either: tests lengthen the drain's grace for idle connections.
      drainIdleGraceMs: Number(process.env.KVB_DRAIN_IDLE_GRACE_MS) || d.drainIdleGraceMs,
      // Not a flag: tests shorten the 15 s bound on request headers and TLS handshakes.
      headersTimeoutMs: Number(process.env.KVB_HEADERS_TIMEOUT_MS) || d.headersTimeoutMs,
    };
    const { runServer } = await import('../../server/run-server.js');
    await runServer(config);
  },
});

function listenAddress(value: string) {
  if (!parseListenAddress(value)) throw new InvalidArgumentError('expected PORT or ADDR:PORT, e.g. 9100 or 10.0.0.5:9100');
  return value;
}

function rate(value: string) {
  const limit = parseRateLimit(value);
  if (!limit) throw new InvalidArgumentError('expected N/WINDOW, e.g. 600/1m, 10/s, 100/30s or 5000/1h');
  return limit;
}
