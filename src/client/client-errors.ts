import { ERRORS, EXIT_CODES, type ErrorMessage, type ExitCode, messageForStatus } from '../errors.js';

/**
 * The server answered with an error: its envelope message (`kind`), HTTP status and `detail` (the
 * envelope's reason in words, also sent as Kvb-Error-Detail). Each kind the caller can act on has
 * its own subclass, so `err instanceof PreconditionFailedError` reads like the spec.
 */
export class KvbHttpError extends Error {
  readonly kind: ErrorMessage;
  /** The CLI's exit code for this kind of failure (one table: src/errors.ts). */
  readonly exitCode: ExitCode;
  constructor(
    readonly status: number,
    kind: string | undefined,
    /** What was asked, e.g. `key "x" in bucket …`. */
    readonly subject: string,
    readonly detail: string | undefined,
    /** Response headers an error carries besides the envelope (a 412's ETag, a 429's Retry-After). */
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    const known = kind !== undefined && kind in ERRORS ? (kind as ErrorMessage) : messageForStatus(status);
    super(`${known} (${status}): ${subject}${detail && detail !== known ? `: ${detail}` : ''}`);
    this.name = 'KvbHttpError';
    this.kind = known;
    this.exitCode = ERRORS[known].exitCode;
  }
}

/** 400: the request itself is malformed (key too long, bad ttl, invalid JSON…). */
export class BadRequestError extends KvbHttpError {}
/** 401: no credential, or one that is not valid for this bucket. */
export class UnauthorizedError extends KvbHttpError {}
/** 403: a valid credential without the permission, or a key outside a token's prefix. */
export class ForbiddenError extends KvbHttpError {}
/** 404: unknown bucket or route, or an absent or expired key. */
export class NotFoundError extends KvbHttpError {}
/** 409: a transaction's checks failed (`atomic().commit()` answers it as `{ ok: false }` instead). */
export class ConflictError extends KvbHttpError {}
/** 412: a conditional write (`ifRevision`, `ifAbsent`) found the key in another state; nothing was written. */
export class PreconditionFailedError extends KvbHttpError {
  /** The key's current revision, when it is live (from the 412's ETag). */
  get currentRevision(): number | undefined {
    return revisionOf(this.headers.etag);
  }
}
/** 429: over a rate limit; `retryAfterSeconds` says when to try again. */
export class RateLimitedError extends KvbHttpError {
  get retryAfterSeconds(): number | undefined {
    return retryAfterSeconds(this.headers['retry-after']);
  }
}
/** 503 (and 502, 504): storage unreachable, too many watchers or exports, no signing key. */
export class UnavailableError extends KvbHttpError {
  get retryAfterSeconds(): number | undefined {
    return retryAfterSeconds(this.headers['retry-after']);
  }
}
/** 507: the storage is full or read-only, or the server's bucket limit is reached. */
export class InsufficientStorageError extends KvbHttpError {}
/** 410: a revision older than the bucket's history (its floor, in the `kvb-history-floor` header). */
export class GoneError extends KvbHttpError {
  get floor(): number | undefined {
    const floor = this.headers['kvb-history-floor'];
    return floor === undefined ? undefined : Number(floor);
  }
}
/** 500: the server failed unexpectedly. */
export class InternalServerError extends KvbHttpError {}

const CLASSES: Partial<Record<ErrorMessage, typeof KvbHttpError>> = {
  bad_request: BadRequestError,
  unauthorized: UnauthorizedError,
  forbidden: ForbiddenError,
  not_found: NotFoundError,
  conflict: ConflictError,
  gone: GoneError,
  precondition_failed: PreconditionFailedError,
  too_many_requests: RateLimitedError,
  service_unavailable: UnavailableError,
  insufficient_storage: InsufficientStorageError,
  internal_error: InternalServerError,
};

/** The typed error for an error answer. */
export function httpErrorFor(
  status: number,
  kind: string | undefined,
  subject: string,
  detail: string | undefined,
  headers: Record<string, string> = {},
): KvbHttpError {
  const known = kind !== undefined && kind in ERRORS ? (kind as ErrorMessage) : messageForStatus(status);
  const Class = CLASSES[known] ?? KvbHttpError;
  const err = new Class(status, known, subject, detail, headers);
  err.name = Class.name;
  return err;
}

/** No HTTP answer at all: connection refused, DNS failure, timeout, reset. */
export class KvbNetworkError extends Error {
  readonly exitCode = EXIT_CODES.unreachable;
  constructor(
    readonly url: string,
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(`cannot reach ${url} (${reason})`, options);
    this.name = 'KvbNetworkError';
  }
}

/** A call took longer than its `timeoutMs` (a network error: no complete answer came). */
export class KvbTimeoutError extends KvbNetworkError {
  constructor(url: string, timeoutMs: number) {
    super(url, `timed out after ${timeoutMs} ms`);
    this.name = 'KvbTimeoutError';
  }
}

const REASONS: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host lookup failed',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ETIMEDOUT: 'timed out',
  UND_ERR_CONNECT_TIMEOUT: 'connect timeout',
  UND_ERR_HEADERS_TIMEOUT: 'timed out waiting for the response',
  UND_ERR_BODY_TIMEOUT: 'timed out reading the response',
  UND_ERR_SOCKET: 'connection closed by the server',
  UND_ERR_CLOSED: 'connection closed',
};

