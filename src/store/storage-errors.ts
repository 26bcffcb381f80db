import { accessSync, constants } from 'node:fs';
import { dirname } from 'node:path';
import type { StorageFailureCode } from '../errors.js';

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
  // protocol_violation: also how PgBouncer reports a lost or unreachable server ("server conn
  // crashed?", "server login has been failing"), e.g. while the database fails over; it ends the connection.
  '08P01',
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

/** Retry-After on a 503 for unavailable storage, and on /ready's 503: a PostgreSQL failover takes a few seconds. */
export const STORAGE_RETRY_AFTER_SECONDS = '2';

/** The storage cannot be reached; the server answers 503 `service_unavailable`. */
export class StorageUnavailableError extends Error {
  readonly code = 'KVB_STORAGE_UNAVAILABLE' satisfies StorageFailureCode;
  /** The connection was lost after COMMIT was sent: the write may or may not have been applied. */
  readonly outcomeUnknown: boolean;
  constructor(cause: unknown, options: { outcomeUnknown?: boolean } = {}) {
    super(`storage is unavailable: ${describeError(cause)}`, { cause });
    this.name = 'StorageUnavailableError';
    this.outcomeUnknown = options.outcomeUnknown === true;
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

/** Connection failures that happen before a statement is sent: it cannot have been applied. */
const BEFORE_SENDING_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', '08001', '08004', '57P03', '53300']);
const BEFORE_SENDING_MESSAGES = [
  /timeout exceeded when trying to connect/i,
  /cannot use a pool after calling end/i,
  /server login has been failing/i,
];

/**
 * Whether a connection failure may have come after the server received (and committed) the
 * statement: a connection lost midway, not one that could not be made.
 */
export function mayHaveReachedServer(err: unknown): boolean {
  if (!isPostgresConnectionError(err)) return false;
  const code = (err as { code?: unknown } | null)?.code;
  const message = (err as { message?: unknown } | null)?.message;
  if (typeof code === 'string' && BEFORE_SENDING_CODES.has(code)) return false;
  return !(typeof message === 'string' && BEFORE_SENDING_MESSAGES.some((pattern) => pattern.test(message)));
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

/**
 * Why storage refuses writes for lack of room or permission, or undefined for any other error:
 * a full disk (SQLITE_FULL, PostgreSQL 53100 disk_full), a database over its size limit, or a
 * read-only database file, directory or server (SQLITE_READONLY*, PostgreSQL 25006). The server
 * answers these 507 `insufficient_storage`; reads keep working.
 */
export function storageFullReason(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return undefined;
  if (code === 'SQLITE_FULL' || code === '53100') return 'the disk holding the database is full';
  if (code.startsWith('SQLITE_READONLY')) return 'the database file or its directory is read-only';
  if (code === '25006') return 'the database server is read-only';
  return undefined;
}

/** Node's `aborted` error: the client closed the connection before its request body arrived. */
export function isClientAbort(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | null;
  return e?.code === 'ECONNRESET' && e.message === 'aborted';
}

/**
 * Why a SQLite file cannot be opened for writing, when the reason is permissions or a read-only
 * file system: SQLite itself only says "disk I/O error" or "unable to open database file".
 */
export function readOnlyReason(path: string): string | undefined {
  for (const [target, what] of [
    [path, 'the database file'],
    [dirname(path), 'the directory of the database file'],
  ] as const) {
    try {
      accessSync(target, constants.W_OK);
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code === 'EROFS') return `${what} is on a read-only file system`;
      if (code === 'EACCES' || code === 'EPERM') return `${what} is read-only for this user`;
    }
  }
  return undefined;
}
