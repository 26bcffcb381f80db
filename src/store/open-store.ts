import type { Store } from './store.js';

export interface OpenStoreOptions {
  durability: 'normal' | 'full';
  poolSize: number;
  /** Errors no request is waiting for (PostgreSQL: an idle pooled connection died). */
  onBackgroundError?: (err: unknown) => void;
}

/** Whether a `--db` value names PostgreSQL (`postgres://` or `postgresql://`). */
export const isPostgresUrl = (url: string) => /^postgres(ql)?:\/\//i.test(url);

/**
 * Opens the store a URL names: `postgres://…` or `postgresql://…` is PostgreSQL; a file path,
 * `sqlite:PATH` or `:memory:` is SQLite. Each driver is loaded only when used.
 */
export async function openStore(url: string, options: OpenStoreOptions): Promise<Store> {
  if (isPostgresUrl(url)) {
    const { PostgresStore } = await import('./postgres-store.js');
    return PostgresStore.open({
      url,
      poolSize: options.poolSize,
      ...(options.onBackgroundError && { onBackgroundError: options.onBackgroundError }),
    });
  }
  const path = url.replace(/^sqlite:(\/\/)?/, '');
  const { SqliteStore } = await import('./sqlite-store.js');
  return SqliteStore.open({ path, durability: options.durability });
}
