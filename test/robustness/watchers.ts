import { Agent, request } from 'undici';
import type { WatchEvent, WatchLog } from './history.js';
import type { Instance } from './instances.js';
import { type Recorder, fromWall, now } from './recorder.js';
import { TYPED_PREFIX, nameOfWire } from './typed-values.js';
import { sleep } from './workload.js';

/**
 * Watchers: each follows the bucket's SSE feed (`?watch=true&values=true`), records every change
 * event, and on a dropped connection (or an answer that is not 200, or a feed silent past the body
 * timeout: a paused instance) resumes with `since=<last revision>` on the next instance, as a new
 * segment. Once the run stops, each catches up to the bucket's final revision before it stops.
 */

/** A feed that sends nothing for this long is taken as stalled; under load a live feed sends far more often. */
const STALL_MS = 6000;

const watchAgent = new Agent({ keepAliveTimeout: 1000, connect: { timeout: 2000 }, headersTimeout: 3000, bodyTimeout: STALL_MS });

export interface WatchControl {
  /** Set once writes have stopped: each watcher stops when it has seen this revision. */
  finalRevision?: number;
  /** Stop regardless (the catch-up deadline passed, or the run is being torn down). */
  abort: boolean;
}

/** A watcher of part of the bucket: with `prefix=`, or with a temporary token for `tokenPrefix` (no `prefix=`: the server narrows the watch to the token's). */
export interface WatcherOptions {
  prefix?: string;
  tokenPrefix?: string;
  /** A token for `tokenPrefix`, minted afresh for each segment (a rotation or the token's expiry ends the stream with `closed`). */
  token?: (instance: Instance) => Promise<string | undefined>;
}

/** An event's value as the history names it: text as is, other JSON as its text; a typed key's by its type and bytes (typed-values.ts). */
function eventValue(d: Record<string, unknown>): string {
  if (typeof d.key === 'string' && d.key.startsWith(TYPED_PREFIX)) return nameOfWire(String(d.value_type), d.value);
  return typeof d.value === 'string' ? d.value : JSON.stringify(d.value);
}

export interface WatchStats {
  events: number;
  segments: number;
  resets: number;
  closed: number;
}

function lastRevision(log: WatchLog, since: number): number {
  const last = log.segments.at(-1)?.events.at(-1);
  return last ? last.revision : since;
}

/** Follows the feed until `control` says stop; returns when it has. */
export async function watcher(
  recorder: Recorder,
  instances: Instance[],
  bucket: string,
  first: number,
  control: WatchControl,
  stats: WatchStats,
  options: WatcherOptions = {},
): Promise<void> {
  const prefix = options.prefix ?? options.tokenPrefix;
  const log: WatchLog = {
    watcher: recorder.newClient(),
    segments: [],
    ...(prefix !== undefined && { prefix }),
    ...(options.tokenPrefix !== undefined && { tokenPrefix: options.tokenPrefix }),
  };
  recorder.watches.push(log);
  let since = 0;
  const done = () => control.abort || (control.finalRevision !== undefined && since >= control.finalRevision);
  for (let attempt = 0; !done(); attempt++) {
    const instance = instances[(first + attempt) % instances.length]!;
    const controller = new AbortController();
    const poll = setInterval(() => {
      if (done()) controller.abort();
    }, 100);
    try {
      const token = options.token ? await options.token(instance) : undefined;
      // Without its token it would watch as anonymous, the whole public bucket: wait for one.
      if (options.token && token === undefined) {
        await sleep(200);
        continue;
      }
      const prefixParam = options.prefix === undefined ? '' : `&prefix=${encodeURIComponent(options.prefix)}`;
      const res = await request(`${instance.url}/api/v1/${bucket}/?watch=true&values=true&since=${since}${prefixParam}`, {
        headers: { accept: 'text/event-stream', ...(token !== undefined && { authorization: `Bearer ${token}` }) },
        dispatcher: watchAgent,
        signal: controller.signal,
      });
      if (res.statusCode !== 200) {
        await res.body.text().catch(() => {});
        await sleep(200);
        continue;
      }
      const segment: WatchLog['segments'][number] = { instance: instance.name, since, events: [] };
      log.segments.push(segment);
      stats.segments++;
      let buffer = '';
      let ended = false;
      // One decoder for the stream: a character split between two chunks must not become two U+FFFD.
      const decoder = new TextDecoder();
      for await (const chunk of res.body) {
        buffer += decoder.decode(chunk as Buffer, { stream: true });
        let cut: number;
        while ((cut = buffer.indexOf('\n\n')) >= 0) {
          const message = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          let type = 'message';
          const data: Array<Record<string, unknown>> = [];
          for (const line of message.split('\n')) {
            if (line.startsWith('event: ')) type = line.slice(7);
            else if (line.startsWith('data: ')) data.push(JSON.parse(line.slice(6)) as Record<string, unknown>);
          }
          if (type === 'reset' || type === 'closed') {
            // reset: the feed cannot resume from here (the checker sees the gap); closed: the server is going away.
            if (type === 'reset') stats.resets++;
            else stats.closed++;
            ended = true;
            break;
          }
          const at = now();
          for (const d of data) {
            if (d.type !== 'set' && d.type !== 'delete' && d.type !== 'expire') continue;
            const event: WatchEvent = { revision: d.rev as number, key: d.key as string, kind: d.type, at };
            if (d.value !== undefined) event.value = eventValue(d);
            if (typeof d.expires_at === 'string') event.expiresAt = fromWall(Date.parse(d.expires_at));
            segment.events.push(event);
            stats.events++;
          }
          // Resume after the last whole message: a transaction's events arrive in one message.
          since = lastRevision(log, since);
        }
        if (ended || done()) break;
      }
    } catch {
      // Dropped, refused, stalled or aborted: resume elsewhere (or stop, if done).
    } finally {
      clearInterval(poll);
      controller.abort();
    }
    if (!done()) await sleep(100);
  }
  if (control.finalRevision !== undefined && since >= control.finalRevision) log.caughtUpTo = control.finalRevision;
}
