/*
 * The one table of failures. Each error kind has its HTTP status (the spec's envelope message is
 * its name) and the CLI exit code a failure of that kind ends in; the exit codes themselves, by
 * outcome (cli/exit-codes.ts words them for `kvb --help`, the man page and docs/cli.md); and the
 * storage failures (`KVB_*` codes on errors from src/store) with how each is answered.
 */

/** The CLI's exit codes, by outcome. */
export const EXIT_CODES = {
  success: 0,
  usage: 1,
  notFound: 2,
  refused: 3,
  unreachable: 4,
  serverError: 5,
  conflict: 6,
  tooOld: 7,
} as const;
export type ExitOutcome = keyof typeof EXIT_CODES;
export type ExitCode = (typeof EXIT_CODES)[ExitOutcome];

/** The error kinds: the HTTP status of each, and the exit code the CLI ends in when a request fails so. */
export const ERRORS = {
  bad_request: { status: 400, exitCode: EXIT_CODES.usage },
  unauthorized: { status: 401, exitCode: EXIT_CODES.refused },
  forbidden: { status: 403, exitCode: EXIT_CODES.refused },
  not_found: { status: 404, exitCode: EXIT_CODES.notFound },
  method_not_allowed: { status: 405, exitCode: EXIT_CODES.usage },
  not_acceptable: { status: 406, exitCode: EXIT_CODES.usage },
  conflict: { status: 409, exitCode: EXIT_CODES.conflict },
  // A read or rollback of a revision older than the bucket's history (its floor): the same exit code as a watch told to re-list.
  gone: { status: 410, exitCode: EXIT_CODES.tooOld },
  precondition_failed: { status: 412, exitCode: EXIT_CODES.conflict },
  // Conditions of the server, not of the request: the same exit code as a 500, try again later.
  too_many_requests: { status: 429, exitCode: EXIT_CODES.serverError },
  internal_error: { status: 500, exitCode: EXIT_CODES.serverError },
  service_unavailable: { status: 503, exitCode: EXIT_CODES.serverError },
  insufficient_storage: { status: 507, exitCode: EXIT_CODES.serverError },
} as const;

export type ErrorMessage = keyof typeof ERRORS;

export interface ErrorEnvelope {
  /** `detail` is the reason in words, the same text as the Kvb-Error-Detail header (an extension of the spec's envelope). */
  error: { code: number; message: ErrorMessage; detail: string };
}

/** An error the caller can act on; `detail` is a human-readable reason (never a secret). */
export class KvbError extends Error {
  readonly status: number;
  constructor(
    readonly kind: ErrorMessage,
    readonly detail: string = kind,
    /** Headers the error response carries besides the envelope's (a 412's current ETag). */
    readonly headers?: Record<string, string>,
  ) {
    // An expected error never shows its stack, and capturing one was a visible cost of every 404.
    // (stackTraceLimit is V8's: typed here so the client package, which includes this file, needs no @types/node.)
    const v8 = Error as ErrorConstructor & { stackTraceLimit: number };
    const limit = v8.stackTraceLimit;
    v8.stackTraceLimit = 0;
    super(detail);
    v8.stackTraceLimit = limit;
    this.name = 'KvbError';
    this.status = ERRORS[kind].status;
  }
}

export const badRequest = (detail: string) => new KvbError('bad_request', detail);

/** The envelope message for any HTTP status: statuses outside the spec's table fold into the nearest class. */
export function messageForStatus(status: number): ErrorMessage {
  for (const [message, { status: s }] of Object.entries(ERRORS)) {
    if (s === status) return message as ErrorMessage;
  }
  if (status === 503 || status === 502 || status === 504) return 'service_unavailable';
  if (status >= 500) return 'internal_error';
  return 'bad_request';
}

/** The error body: the spec's code and message, and the reason in words (at most 300 characters). */
export function envelope(kind: ErrorMessage, detail: string = kind): ErrorEnvelope {
  return { error: { code: ERRORS[kind].status, message: kind, detail: detail.slice(0, 300) } };
}

/**
 * Failures of the storage itself, by the `code` their errors carry: the error kind a request
 * meeting one is answered with (only an outage can happen while serving; the others refuse the
 * database when it is opened), and the exit code of `kvb db` and of a `kvb serve` that cannot start.
 */
export const STORAGE_FAILURES = {
  /** The storage cannot be reached right now (SQLite busy, PostgreSQL connection lost): 503, try again. */
  KVB_STORAGE_UNAVAILABLE: { kind: 'service_unavailable', exitCode: EXIT_CODES.serverError },
  /** Another process (a running kvb serve, a kvb db restore) holds the SQLite file's lock. */
  KVB_DATABASE_IN_USE: { kind: undefined, exitCode: EXIT_CODES.usage },
  /** A newer kvb migrated the database: this one would misread it. */
  KVB_DATABASE_TOO_NEW: { kind: undefined, exitCode: EXIT_CODES.usage },
  /** A SQLite file holding another application's tables. */
  KVB_FOREIGN_DATABASE: { kind: undefined, exitCode: EXIT_CODES.usage },
} as const satisfies Record<`KVB_${string}`, { kind: ErrorMessage | undefined; exitCode: ExitCode }>;
export type StorageFailureCode = keyof typeof STORAGE_FAILURES;

/** The storage failure an error carries (its `code`), or undefined for any other error. */
export function storageFailureOf(err: unknown): StorageFailureCode | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && Object.hasOwn(STORAGE_FAILURES, code) ? (code as StorageFailureCode) : undefined;
}
