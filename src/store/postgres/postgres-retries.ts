import { StorageUnavailableError, isPostgresConnectionError } from '../storage-errors.js';

/** Serialization failures and deadlock victims: PostgreSQL rolled the whole statement or transaction back. */
const RETRYABLE = new Set(['40001', '40P01']);
/**
 * read_only_sql_transaction: the connection reached a server that no longer takes writes (a
 * primary demoted by a failover), or a read was answered by a standby (postgres-primary-reads.ts).
 * Nothing was written; the work is re-run once on a fresh connection, which finds the new primary
 * (see postgres-hosts.ts).
 */
export const READ_ONLY = '25006';
const READ_ONLY_ATTEMPTS = 2;
export const MAX_ATTEMPTS = 8;

export const errorCode = (err: unknown) => (err as { code?: unknown } | null)?.code;
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Turns a lost connection, refused connection or pool timeout into the one error the server answers with 503. */
export function storageError(err: unknown): unknown {
  if (err instanceof StorageUnavailableError) return err;
  return isPostgresConnectionError(err) ? new StorageUnavailableError(err) : err;
}

/**
 * The one place that re-runs work PostgreSQL rolled back as a serialization failure (40001) or
 * deadlock victim (40P01), with jittered exponential backoff. Safe because such an error means
 * the whole statement or transaction had no effect: each operation still applies exactly once.
 * A lost connection is not retried (whether the commit happened is unknown).
 */
export async function withRetries<T>(run: () => Promise<T>, maxAttempts = MAX_ATTEMPTS): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (err) {
      const code = errorCode(err);
      const readOnly = code === READ_ONLY || (err instanceof StorageUnavailableError && errorCode(err.cause) === READ_ONLY);
      if (readOnly && attempt < READ_ONLY_ATTEMPTS) continue;
      if (typeof code !== 'string' || !RETRYABLE.has(code) || attempt >= maxAttempts) throw err;
      await sleep(Math.random() * Math.min(200, 2 ** attempt * 5));
    }
  }
}