/**
 * The server answered, but its certificate is not one this client trusts: no HTTP answer came, so
 * these are network failures too (Node's and undici's codes, from OpenSSL, also as fetch's `cause`).
 */
const TLS_REASONS: Record<string, string> = {
  DEPTH_ZERO_SELF_SIGNED_CERT: "TLS: the server's certificate is self-signed",
  SELF_SIGNED_CERT_IN_CHAIN: "TLS: the server's certificate chain ends in an untrusted self-signed CA",
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: "TLS: the server's certificate is signed by an unknown CA",
  UNABLE_TO_GET_ISSUER_CERT: "TLS: the server's certificate is signed by an unknown CA",
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: "TLS: the server's certificate is signed by an unknown CA",
  CERT_HAS_EXPIRED: "TLS: the server's certificate has expired",
  CERT_NOT_YET_VALID: "TLS: the server's certificate is not valid yet",
  ERR_TLS_CERT_ALTNAME_INVALID: "TLS: the server's certificate is not for this host name",
  ERR_SSL_WRONG_VERSION_NUMBER: 'TLS: the server does not speak TLS on this port (try http://)',
  // What Node's https module gives for the same: a plain-HTTP answer to a TLS ClientHello.
  EPROTO: 'TLS: the handshake failed; the server may not speak TLS on this port (try http://)',
};

/** Not a matter of trust: no CA file can fix a server that does not speak TLS. */
const NOT_TRUST = new Set(['ERR_SSL_WRONG_VERSION_NUMBER', 'EPROTO']);

/** Whether a network error is a TLS certificate the client did not trust (a CA file may fix it). */
export function isTlsTrustFailure(err: KvbNetworkError): boolean {
  const cause = err.cause as { code?: string; cause?: { code?: string } } | undefined;
  const code = cause?.code ?? cause?.cause?.code;
  return code !== undefined && code in TLS_REASONS && !NOT_TRUST.has(code);
}

/**
 * Runtimes whose fetch gives no error code, only text. Deno: a TypeError "fetch failed" whose cause
 * says "error sending request … tcp connect error: Connection refused (os error 111)" (or "dns
 * error", "connection closed before message completed"), or "Fetch failed: Requests to port 1
 * are blocked". Browsers: a bare TypeError ("Failed to fetch", "NetworkError when attempting to
 * fetch resource.", "Load failed"). Bun and Node give codes (above).
 */
const MESSAGE_REASONS: Array<[RegExp, string]> = [
  [/connection refused/i, 'connection refused'],
  [/dns error|failed to lookup address|name or service not known/i, 'host not found'],
  [/connection reset/i, 'connection reset'],
  [/connection closed|broken pipe|unexpected eof/i, 'connection closed by the server'],
  [/timed out/i, 'timed out'],
  [/^error sending request/i, 'request failed'],
  [/^fetch failed: (.+)$/i, ''],
  [
    /^(failed to fetch|networkerror when attempting to fetch resource\.?|load failed)$/i,
    'network error (the browser gives no detail: the server is unreachable or CORS refused it)',
  ],
];

function reasonFromMessage(err: Error): string | undefined {
  if (!(err instanceof TypeError)) return undefined;
  for (const text of [err.cause instanceof Error ? err.cause.message : undefined, err.message]) {
    if (text === undefined) continue;
    for (const [pattern, reason] of MESSAGE_REASONS) {
      const match = pattern.exec(text);
      if (match) return reason || match[1];
    }
  }
  return undefined;
}

/**
 * The error a failed request becomes: network failures with a known code (Node's, undici's, Bun's,
 * also as the `cause` of fetch's TypeError) or a known message (Deno's, browsers') are typed;
 * anything else passes through.
 */
export function networkErrorFor(url: string, err: unknown): unknown {
  if (!(err instanceof Error)) return err;
  const code = (err as { code?: string }).code ?? (err.cause as { code?: string } | undefined)?.code;
  if (code && code in REASONS) return new KvbNetworkError(url, REASONS[code]!, { cause: err });
  if (code && code in TLS_REASONS) return new KvbNetworkError(url, TLS_REASONS[code]!, { cause: err });
  if (code && /^E[A-Z]+$/.test(code)) return new KvbNetworkError(url, code, { cause: err });
  const reason = reasonFromMessage(err);
  if (reason) return new KvbNetworkError(url, reason, { cause: err });
  return err;
}

/** `"12"` (an ETag or Kvb-Revision) as a number. */
export function revisionOf(text: string | null | undefined): number | undefined {
  const bare = text?.replace(/^"|"$/g, '');
  return bare !== undefined && /^\d+$/.test(bare) ? Number(bare) : undefined;
}

/** Retry-After in seconds (delta-seconds or an HTTP date). */
export function retryAfterSeconds(text: string | undefined, now = Date.now()): number | undefined {
  if (text === undefined) return undefined;
  if (/^\d+$/.test(text)) return Number(text);
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, (at - now) / 1000);
}
