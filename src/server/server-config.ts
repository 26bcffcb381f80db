import { DEFAULT_BUCKET_TTL_SECONDS, DEFAULT_DURABILITY, type Durability, MAX_VALUE_BYTES } from '../limits.js';
import type { OpenStoreOptions } from '../store/open-store.js';
/** Everything `kvb serve` can be told, after flags and environment are merged. */
export interface ServerConfig {
  port: number;
  host: string;
  /** PEM certificate chain and private key files: serve HTTPS (reloaded on SIGHUP). Both or neither. */
  tlsCert: string | undefined;
  tlsKey: string | undefined;
  /** SQLite path, `sqlite:` URL, or `postgres://` URL. */
  db: string;
  logLevel: string;
  defaultTtl: number;
  bucketCreationKey: string | undefined;
  requireSecretKey: boolean;
  corsOrigin: string;
  /** SQLite's commit durability; undefined: the default (PostgreSQL: not given, which it would ignore). */
  durability: Durability | undefined;
  sweepIntervalSeconds: number;
  poolSize: number;
  /** PostgreSQL named prepared statements: on, off (transaction poolers), or auto. */
  pgPrepare: 'on' | 'off' | 'auto';
  /** PostgreSQL: concurrent writes to a bucket are written together, one statement per batch (postgres-batch.ts); default on. */
  pgBatchWrites: boolean;
  /** Serve the web console at /console/. */
  console: boolean;
  /** Where the console's built files are (default: dist/console of this package). */
  consoleDir?: string;
  /** One info line per request (method, route, status, time, bytes, client IP, request id). */
  accessLog: boolean;
  /** Proxies whose X-Forwarded-For is believed: addresses/CIDRs (comma-separated) or a hop count. */
  trustProxy: string | undefined;
  /** `pretty` (pino-pretty, for people at a terminal) or `json` (one object per line). */
  logFormat: 'json' | 'pretty';
  /** Largest NDJSON import body in bytes; it is streamed, never held whole. */
  maxImportBytes: number;
  /** Largest value in bytes (SET body, transaction or import value); the spec's 16 KiB unless raised. */
  maxValueBytes: number;
  /** A reader that accepts no byte of a response for this long is disconnected (0: never). */
  stalledReaderTimeoutSeconds: number;
  /** Multi-page listings and exports streaming at once; more get 503 with Retry-After. */
  maxStreamedResponses: number;
  /** Watch feed: open streams per instance, seconds of changes kept, ms between `progress` events. */
  maxWatchers: number;
  watchRetentionSeconds: number;
  watchProgressMs: number;
  /** `ADDR:PORT` (or a port alone, on 127.0.0.1) of a separate listener for /metrics, /health and /ready; /metrics then leaves the API port. */
  metricsListen: string | undefined;
  /** When set, /metrics needs `Authorization: Bearer <this>` (wherever it is served). */
  metricsToken: string | undefined;
  /** Seconds a graceful shutdown waits for open requests before it closes their connections. */
  shutdownTimeoutSeconds: number;
  /**
   * Ms a connection has to send its request headers; on the TLS port, also to finish its handshake
   * (one bound for both ports, so a half-open TLS connection is not held longer than a plain one).
   */
  headersTimeoutMs: number;
  /** Draining: ms an idle connection is given to send one more request (answered with Connection: close) before it is closed. */
  drainIdleGraceMs: number;
  /** Most buckets the server holds; 0 means no limit. */
  maxBuckets: number;
  /** Per-bucket quotas: most stored keys, and most bytes (keys and values), per bucket; 0 means no limit. */
  maxKeysPerBucket: number;
  maxBytesPerBucket: number;
  /**
   * Most bytes (keys and values of the change log above the floor) of history one bucket keeps;
   * past it the sweeper drops the oldest. Undefined: the same as maxBytesPerBucket; 0: no bound.
   */
  maxHistoryBytesPerBucket: number | undefined;
  /** Bucket creations allowed per client address per window; undefined means no limit. */
  bucketCreationRate: RateLimit | undefined;
  /** Requests allowed per credential (per client address when anonymous) per window; undefined means no limit. */
  rateLimit: RateLimit | undefined;
  /**
   * Seconds a client address's unseen credentials may be expected to queue for their slow hash
   * before the excess gets 429 (the whole queue: twice this). See auth/verification-scheduler.ts.
   */
  verificationWaitSeconds: number;
  /** Webhooks may reach loopback, private and link-local addresses, over http:// too (same-host services, tests). */
  webhookAllowPrivate: boolean;
  /** A delivery not answered with a 2xx within this many seconds has failed. */
  webhookTimeoutSeconds: number;
  /** A webhook whose deliveries keep failing for this many seconds is paused. */
  webhookRetrySeconds: number;
  /** Most webhooks one bucket may have. */
  maxWebhooksPerBucket: number;
  /** Ms a webhook's lease lasts unless renewed: another instance takes over a dead one's webhooks after it. */
  webhookLeaseMs: number;
}

