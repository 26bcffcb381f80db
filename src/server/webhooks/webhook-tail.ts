import type { ChangeFeed, CommittedChanges } from '../../store/store.js';
import { type CarriedEvent, changeEvent } from './webhook-batch.js';

/** Most changes, and bytes of their events, one bucket's tail keeps (a webhook behind them reads the log). */
export const TAIL_MAX_CHANGES = 2_000;
export const TAIL_MAX_BYTES = 8 * 1024 * 1024;

interface Tail {
  stopWatching: () => void;
  /** The revision the kept changes follow on from; undefined: none kept (wait for the next carried commit). */
  start: number | undefined;
  /** The revision of the last commit kept. */
  last: number;
  changes: CarriedEvent[];
  bytes: number;
  /** Each active webhook's position: what every one of them has acknowledged is dropped. */
  positions: Map<string, number>;
}

/** A webhook as the tails know it. */
export interface TailedWebhook {
  id: string;
  bucket: string;
  position: number;
}

/**
 * The latest changes of each bucket with an active webhook, as a store whose commits carry them
 * (SQLite, `ChangeFeed.watch`) hands them over, each as its event's text: a delivery whose
 * changes are all here takes its batch from them instead of reading the change log, which under
 * SET load was the largest part of what a delivery cost the request thread. Only commits that follow on from each other are kept,
 * so the changes of every revision from `start` to `last` are all here: a commit to the bucket
 * that came without its changes (an import, or one before the writer knew of the watch) empties
 * the tail, and the next carried commit starts it again. Bounded: what every active webhook of the
 * bucket has acknowledged goes, and at most TAIL_MAX_CHANGES changes or TAIL_MAX_BYTES of events
 * stay whatever the webhooks do (a receiver down for a day reads the log when it is back).
 */
export class CarriedTails {
  private readonly tails = new Map<string, Tail>();

  private constructor(private readonly watch: (bucket: string) => () => void) {}

  /** Tails for a store whose commits carry their changes; undefined for one that does not (PostgreSQL). */
  static of(feed: ChangeFeed): CarriedTails | undefined {
    const { watch, onCommit } = feed;
    return watch && onCommit ? new CarriedTails((bucket) => watch.call(feed, bucket)) : undefined;
  }

  /** Keeps tails for the buckets of these webhooks (the active ones) and no others. */
  keep(webhooks: readonly TailedWebhook[]): void {
    const byBucket = new Map<string, TailedWebhook[]>();
    for (const w of webhooks) byBucket.set(w.bucket, [...(byBucket.get(w.bucket) ?? []), w]);
    for (const [bucket, tail] of this.tails) {
      if (byBucket.has(bucket)) continue;
      tail.stopWatching();
      this.tails.delete(bucket);
    }
    for (const [bucket, own] of byBucket) {
      let tail = this.tails.get(bucket);
      if (!tail) {
        tail = { stopWatching: this.watch(bucket), start: undefined, last: 0, changes: [], bytes: 0, positions: new Map() };
        this.tails.set(bucket, tail);
      }
      tail.positions = new Map(own.map((w) => [w.id, w.position]));
      this.trim(tail);
    }
  }

  /** A commit changed `buckets`; `committed` carries the changes of the watched ones it has. */
  committed(buckets: readonly string[], committed: readonly CommittedChanges[] | undefined): void {
    for (const bucket of buckets) {
      const tail = this.tails.get(bucket);
      if (!tail) continue;
      const carried = committed?.find((c) => c.bucket === bucket);
      if (!carried) {
        Object.assign(tail, { start: undefined, changes: [], bytes: 0 });
        continue;
      }
      if (tail.start === undefined || carried.from !== tail.last) Object.assign(tail, { start: carried.from, changes: [], bytes: 0 });
      for (const c of carried.changes) {
        // The event's text, made once for every webhook of the bucket; no view of the writer's reply is kept alive.
        const event = changeEvent(bucket, c);
        tail.changes.push({ revision: c.revision, key: c.key, kind: c.kind, event });
        tail.bytes += event.length;
      }
      tail.last = carried.revision;
      this.trim(tail);
    }
  }

  /** A webhook acknowledged up to `position`. */
  advanced(w: TailedWebhook): void {
    const tail = this.tails.get(w.bucket);
    if (!tail?.positions.has(w.id)) return;
    tail.positions.set(w.id, w.position);
    this.trim(tail);
  }

  /** Every change of the revisions after `after` up to `upTo`, in order, when the tail holds them all; else undefined. */
  between(bucket: string, after: number, upTo: number): CarriedEvent[] | undefined {
    const tail = this.tails.get(bucket);
    if (tail?.start === undefined || tail.start > after || tail.last < upTo) return undefined;
    return tail.changes.filter((c) => c.revision > after && c.revision <= upTo);
  }

  /** Drops whole revisions from the front: those every webhook has, then any past the bounds. */
  private trim(tail: Tail): void {
    if (tail.start === undefined) return;
    const acknowledged = Math.min(...tail.positions.values());
    let drop = 0;
    let bytes = tail.bytes;
    while (drop < tail.changes.length) {
      const revision = tail.changes[drop]!.revision;
      const over = tail.changes.length - drop > TAIL_MAX_CHANGES || bytes > TAIL_MAX_BYTES;
      if (revision > acknowledged && !over) break;
      for (; drop < tail.changes.length && tail.changes[drop]!.revision === revision; drop++) {
        bytes -= tail.changes[drop]!.event.length;
      }
      tail.start = revision;
    }
    if (drop === 0) return;
    tail.changes = tail.changes.slice(drop);
    tail.bytes = bytes;
  }
}
