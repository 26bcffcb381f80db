import { type Command, InvalidArgumentError, Option } from 'commander';
import { DEFAULT_SERVER_CONFIG, type ServerConfig } from '../../server/server-config.js';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

function integer(min: number, max: number) {
  return (value: string) => {
    if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
      throw new InvalidArgumentError(`expected an integer from ${min} to ${max}`);
    }
    return Number(value);
  };
}

/** `kvb serve`: the only command that loads server code, and only when it runs. */
export function registerServe(program: Command): void {
  const d = DEFAULT_SERVER_CONFIG;
  program
    .command('serve')
    .description('run the HTTP key-value bucket service')
    .addOption(new Option('--port <n>', 'TCP port (0 picks a free one)').env('KVB_PORT').default(d.port).argParser(integer(0, 65535)))
    .addOption(new Option('--host <addr>', 'address to bind').env('KVB_HOST').default(d.host))
    .addOption(new Option('--db <url>', 'SQLite file path, sqlite:PATH, or postgres://… URL').env('KVB_DB').default(d.db))
    .addOption(new Option('--log-level <level>', 'log level').env('KVB_LOG_LEVEL').default(d.logLevel).choices(LOG_LEVELS))
    .addOption(
      new Option('--default-ttl <seconds>', 'TTL of buckets created without default_ttl (0 = no expiry)')
        .env('KVB_DEFAULT_TTL')
        .default(d.defaultTtl)
        .argParser(integer(0, 2147483647)),
    )
    .addOption(new Option('--bucket-creation-key <key>', 'require this Bearer credential to create buckets').env('KVB_BUCKET_CREATION_KEY'))
    .addOption(new Option('--require-secret-key', 'refuse to create buckets without a secret_key').env('KVB_REQUIRE_SECRET_KEY'))
    .addOption(new Option('--cors-origin <origins>', "allowed CORS origins, comma-separated, or '*'").env('KVB_CORS_ORIGIN').default(d.corsOrigin))
    .addOption(
      new Option('--durability <mode>', 'normal: safe on process crash; full: fsync every commit')
        .env('KVB_DURABILITY')
        .default(d.durability)
        .choices(['normal', 'full']),
    )
    .addOption(
      new Option('--sweep-interval <seconds>', 'seconds between deletions of expired keys')
        .env('KVB_SWEEP_INTERVAL')
        .default(d.sweepIntervalSeconds)
        .argParser(integer(1, 86400)),
    )
    .addOption(
      new Option('--pool-size <n>', 'PostgreSQL connection pool size')
        .env('KVB_POOL_SIZE')
        .default(d.poolSize)
        .argParser(integer(1, 1000)),
    )
    .addHelpText(
      'after',
      `
Every option can also be set by the environment variable shown; a flag wins.

Examples:
  kvb serve                                  # :8080, ./kvb.db
  kvb serve --port 9000 --db /var/lib/kvb/kvb.db
  KVB_DB=postgres://kvb@db:5432/kvb kvb serve --pool-size 20`,
    )
    .action(async (options: Record<string, unknown>) => {
      const config: ServerConfig = {
        ...d,
        port: Number(options.port),
        host: String(options.host),
        db: String(options.db),
        logLevel: String(options.logLevel),
        defaultTtl: Number(options.defaultTtl),
        bucketCreationKey: (options.bucketCreationKey as string | undefined) || undefined,
        requireSecretKey: isTruthy(options.requireSecretKey),
        corsOrigin: String(options.corsOrigin),
        durability: options.durability === 'full' ? 'full' : 'normal',
        sweepIntervalSeconds: Number(options.sweepInterval),
        poolSize: Number(options.poolSize),
      };
      const { runServer } = await import('../../server/run-server.js');
      await runServer(config);
    });
}

/** `--require-secret-key` is a flag, but from the environment it arrives as text. */
function isTruthy(value: unknown): boolean {
  if (value === undefined || value === false) return false;
  if (value === true) return true;
  return !['0', 'false', 'no', 'off', ''].includes(String(value).toLowerCase());
}
