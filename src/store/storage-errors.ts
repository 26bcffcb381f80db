/** Codes that mean the storage cannot be reached right now (SQLite lock contention, PostgreSQL connection loss). */
const UNAVAILABLE_CODES = new Set([
  'SQLITE_BUSY',
  'SQLITE_LOCKED',
  'SQLITE_CANTOPEN',
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  // PostgreSQL: admin/crash shutdown, cannot connect now, too many connections, and class 08 (connection exception).
  '57P01',
  '57P02',
  '57P03',
  '53300',
  '08000',
  '08001',
  '08003',
  '08004',
  '08006',
]);

/** node-postgres reports a dropped connection or an exhausted pool without a code, only in words. */
const PG_CONNECTION_MESSAGES = [
  /connection terminated/i,
  /timeout exceeded when trying to connect/i,
  /not queryable/i,
  /query read timeout/i,
  /cannot use a pool after calling end/i,
  /client was closed/i,
];

/** The storage cannot be reached; the server answers 503 `service_unavailable`. */
export class StorageUnavailableError extends Error {
  readonly code = 'KVB_STORAGE_UNAVAILABLE';
  constructor(cause: unknown) {
    super(`storage is unavailable: ${describeError(cause)}`, { cause });
    this.name = 'StorageUnavailableError';
  }
}

/** Whether a node-postgres error means the connection (not the query) failed. */
export function isPostgresConnectionError(err: unknown): boolean {
  if (err instanceof AggregateError) return err.errors.some(isPostgresConnectionError);
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && UNAVAILABLE_CODES.has(code)) return true;
  const message = (err as { message?: unknown } | null)?.message;
  return typeof message === 'string' && PG_CONNECTION_MESSAGES.some((pattern) => pattern.test(message));
}

/** Whether an error means the storage cannot be reached right now (answered as 503, not 500). */
export function isStorageUnavailable(err: unknown): boolean {
  if (err instanceof StorageUnavailableError) return true;
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && UNAVAILABLE_CODES.has(code);
}

/** One line for a person: the message, or the code when a driver left the message empty (AggregateError). */
export function describeError(err: unknown): string {
  if (err instanceof AggregateError && err.errors.length > 0) {
    return err.message || [...new Set(err.errors.map(describeError))].join('; ');
  }
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    return err.message || (typeof code === 'string' ? code : err.name);
  }
  return String(err);
}
