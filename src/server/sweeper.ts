import type { FastifyBaseLogger } from 'fastify';
import type { Store } from '../store/store.js';

const BATCH = 1000;

/**
 * Deletes expired keys in bounded batches. Reads never depend on it (they check expiry
 * themselves); it only reclaims space. Batches yield to the event loop between them.
 */
export function startSweeper(store: Store, intervalMs: number, log: FastifyBaseLogger, watchRetentionMs = 3_600_000) {
  let running: Promise<void> | undefined;
  const sweep = async () => {
    try {
      let deleted: number;
      do {
        deleted = await store.sweepExpired(Date.now(), BATCH);
        if (deleted > 0) log.debug({ deleted }, 'swept expired keys');
        await new Promise((resolve) => setImmediate(resolve));
      } while (deleted === BATCH && timer !== undefined);
      // The watch feed's log: changes older than the retention go, each bucket's floor rising with them.
      while ((await store.pruneChanges(Date.now() - watchRetentionMs, BATCH)) === BATCH && timer !== undefined) {
        await new Promise((resolve) => setImmediate(resolve));
      }
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
