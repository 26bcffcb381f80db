import { describeHosts, parsePostgresHosts } from './postgres/postgres-hosts.js';
import type { Quota } from './quota.js';
import type { Store } from './store.js';
import type { Durability } from '../limits.js';

export interface OpenStoreOptions {
  durability: Durability;
  poolSize: number;
  /** PostgreSQL: named prepared statements on, off, or auto (off when a pooler is detected). */
  pgPrepare?: 'on' | 'off' | 'auto';
  /** PostgreSQL: batch concurrent writes to a bucket (postgres-batch.ts); default on. */
  pgBatchWrites?: boolean;
  /** Errors no request is waiting for (PostgreSQL: an idle pooled connection died). */
  onBackgroundError?: (err: unknown) => void;
  /** SQLite: 'own' the file (default) or 'read' it beside the server that owns it (see SqliteOptions). */
  access?: 'own' | 'read';
  /** Per-bucket quotas enforced by every write (kvb serve); none when absent. */
  quota?: Quota;
  /** SQLite: its writer thread failed; every write fails from then on (kvb serve stops). */
  onWriterFailure?: (err: Error) => void;
}

/** Whether a `--db` value names PostgreSQL (`postgres://` or `postgresql://`). */
export const isPostgresUrl = (url: string) => /^postgres(ql)?:\/\//i.test(url);

/** A PostgreSQL URL's hosts (every one of a multi-host URL) and database, without credentials; undefined if unreadable. */
export function postgresLocation(url: string): string | undefined {
  try {
    const { hosts, urlFor } = parsePostgresHosts(url);
    const first = new URL(urlFor(hosts[0]!));
    return `${hosts.length > 1 ? describeHosts(hosts) : first.host || 'localhost'}${first.pathname}`;
  } catch {
    return undefined;
  }
}

/** What a `--db` value names: a PostgreSQL URL, or a SQLite file path (`:memory:` included). */
export type DbTarget = { kind: 'postgres'; url: string } | { kind: 'sqlite'; path: string };

/**
 * Reads a `--db` value: `postgres://` and `postgresql://` URLs, `sqlite:PATH`, `file:PATH` (and
 * their `//` forms), or a plain path. Any other `scheme:` is refused rather than taken as a file
 * name (`mysql://x` used to create a directory called `mysql:`).
 */
export function parseDbTarget(value: string): DbTarget {
  if (isPostgresUrl(value)) return { kind: 'postgres', url: value };
  const prefixed = /^(sqlite|file):(\/\/)?(.*)$/i.exec(value);
  if (prefixed) {
    if (prefixed[3] === '') throw new Error(`${JSON.stringify(value)} names no file`);
    return { kind: 'sqlite', path: prefixed[3]! };
  }
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(value);
  if (scheme && value !== ':memory:') {
    throw new Error(
      `unsupported database ${JSON.stringify(`${scheme[1]}:`)}: use a file path, sqlite:PATH, file:PATH, postgres:// or postgresql://`,
    );
  }
  if (value === '') throw new Error('the database path is empty');
  return { kind: 'sqlite', path: value };
}

/**
 * Opens the store a URL names: `postgres://…` or `postgresql://…` is PostgreSQL; a file path,
 * `sqlite:PATH` or `:memory:` is SQLite. Each driver is loaded only when used.
 */
export async function openStore(url: string, options: OpenStoreOptions): Promise<Store> {
  if (isPostgresUrl(url)) {
    const { PostgresStore } = await import('./postgres/postgres-store.js');
    return PostgresStore.open({
      url,
      poolSize: options.poolSize,
      ...(options.pgPrepare && { prepare: options.pgPrepare }),
      ...(options.pgBatchWrites === false && { batchWrites: false }),
      ...(options.onBackgroundError && { onBackgroundError: options.onBackgroundError }),
      ...(options.quota && { quota: options.quota }),
    });
  }
  const target = parseDbTarget(url);
  const path = target.kind === 'sqlite' ? target.path : url;
  const { SqliteStore } = await import('./sqlite/sqlite-store.js');
  return SqliteStore.open({
    path,
    durability: options.durability,
    ...(options.access && { access: options.access }),
    ...(options.quota && { quota: options.quota }),
    ...(options.onWriterFailure && { onWriterFailure: options.onWriterFailure }),
  });
}
