import type { FastifyBaseLogger } from 'fastify';
import type { Store } from '../store/store.js';
import type { Clock } from './clock.js';
import type { ServerConfig } from './server-config.js';

const BATCH = 1000;

/**
 * Deletes expired keys in bounded batches, every `--sweep-interval`; prunes the watch feed's log
 * past `--watch-retention`; bounds each bucket's history to --max-history-bytes-per-bucket (by
 * default the byte quota; 0: no bound). Reads never depend on it (they check expiry themselves);
 * it only reclaims space. Batches yield to the event loop between them.
 */
export function startSweeper(
  store: Store,
  config: Pick<ServerConfig, 'sweepIntervalSeconds' | 'watchRetentionSeconds' | 'maxBytesPerBucket' | 'maxHistoryBytesPerBucket'>,
  log: FastifyBaseLogger,
  clock: Clock,
) {
  const intervalMs = config.sweepIntervalSeconds * 1000;
  const watchRetentionMs = config.watchRetentionSeconds * 1000;
  const maxHistoryBytes = config.maxHistoryBytesPerBucket ?? config.maxBytesPerBucket;
  let running: Promise<void> | undefined;
  const sweep = async () => {
    try {
      let deleted: number;
      do {
        deleted = await store.maintenance.sweepExpired(clock(), BATCH);
        if (deleted > 0) log.debug({ deleted }, 'swept expired keys');
        await new Promise((resolve) => setImmediate(resolve));
      } while (deleted === BATCH && timer !== undefined);
      // The watch feed's log: changes older than the retention go, each bucket's floor rising with them.
      while ((await store.changes.prune(clock() - watchRetentionMs, BATCH)) === BATCH && timer !== undefined) {
        await new Promise((resolve) => setImmediate(resolve));
      }
      // History past its byte bound: the oldest goes, so storage stays bounded by the operator's limits.
      const bounded = await store.changes.bound(maxHistoryBytes, clock());
      if (bounded > 0) log.debug({ buckets: bounded }, 'history over its byte bound compacted');
    } catch (err) {
      log.warn({ err }, 'expiry sweep failed; will retry');
    }
  };
  let timer: NodeJS.Timeout | undefined = setInterval(() => {
    if (!running) running = sweep().finally(() => (running = undefined));
  }, intervalMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      timer = undefined;
      await running;
    },
  };
}
