import type { Store } from '../store/store.js';
import type { BucketCache } from './bucket-cache.js';
import type { ServerConfig } from './server-config.js';

/** What every route plugin needs: the store, the bucket cache and the server's settings. */
export interface ServerContext {
  store: Store;
  buckets: BucketCache;
  config: ServerConfig;
}
