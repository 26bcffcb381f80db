import type { Store } from '../store/store.js';

/** How long the readiness check waits for storage before it says not ready. */
const READY_TIMEOUT_MS = 2000;

/**
 * Whether this instance can serve writes now: the storage answers within the timeout (on
 * PostgreSQL with target_session_attrs=read-write, a writable primary answers; a standby or
 * nothing during a failover does not). Undefined when ready, else the reason for the log.
 */
export async function storageNotReady(store: Store, timeoutMs = READY_TIMEOUT_MS): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      store.ping(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('storage ping timed out')), timeoutMs);
      }),
    ]);
    return undefined;
  } catch (err) {
    return err ?? new Error('storage ping failed');
  } finally {
    clearTimeout(timer);
  }
}
