import { Counter, Gauge, type Registry } from 'prom-client';
import type { Change, CommittedChanges, Store } from '../store/store.js';

/** Rows read from the change log per query (whole revisions; a bigger transaction is read on its own). */
const READ_LIMIT = 2000;
/** PostgreSQL: how often this instance reads new changes of the buckets it has watchers on. */
export const POLL_INTERVAL_MS = 100;

/** One open watch stream, as the hub sees it. */
export interface Watcher {
  readonly bucket: string;
  readonly prefix: string;
  /** The last revision this watcher has been brought up to (it has every change under its prefix up to here). */
  last: number;
  /** One transaction's changes under the prefix (possibly none: then only `last` moves). */
  deliver(revision: number, changes: Change[]): void;
  /** The log cannot bring this watcher further (an import raised the floor above it): end with `reset`. */
  reset(revision: number, oldest: number): void;
}

interface BucketFeed {
  /** Every change up to here has been read from the log and handed to the joined watchers. */
  last: number;
  watchers: Set<Watcher>;
  /** Reads and joins run one at a time per bucket, in order. */
  chain: Promise<void>;
  busy: boolean;
  /** Joins in progress: the feed is kept while any are. */
  joining: number;
  /** Stops the store handing this bucket's committed changes over (`ChangeFeed.watch`). */
  unwatch: (() => void) | undefined;
}

export type JoinResult =
  | { joined: true; rev: number }
  | { joined: false; reset: { rev: number; oldest: number } }
  | { joined: false; gone: true };

/**
 * One per instance. Per watched bucket it keeps one read position in the change log and fans
 * each read out to the bucket's watchers, so a thousand watchers cost one read. SQLite: the
 * store hands over each commit's changes to the watched buckets (`committed`), read from the log
 * only when it lacks some (a commit before the store knew of the watch, an import). PostgreSQL
 * (other instances write too): a poller reads every watched bucket at most every 100 ms; nothing
 * depends on LISTEN/NOTIFY.
 *
 * No gaps: a bucket's revision N+1 is numbered under the bucket row (lock on PostgreSQL, the
 * single writer on SQLite) only after N has committed, so once N+1 is visible N is too, and
 * reading `revision > last` in order never skips a revision that commits later.
 */
export class WatchHub {
  private readonly feeds = new Map<string, BucketFeed>();
  private poller: NodeJS.Timeout | undefined;
  count = 0;
  eventsSent = 0;
  resets = 0;

  constructor(private readonly store: Store) {
    if (store.changes.onCommit) store.changes.onCommit((buckets, committed) => this.committed(buckets, committed));
    else {
      this.poller = setInterval(() => this.wake([...this.feeds.keys()]), POLL_INTERVAL_MS);
      this.poller.unref();
    }
  }

  private run(feed: BucketFeed, work: () => Promise<void>): Promise<void> {
    const next = feed.chain.then(work, work);
    feed.chain = next.catch(() => {});
    return next;
  }

  /** Reads what the bucket's log has after the feed's position and hands it out. */
  private async refresh(bucket: string, feed: BucketFeed): Promise<void> {
    // An import (one revision of up to millions of keys) raises the watch floor to its revision: every
    // watcher behind it is reset (it re-lists), and the feed goes on from there without reading it.
    const bounds = await this.store.changes.bounds(bucket);
    if (!bounds) return;
    if (bounds.watchFloor > feed.last) {
      for (const w of [...feed.watchers]) {
        if (w.last < bounds.watchFloor) w.reset(bounds.revision, bounds.watchFloor);
      }
      feed.last = bounds.watchFloor;
    }
    // Only up to the revision whose floor was just checked: an import that commits between the two
    // reads (its log rows and its floor commit together) is left to the next refresh, which sees its
    // floor first. Read past it, its keys would go out as ordinary events and no watcher would be reset.
    for (;;) {
      const changes = await this.store.changes.read(bucket, feed.last, bounds.revision, READ_LIMIT);
      for (const [revision, group] of byRevision(changes)) {
        for (const w of feed.watchers) deliverTo(w, revision, group);
        feed.last = revision;
      }
      if (changes.length < READ_LIMIT) return;
    }
  }

  /** A commit changed `buckets`; `committed` has the changes of those the store knew were watched. */
  private committed(buckets: string[], committed: readonly CommittedChanges[] | undefined): void {
    const carried = new Map(committed?.map((c) => [c.bucket, c]));
    this.wake(carried.size === 0 ? buckets : buckets.filter((bucket) => !carried.has(bucket)));
    for (const c of carried.values()) {
      const feed = this.feeds.get(c.bucket);
      if (feed) void this.run(feed, () => this.deliver(c.bucket, feed, c)).catch(() => {});
    }
  }

  /** Hands a commit's changes out, when they follow on from the feed's position; else reads the log. */
  private async deliver(bucket: string, feed: BucketFeed, c: CommittedChanges): Promise<void> {
    if (c.from > feed.last) return this.refresh(bucket, feed);
    for (const [revision, group] of byRevision(c.changes)) {
      if (revision <= feed.last) continue;
      for (const w of feed.watchers) deliverTo(w, revision, group);
      feed.last = revision;
    }
    feed.last = Math.max(feed.last, c.revision);
  }

  wake(buckets: string[]): void {
    for (const bucket of buckets) {
      const feed = this.feeds.get(bucket);
      // A feed with a read already queued will see this change too.
      if (!feed || feed.busy) continue;
      feed.busy = true;
      void this.run(feed, async () => {
        feed.busy = false;
        await this.refresh(bucket, feed);
      }).catch(() => {
        // A failed read (storage down) is retried by the next wake; the position has not moved.
      });
    }
  }

