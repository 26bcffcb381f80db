import type { ChangeKind } from '../values/change-kind.js';
import { KvbHttpError } from './client-errors.js';
import type { CallOptions, KvbHttp } from './kvb-http.js';
import { type Value, type ValueType, decodeJsonValue, linesOf } from './typed-values.js';

/** A change under the watched prefix; `revision` is the bucket revision of its commit (shared by a transaction's keys). */
export type WatchEvent =
  | { type: 'set'; key: string; revision: number; valueType: ValueType; expiresAt: Date | null /** With `values: true`. */; value?: Value }
  | { type: Exclude<ChangeKind, 'set'>; key: string; revision: number };

export interface WatchOptions extends CallOptions {
  prefix?: string | undefined;
  /** Start after this revision (every retained change since); without it, from now. */
  since?: number | undefined;
  /** Include each set's value. */
  values?: boolean | undefined;
  /** Longest wait between reconnection attempts, in ms. Default 10000. */
  maxBackoffMs?: number | undefined;
}

/** The server no longer holds the changes after the resume point: list again, then watch from the listing's revision. */
export class WatchResetError extends Error {
  constructor(
    /** The bucket's current revision. */
    readonly revision: number,
    /** The oldest `since` that still resumes, when the log was pruned or an import reset it. */
    readonly oldest: number | undefined,
    readonly reason: string | undefined,
  ) {
    super(`the watch was reset at revision ${revision}${reason ? `: ${reason}` : ''}; list again and watch from the listing's revision`);
    this.name = 'WatchResetError';
  }
}

/** The server ended the watch for good: the credential stopped being valid, or the bucket was deleted. */
export class WatchClosedError extends Error {
  constructor(readonly reason: string) {
    super(`the server ended the watch: ${reason}`);
    this.name = 'WatchClosedError';
  }
}

interface FeedLine {
  type: string;
  key?: string;
  rev?: number;
  value?: unknown;
  value_type?: ValueType;
  expires_at?: string | null;
  reason?: string;
  oldest?: number;
}

/**
 * Where a watch resumes after a dropped connection. Every change up to `since` was delivered
 * whole; of the revision being delivered (a transaction's lines share one), the keys already
 * given are skipped when the resumed feed replays it: nothing missed, nothing twice.
 */
export class ResumePoint {
  private current: number | undefined;
  private readonly given = new Set<string>();
  constructor(public since: number | undefined) {}

  /** A sync or progress line: every change up to `rev` is delivered. */
  reached(rev: number): void {
    this.since = rev;
    this.current = undefined;
    this.given.clear();
  }

  /** After a cut: resume at the start of the revision being delivered (its given keys stay skipped). */
  cut(): void {
    if (this.current !== undefined) this.since = this.current - 1;
  }

  /** A change line: true when it is to be delivered, false when a replay already gave it. */
  fresh(rev: number, key: string): boolean {
    if (rev !== this.current) {
      if (this.current !== undefined) this.since = this.current;
      this.current = rev;
      this.given.clear();
    } else if (this.given.has(key)) return false;
    this.given.add(key);
    return true;
  }
}

/** Statuses worth reconnecting after: the server is there but busy or between instances. */
const TRANSIENT = new Set([429, 502, 503, 504]);

/**
 * The change feed as an async iterator. After a dropped connection (or a server restart) it
 * reconnects with backoff and resumes after the last revision it yielded completely, skipping the
 * keys of a half-yielded transaction it already gave: nothing missed, nothing twice.
 */
export async function* watchFeed(http: KvbHttp, bucket: string, options: WatchOptions): AsyncGenerator<WatchEvent, void, undefined> {
  const { signal } = options;
  const maxBackoff = options.maxBackoffMs ?? 10_000;
  const resume = new ResumePoint(options.since);
  let failures = 0;
  for (;;) {
    if (signal?.aborted) throw signal.reason;
    let body: AsyncIterable<Uint8Array>;
    try {
      body = await http.watch(
        bucket,
        { prefix: options.prefix, since: resume.since, values: options.values },
        { signal, timeoutMs: options.timeoutMs },
      );
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      if (err instanceof KvbHttpError && !TRANSIENT.has(err.status)) throw err;
      await backoff(++failures, maxBackoff, signal);
      continue;
    }
    try {
      for await (const text of linesOf(body)) {
        failures = 0;
        const line = JSON.parse(text) as FeedLine;
        if (line.type === 'sync' || line.type === 'progress') {
          resume.reached(line.rev!);
          continue;
        }
        if (line.type === 'reset') throw new WatchResetError(line.rev ?? 0, line.oldest, line.reason);
        if (line.type === 'closed') {
          if (/shutting down/.test(line.reason ?? '')) break;
          throw new WatchClosedError(line.reason ?? 'closed');
        }
        if (resume.fresh(line.rev!, line.key!)) yield toEvent(line);
      }
    } catch (err) {
      if (err instanceof WatchResetError || err instanceof WatchClosedError || err instanceof SyntaxError) throw err;
      if (signal?.aborted) throw signal.reason;
      // The connection dropped mid-stream: reconnect below.
    }
    // The stream ended (connection lost, server restarting): resume after `resume.since`.
    await backoff(++failures, maxBackoff, signal);
  }
}

function toEvent(line: FeedLine): WatchEvent {
  if (line.type !== 'set') return { type: line.type as Exclude<ChangeKind, 'set'>, key: line.key!, revision: line.rev! };
  const event: WatchEvent = {
    type: 'set',
    key: line.key!,
    revision: line.rev!,
    valueType: line.value_type!,
    expiresAt: line.expires_at ? new Date(line.expires_at) : null,
  };
  // int64 comes as a decimal string: exact.
  if ('value' in line) event.value = decodeJsonValue(line.value_type!, line.value);
  return event;
}

function backoff(failures: number, maxMs: number, signal: AbortSignal | undefined): Promise<void> {
  const ms = Math.min(maxMs, 100 * 2 ** Math.min(failures - 1, 8)) * (0.5 + Math.random() / 2);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}
