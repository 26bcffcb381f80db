import type { Store } from './store.js';

export interface OpenStoreOptions {
  durability: 'normal' | 'full';
  poolSize: number;
}

/** Opens the store a URL names: a file path, `sqlite:PATH` or `:memory:` is SQLite. */
export async function openStore(url: string, options: OpenStoreOptions): Promise<Store> {
  const path = url.replace(/^sqlite:(\/\/)?/, '');
  const { SqliteStore } = await import('./sqlite-store.js');
  return SqliteStore.open({ path, durability: options.durability });
}