  /**
   * Adds a watcher: from the bucket's current revision (`since` undefined: answers that revision,
   * for `sync`), or after `since`, replaying the retained changes first. A `since` older than the
   * log answers `reset`.
   */
  async join(w: Watcher, since: number | undefined, onJoin: (rev: number) => void): Promise<JoinResult> {
    let feed = this.feeds.get(w.bucket);
    if (!feed) {
      const bounds = await this.store.changes.bounds(w.bucket);
      if (!bounds) return { joined: false, gone: true };
      feed = this.feeds.get(w.bucket);
      if (!feed) {
        feed = { last: bounds.revision, watchers: new Set(), chain: Promise.resolve(), busy: false, joining: 0, unwatch: undefined };
        feed.unwatch = this.store.changes.watch?.(w.bucket);
        this.feeds.set(w.bucket, feed);
      }
    }
    const f = feed;
    let result: JoinResult = { joined: false, gone: true };
    this.count++;
    f.joining++;
    await this.run(f, async () => {
      await this.refresh(w.bucket, f);
      if (since === undefined) {
        w.last = f.last;
        onJoin(f.last);
      } else {
        // A `since` below the floor is reset before anything is read: the revision above it may be
        // an import's (up to millions of rows).
        const floor = await this.store.changes.bounds(w.bucket);
        if (floor && since < floor.watchFloor) {
          result = { joined: false, reset: { rev: Math.max(f.last, floor.revision), oldest: floor.watchFloor } };
          return;
        }
        // Replay after `since` up to the feed's position, then check the floor again: a prune that
        // committed before the read shows as a floor above `since` (read, then check).
        let after = since;
        const replay: Array<[number, Change[]]> = [];
        while (after < f.last) {
          const groups = byRevision(await this.store.changes.read(w.bucket, after, f.last, READ_LIMIT));
          if (groups.length === 0) break;
          replay.push(...groups);
          after = groups[groups.length - 1]![0];
        }
        const bounds = await this.store.changes.bounds(w.bucket);
        if (!bounds) {
          result = { joined: false, gone: true };
          return;
        }
        if (since < bounds.watchFloor) {
          result = { joined: false, reset: { rev: Math.max(f.last, bounds.revision), oldest: bounds.watchFloor } };
          return;
        }
        w.last = since;
        onJoin(since);
        for (const [rev, group] of replay) deliverTo(w, rev, group);
        w.last = Math.max(w.last, f.last);
      }
      f.watchers.add(w);
      result = { joined: true, rev: w.last };
    })
      .catch((err: unknown) => {
        this.count--;
        throw err;
      })
      .finally(() => {
        f.joining--;
        this.dropIfIdle(w.bucket, f);
      });
    if (!result.joined) this.count--;
    return result;
  }

  leave(w: Watcher): void {
    const feed = this.feeds.get(w.bucket);
    if (!feed?.watchers.delete(w)) return;
    this.count--;
    this.dropIfIdle(w.bucket, feed);
  }

  /** A feed with no watchers and no join under way stops being read (a later join starts afresh). */
  private dropIfIdle(bucket: string, feed: BucketFeed): void {
    if (feed.watchers.size === 0 && feed.joining === 0 && this.feeds.get(bucket) === feed) {
      this.feeds.delete(bucket);
      feed.unwatch?.();
    }
  }

  bounds(bucket: string) {
    return this.store.changes.bounds(bucket);
  }

  /** Open streams, so shutdown can end them at once. */
  private readonly open = new Set<{ close(reason: string): void }>();

  /** Set by closeAll: a stream opened after it (a watcher reconnecting on its kept-alive connection) is closed at once. */
  private closing: string | undefined;

  register(stream: { close(reason: string): void }): void {
    // Held open, it would hold the drain until its deadline; it ends with `closed` instead.
    if (this.closing !== undefined) stream.close(this.closing);
    else this.open.add(stream);
  }

  unregister(stream: { close(reason: string): void }): void {
    this.open.delete(stream);
  }

  /** Ends every stream with `closed` (SIGTERM: shutdown does not wait for watchers). */
  closeAll(reason: string): void {
    this.closing = reason;
    clearInterval(this.poller);
    for (const stream of [...this.open]) stream.close(reason);
    this.open.clear();
  }
}

export function registerWatchMetrics(registry: Registry, hub: WatchHub): void {
  new Gauge({
    name: 'kvb_watchers_open',
    help: 'Open watch streams on this instance',
    registers: [registry],
    collect() {
      this.set(hub.count);
    },
  });
  new Counter({
    name: 'kvb_watch_events_sent_total',
    help: 'Change events sent to watchers',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(hub.eventsSent);
    },
  });
  new Counter({
    name: 'kvb_watch_resets_total',
    help: 'Watch streams ended with reset (since too old, slow consumer)',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(hub.resets);
    },
  });
}

function byRevision(changes: Change[]): Array<[number, Change[]]> {
  const groups: Array<[number, Change[]]> = [];
  for (const c of changes) {
    const last = groups[groups.length - 1];
    if (last && last[0] === c.revision) last[1].push(c);
    else groups.push([c.revision, [c]]);
  }
  return groups;
}

function deliverTo(w: Watcher, revision: number, group: Change[]): void {
  if (revision <= w.last) return;
  w.deliver(
    revision,
    group.filter((c) => c.key.startsWith(w.prefix)),
  );
  w.last = revision;
}
