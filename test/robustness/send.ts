import { Agent, request } from 'undici';
import type { Outcome } from './history.js';

/**
 * One HTTP exchange as a robustness client sees it: an answer, or no answer. The client timeouts
 * are short on purpose: a paused instance (SIGSTOP) or a database that is gone must turn into an
 * indeterminate operation within seconds, never a hang.
 */

export const REQUEST_TIMEOUT_MS = 4000;

/** Keep-alive connections shared by every client; each client has one request open at a time. */
export const agent = new Agent({
  keepAliveTimeout: 10_000,
  connections: 64,
  connect: { timeout: 2000 },
  headersTimeout: REQUEST_TIMEOUT_MS,
  bodyTimeout: REQUEST_TIMEOUT_MS,
});

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  /** The body's exact bytes, when the request asked for them (`binary`). */
  bytes?: Buffer;
}

export type Exchange = { answer: Answer; error?: undefined } | { answer?: undefined; error: { code: string; sent: boolean } };

/**
 * Errors raised before any byte of the request can have reached the server: the connection was
 * never made. Such an operation definitely did not take effect (a fail, not an unknown).
 */
const NOT_SENT = new Set(['ECONNREFUSED', 'UND_ERR_CONNECT_TIMEOUT', 'EADDRNOTAVAIL']);

export async function send(
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string | Buffer; binary?: boolean } = {},
): Promise<Exchange> {
  try {
    const res = await request(url, {
      method: (init.method ?? 'GET') as 'GET',
      headers: init.headers,
      body: init.body,
      dispatcher: agent,
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS + 500),
    });
    if (init.binary) {
      const bytes = Buffer.from(await res.body.arrayBuffer());
      return { answer: { status: res.statusCode, headers: res.headers, text: bytes.toString('utf8'), bytes } };
    }
    const text = await res.body.text();
    return { answer: { status: res.statusCode, headers: res.headers, text } };
  } catch (err) {
    // A DOMException (our own AbortSignal.timeout) has a numeric code: its name says more.
    const e = err as { code?: unknown; name?: string; cause?: { code?: unknown } };
    const code = typeof e.code === 'string' ? e.code : typeof e.cause?.code === 'string' ? e.cause.code : (e.name ?? 'unknown');
    return { error: { code, sent: !NOT_SENT.has(code) } };
  }
}

export function header(answer: Answer, name: string): string | undefined {
  const value = answer.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** The `Kvb-Revision` of an answer, as a number (undefined when absent). */
export function revisionOf(answer: Answer): number | undefined {
  const value = header(answer, 'kvb-revision');
  return value === undefined ? undefined : Number(value);
}

/**
 * kvb's 503 when the connection was lost after COMMIT was sent (src/server/error-handling.ts):
 * only then may a refused write have been applied. Any other 503 ("storage is unavailable") comes
 * before anything was committed, so the write was not applied; the checkers hold kvb to that
 * (a write recorded as failed whose value is read later is an anomaly).
 */
const OUTCOME_UNKNOWN = /may or may not have been applied/;

/**
 * How an answer counts: 2xx ok; a 503 that says the write may or may not have been applied, and
 * any other 5xx, unknown; any other status (412, 409, 404, 429, other 4xx, a plain 503 storage
 * unavailable) definitely not applied. No answer at all is unknown, unless the request never left.
 */
export function outcomeOf(exchange: Exchange): Outcome {
  if (exchange.error) return exchange.error.sent ? 'unknown' : 'fail';
  const { status, text } = exchange.answer;
  if (status >= 200 && status < 300) return 'ok';
  if (status === 503) return OUTCOME_UNKNOWN.test(text) ? 'unknown' : 'fail';
  if (status >= 500) return 'unknown';
  return 'fail';
}

/** What ended an exchange, for the summary (`200`, `412`, `ECONNREFUSED`, …). */
export function describe(exchange: Exchange): string {
  if (exchange.error) return exchange.error.code;
  const { status, text } = exchange.answer;
  return status === 503 && OUTCOME_UNKNOWN.test(text) ? '503-outcome-unknown' : String(status);
}
