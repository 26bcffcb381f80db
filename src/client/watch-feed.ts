import { KvbHttpError } from './client-errors.js';
import type { CallOptions, KvbHttp } from './kvb-http.js';
import { type Value, type ValueType, decodeJsonValue, linesOf } from './typed-values.js';

/** A change under the watched prefix; `revision` is the bucket revision of its commit (shared by a transaction's keys). */
export type WatchEvent =
  | { type: 'set'; key: string; revision: number; valueType: ValueType; expiresAt: Date | null; /** With `values: true`. */ value?: Value }
  | { type: 'delete' | 'expire'; key: string; revision: number };

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
  // `done`: every change up to it was yielded. `current`: the revision being yielded, and its keys so far.
  let done = options.since;
  let current: number | undefined;
  const yielded = new Set<string>();
  let failures = 0;
  for (;;) {
    if (signal?.aborted) throw signal.reason;
    let body: AsyncIterable<Uint8Array>;
    try {
      body = await http.watch(bucket, { prefix: options.prefix, since: done, values: options.values }, { signal, timeoutMs: options.timeoutMs });
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
          done = line.rev;
          current = undefined;
          yielded.clear();
          continue;
        }
        if (line.type === 'reset') throw new WatchResetError(line.rev ?? 0, line.oldest, line.reason);
        if (line.type === 'closed') {
          if (/shutting down/.test(line.reason ?? '')) break;
          throw new WatchClosedError(line.reason ?? 'closed');
        }
        const rev = line.rev!;
        if (rev !== current) {
          if (current !== undefined) done = current;
          current = rev;
          yielded.clear();
        } else if (yielded.has(line.key!)) continue;
        yielded.add(line.key!);
        yield toEvent(line);
      }
    } catch (err) {
      if (err instanceof WatchResetError || err instanceof WatchClosedError || err instanceof SyntaxError) throw err;
      if (signal?.aborted) throw signal.reason;
      // The connection dropped mid-stream: reconnect below.
    }
    // The stream ended (connection lost, server restarting): resume after `done`.
    await backoff(++failures, maxBackoff, signal);
  }
}

function toEvent(line: FeedLine): WatchEvent {
  if (line.type !== 'set') return { type: line.type as 'delete' | 'expire', key: line.key!, revision: line.rev! };
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
    signal?.addEventListener('abort', () => (clearTimeout(timer), reject(signal.reason)), { once: true });
  });
}