/** `N/WINDOW`, e.g. `100/1m`: at most `max` requests in each window of `windowMs`. */
export interface RateLimit {
  max: number;
  windowMs: number;
}

const UNIT_MS = { s: 1000, m: 60_000, h: 3_600_000 } as const;

/** Parses `N/WINDOW` (`600/1m`, `10/s`, `5000/1h`, `100/30s`); undefined when it is not one. */
export function parseRateLimit(text: string): RateLimit | undefined {
  const match = /^([1-9][0-9]{0,8})\/([1-9][0-9]{0,5})?([smh])$/.exec(text.trim());
  if (!match) return undefined;
  return { max: Number(match[1]), windowMs: Number(match[2] ?? 1) * UNIT_MS[match[3] as keyof typeof UNIT_MS] };
}

export const DEFAULT_SERVER_CONFIG: ServerConfig = {
  port: 8080,
  host: '0.0.0.0',
  tlsCert: undefined,
  tlsKey: undefined,
  db: './kvb.db',
  logLevel: 'info',
  defaultTtl: DEFAULT_BUCKET_TTL_SECONDS,
  bucketCreationKey: undefined,
  requireSecretKey: false,
  corsOrigin: '*',
  durability: undefined,
  sweepIntervalSeconds: 5,
  poolSize: 10,
  pgPrepare: 'auto',
  pgBatchWrites: true,
  console: true,
  accessLog: true,
  trustProxy: undefined,
  logFormat: 'json',
  maxImportBytes: 256 * 1024 * 1024,
  maxValueBytes: MAX_VALUE_BYTES,
  stalledReaderTimeoutSeconds: 30,
  maxStreamedResponses: 64,
  shutdownTimeoutSeconds: 10,
  metricsListen: undefined,
  metricsToken: undefined,
  drainIdleGraceMs: 1000,
  headersTimeoutMs: 15_000,
  maxBuckets: 0,
  maxKeysPerBucket: 0,
  maxBytesPerBucket: 0,
  maxHistoryBytesPerBucket: undefined,
  bucketCreationRate: undefined,
  rateLimit: undefined,
  verificationWaitSeconds: 60,
  maxWatchers: 10_000,
  watchRetentionSeconds: 3600,
  watchProgressMs: 15_000,
  webhookAllowPrivate: false,
  webhookTimeoutSeconds: 10,
  webhookRetrySeconds: 86_400,
  maxWebhooksPerBucket: 10,
  webhookLeaseMs: 30_000,
};

/** `--metrics-listen`: `PORT`, `ADDR:PORT` or `[IPv6]:PORT`; a port alone listens on loopback. */
export function parseListenAddress(text: string): { host: string; port: number } | undefined {
  const match = /^(?:(\[[0-9a-fA-F:.]+\]|[^:\s[\]]+):)?(\d{1,5})$/.exec(text.trim());
  if (!match || Number(match[2]) > 65535) return undefined;
  return { host: (match[1] ?? '127.0.0.1').replace(/^\[|\]$/g, ''), port: Number(match[2]) };
}

/** What `kvb serve`'s settings ask of the store it opens. */
export function storeOptions(config: ServerConfig): OpenStoreOptions {
  return {
    durability: config.durability ?? DEFAULT_DURABILITY,
    poolSize: config.poolSize,
    pgPrepare: config.pgPrepare,
    pgBatchWrites: config.pgBatchWrites,
    quota: { maxKeys: config.maxKeysPerBucket, maxBytes: config.maxBytesPerBucket },
  };
}
