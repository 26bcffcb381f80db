import type { Store } from '../store/store.js';
import type { BucketCache } from './bucket-cache.js';
import type { Clock } from './clock.js';
import type { ServerConfig } from './server-config.js';
import type { WatchHub } from './watch-hub.js';

/** What every route plugin needs: the store, the bucket cache and the server's settings. */
export interface ServerContext {
  store: Store;
  buckets: BucketCache;
  config: ServerConfig;
  /** The instance's watch feed (see watch-hub.ts). */
  watch: WatchHub;
  /** Exports and imports open now on this instance (each is bounded: see export-route.ts, import-route.ts). */
  transfers: { exports: number; imports: number };
  /** What time it is for every decision by time: expiry of keys and tokens (see clock.ts). */
  clock: Clock;
}
