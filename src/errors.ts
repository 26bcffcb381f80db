/**
 * The one table of error kinds: HTTP status, the spec's envelope message, and the
 * CLI exit code that a failure of that kind maps to.
 */
export const ERRORS = {
  bad_request: { status: 400, exitCode: 1 },
  unauthorized: { status: 401, exitCode: 3 },
  forbidden: { status: 403, exitCode: 3 },
  not_found: { status: 404, exitCode: 2 },
  method_not_allowed: { status: 405, exitCode: 1 },
  not_acceptable: { status: 406, exitCode: 1 },
  conflict: { status: 409, exitCode: 6 },
  // A read or rollback of a revision older than the bucket's history (its floor): the same exit code as a watch told to re-list.
  gone: { status: 410, exitCode: 7 },
  precondition_failed: { status: 412, exitCode: 6 },
  // Conditions of the server, not of the request: the same exit code as a 500, try again later.
  too_many_requests: { status: 429, exitCode: 5 },
  internal_error: { status: 500, exitCode: 5 },
  service_unavailable: { status: 503, exitCode: 5 },
  insufficient_storage: { status: 507, exitCode: 5 },
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
