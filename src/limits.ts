/*
 * The service's limits, defaults and vocabularies, each stated once. The server's checks, the
 * request schemas (and so the OpenAPI document), the CLI's flag parsers, the console and the
 * client import them from here; test/unit/limits.test.ts checks that the docs and the man page
 * state the same numbers. Pure constants: the client package and the browser console bundle it.
 */

/** The spec's key limit: 1 to 128 bytes of UTF-8 after percent-decoding. */
export const MAX_KEY_BYTES = 128;
/** The spec's value limit (16 KiB): the default of `kvb serve --max-value-bytes`, which may raise it. */
export const MAX_VALUE_BYTES = 16 * 1024;
/** The most `--max-value-bytes` may be: a value is held whole in memory, and a transaction holds many. */
export const MAX_VALUE_BYTES_CEILING = 16 * 1024 * 1024;

/** The largest TTL (and token lifetime) in seconds: the largest signed 32-bit integer. */
export const MAX_TTL_SECONDS = 2147483647;
/** The spec's hosted default bucket TTL: a bucket created without `default_ttl` gets this (`kvb serve --default-ttl`). */
export const DEFAULT_BUCKET_TTL_SECONDS = 604800;

/** The spec's default list `limit`. */
export const DEFAULT_LIST_LIMIT = 10000;
/** The largest list `limit` one request may ask for (the answer streams, in pages). */
export const MAX_LIST_LIMIT = 1_000_000;
/** Most items (keys and folders) in one `delimiter` listing answer; more follow by cursor. Bounded so the answer is built in memory. */
export const MAX_FOLDER_ITEMS = 10_000;
/** A key's history pages: `limit` when none is given, and the most one page may hold. */
export const HISTORY_PAGE_DEFAULT = 100;
export const HISTORY_PAGE_MAX = 1000;

/** Most operations in one transaction (and so keys in one `kvb get A B …`, or one console bulk delete). */
export const MAX_TXN_OPS = 1000;
/**
 * Most keys the prefix deletes of one transaction remove together, in its one revision; past it
 * the transaction is refused (400), nothing written. The bound is the transaction's, not each
 * operation's: 1,000 prefix deletes of 50,000 keys each would otherwise be 50 million deletes.
 */
export const MAX_PREFIX_DELETE_KEYS = 50_000;

/** A temporary token's permissions, as the spec names them. */
export const PERMISSIONS = ['read', 'write', 'enumerate', 'delete'] as const;
export type Permission = (typeof PERMISSIONS)[number];

/** The five stored value types, as named in the Kvb-Type header and the database. */
export const VALUE_TYPES = ['json', 'text', 'int64', 'float64', 'bytes'] as const;
export type ValueType = (typeof VALUE_TYPES)[number];

/**
 * How a SQLite commit is made durable: `normal` (WAL, synchronous=NORMAL) survives the process
 * crashing; `full` fsyncs every group commit and survives a power cut too. PostgreSQL commits as
 * durably as its own `synchronous_commit` makes them, so the setting does not apply there.
 */
export const DURABILITY_MODES = ['normal', 'full'] as const;
export type Durability = (typeof DURABILITY_MODES)[number];
/** What a SQLite store commits with when nobody chose (docs/operations.md, "Durability", has the measured cost of `full`). */
export const DEFAULT_DURABILITY: Durability = 'normal';
