import { ERRORS, type ErrorMessage, messageForStatus } from '../errors.js';

/** The server answered with an error: its envelope message, HTTP status and Kvb-Error-Detail. */
export class KvbHttpError extends Error {
  readonly kind: ErrorMessage;
  readonly exitCode: number;
  constructor(
    readonly status: number,
    kind: string | undefined,
    /** What was asked, e.g. `key "x" in bucket …`. */
    readonly subject: string,
    readonly detail: string | undefined,
  ) {
    const known = kind !== undefined && kind in ERRORS ? (kind as ErrorMessage) : messageForStatus(status);
    super(`${known} (${status}): ${subject}${detail && detail !== known ? `: ${detail}` : ''}`);
    this.name = 'KvbHttpError';
    this.kind = known;
    this.exitCode = ERRORS[known].exitCode;
  }
}

/** No HTTP answer at all: connection refused, DNS failure, timeout, reset. */
export class KvbNetworkError extends Error {
  readonly exitCode = 4;
  constructor(
    readonly url: string,
    readonly reason: string,
  ) {
    super(`cannot reach ${url} (${reason})`);
    this.name = 'KvbNetworkError';
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

/** The error a failed request becomes: network failures are typed, anything else passes through. */
export function networkErrorFor(url: string, err: unknown): unknown {
  if (!(err instanceof Error)) return err;
  const code = (err as { code?: string }).code ?? (err.cause as { code?: string } | undefined)?.code;
  if (code && code in REASONS) return new KvbNetworkError(url, REASONS[code]!);
  if (code && /^E[A-Z]+$/.test(code)) return new KvbNetworkError(url, code);
  return err;
}
