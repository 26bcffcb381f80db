import type { Op, Verdict, WatchEvent, WatchLog } from '../history.js';

/**
 * History patching from the watch feed, before the linearizability search (what etcd's robustness
 * suite does in validate/patch_history.go): an indeterminate change whose effect never shows in a
 * complete feed did not happen and is removed; one whose effect shows becomes determinate, with
 * the revision of its event and a return no later than the earliest moment anyone saw that
 * revision. Long histories with hundreds of indeterminate operations then search in linear time
 * instead of running out of budget.
 *
 * Why it can never hide an anomaly: every patch only narrows what the search may do with an
 * operation that was free (optional, anywhere after its call, any revision above the last): it is
 * removed (never linearized), or it must be linearized between its call and the new return with
 * the event's revision and, for an add, the event's value. Every linearization of the patched
 * history is then one of the original history, so "ok" on the patched history is "ok" on the
 * recorded one, whatever the feed says. A wrong or incomplete feed can only make the search fail
 * (an anomaly to look at, never a false pass). That is also why a stale read after an
 * indeterminate but applied write is still caught, and caught more surely: the write can no
 * longer be placed after the read.
 *
 * Which operation made an event, assuming kvb right (so that a right kvb gets no false alarm): an
 * event on a key at revision R not claimed by an acknowledged change at R was made by one of the
 * indeterminate changes to that key that can have made it (its candidates): same kind (set or
 * delete), the same value for a write (values are unique per write, a rollback reuses an old one)
 * or the same delta for an add, a condition that held just before R (a cas's revision, a create's
 * absence), and a call before R committed, which is before `bound(R)`: the earliest receipt of
 * R or of any later revision by a watcher, or return of an answer naming such a revision. Events
 * are taken in revision order and each gets its earliest-called candidate. Candidates of one event
 * that are alike (same kind, condition and value or delta) are interchangeable: if the true maker
 * is another one, swapping the two keeps every call before its commit, so the choice is as good
 * as the truth. Where an event's candidates are not alike, the key is left as it was (a choice
 * there could be wrong, and a wrong one a false alarm). An indeterminate change that no event
 * took had no effect.
 *
 * Patching applies only when the feed is known complete: the watch rules all hold and a watcher
 * that started at revision 0 reached the final revision (`caughtUpTo`), for the keys under its
 * prefix; a key with an expiring value (a set event with `expires_at`, or an `expire`) is left
 * alone: a set over its expired, unswept value follows a set with no expire between, which the
 * rules here would take for a set over a live value. An event that no request can have made is an
 * anomaly of its own (reported by the caller with the linearizability verdict).
 */

export interface PatchResult {
  ops: Op[];
  /** Indeterminate operations made determinate from the feed. */
  resolved: number;
  /** Indeterminate operations removed: no event can be theirs. */
  dropped: number;
  /** Indeterminate changes left as they were (their key is not covered, or their event was ambiguous). */
  left: number;
  /** Events of the feed that no recorded request can have made. */
  unexplained: string[];
}

const MAX_UNEXPLAINED = 10;

interface FeedEvent {
  revision: number;
  kind: WatchEvent['kind'];
  value?: string;
  expiresAt?: number;
  /** Earliest receipt across watchers. */
  at: number;
}

function isChange(op: Op): boolean {
  return op.input.f !== 'read';
}

/**
 * The watchers whose feed is complete from the start to the final revision: they began at 0 and
 * caught up to a revision no answer or event of the run goes past (a run that could not read its
 * final revision has watchers "caught up" to less than that).
 */
function completeWatchers(ops: readonly Op[], watches: readonly WatchLog[]): WatchLog[] {
  let newest = 0;
  for (const op of ops) newest = Math.max(newest, op.outcome === 'ok' ? (op.output?.revision ?? 0) : 0);
  for (const watch of watches)
    for (const segment of watch.segments) for (const event of segment.events) newest = Math.max(newest, event.revision);
  return watches.filter((w) => w.caughtUpTo !== undefined && w.caughtUpTo >= newest && w.segments[0]?.since === 0);
}

/** Every event of complete feeds, per key, one per revision, in revision order. */
function mergedFeed(watches: readonly WatchLog[]): Map<string, FeedEvent[]> {
  const byKey = new Map<string, Map<number, FeedEvent>>();
  for (const watch of watches) {
    for (const segment of watch.segments) {
      for (const event of segment.events) {
        const events = byKey.get(event.key) ?? new Map<number, FeedEvent>();
        byKey.set(event.key, events);
        const known = events.get(event.revision);
        if (known) known.at = Math.min(known.at, event.at);
        else
          events.set(event.revision, {
            revision: event.revision,
            kind: event.kind,
            ...(event.value !== undefined && { value: event.value }),
            ...(event.expiresAt !== undefined && { expiresAt: event.expiresAt }),
            at: event.at,
          });
      }
    }
  }
  return new Map([...byKey].map(([key, events]) => [key, [...events.values()].sort((a, b) => a.revision - b.revision)]));
}

/**
 * `bound(R)`: revision R committed before this time. A commit precedes its event's receipt and
 * any answer naming it or a later revision (revisions number commits in commit order).
 */
function commitBound(ops: readonly Op[], feed: ReadonlyMap<string, FeedEvent[]>): (revision: number) => number {
  const marks: Array<[revision: number, at: number]> = [];
  for (const op of ops) {
    const revision = op.output?.revision;
    if (op.outcome === 'ok' && revision !== undefined && revision > 0) marks.push([revision, op.ret]);
  }
  for (const events of feed.values()) for (const e of events) marks.push([e.revision, e.at]);
  // Suffix minimum over revisions, searched by bisection.
  marks.sort((a, b) => a[0] - b[0]);
  const suffix = new Float64Array(marks.length + 1).fill(Infinity);
  for (let i = marks.length - 1; i >= 0; i--) suffix[i] = Math.min(suffix[i + 1] as number, (marks[i] as [number, number])[1]);
  return (revision) => {
    let lo = 0;
    let hi = marks.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((marks[mid] as [number, number])[0] < revision) lo = mid + 1;
      else hi = mid;
    }
    return suffix[lo] as number;
  };
}

/** What makes two indeterminate changes interchangeable for an event: kind, condition, and value or delta. */
function likeness(op: Op): string {
  const input = op.input;
  switch (input.f) {
    case 'write':
    case 'create':
      return `${input.f}:${input.value}`;
    case 'cas':
      return `cas:${input.rev}:${input.value}`;
    case 'delete':
      return 'delete';
    case 'add':
      return `add:${input.delta}`;
    case 'read':
      return 'read';
  }
}

function counterNumber(event: FeedEvent | undefined): number {
  if (event === undefined || event.kind !== 'set') return 0;
  return Number(event.value);
}

/** Can `op` have made `event`, given the event before it on the key? */
function canMake(op: Op, event: FeedEvent, before: FeedEvent | undefined): boolean {
  const input = op.input;
  const liveBefore = before !== undefined && before.kind === 'set';
  if (event.kind === 'delete') return input.f === 'delete' && liveBefore;
  if (event.kind !== 'set') return false;
  switch (input.f) {
    case 'write':
      return event.value === input.value;
    case 'create':
      return event.value === input.value && !liveBefore;
    case 'cas':
      return event.value === input.value && liveBefore && before.revision === input.rev;
    case 'add':
      return Number(event.value) - counterNumber(before) === input.delta;
    default:
      return false;
  }
}

export function patchFromFeed(
  ops: readonly Op[],
  watches: readonly WatchLog[],
  watchVerdicts: readonly Verdict[],
): PatchResult | undefined {
  const complete = completeWatchers(ops, watches);
  if (complete.length === 0 || watchVerdicts.some((v) => v.result !== 'ok')) return undefined;
  const feed = mergedFeed(complete);
  const bound = commitBound(ops, feed);
  const covered = (key: string) => complete.some((w) => w.prefix === undefined || key.startsWith(w.prefix));

  const byKey = new Map<string, Op[]>();
  for (const op of ops) {
    if (!isChange(op)) continue;
    const list = byKey.get(op.key);
    if (list) list.push(op);
    else byKey.set(op.key, [op]);
  }

  const replaced = new Map<Op, Op | null>();
  const unexplained: string[] = [];
  let left = 0;
  for (const [key, changes] of byKey) {
    // Keys with no indeterminate change are still read through, for events no request explains.
    const pending = changes.filter((op) => op.outcome === 'unknown');
    const events = feed.get(key) ?? [];
    if (!covered(key) || events.some((e) => e.kind === 'expire' || e.expiresAt !== undefined)) {
      left += pending.length;
      continue;
    }
    const claimed = new Set(
      changes.flatMap((op) => (op.outcome === 'ok' && op.output?.revision !== undefined ? [op.output.revision] : [])),
    );
    const free = new Set(pending);
    const made = new Map<Op, Op>();
    let ambiguous = false;
    events.forEach((event, i) => {
      if (ambiguous || claimed.has(event.revision)) return;
      const before = events[i - 1];
      const limit = bound(event.revision);
      const candidates = [...free].filter((op) => op.call < limit && canMake(op, event, before));
      if (candidates.length === 0) {
        if (unexplained.length < MAX_UNEXPLAINED) {
          unexplained.push(
            `key ${JSON.stringify(key)}: the watch feed shows a ${event.kind}${event.value === undefined ? '' : ` of ${JSON.stringify(event.value)}`} at revision ${event.revision} (seen at ${event.at.toFixed(1)}) that no request can have made`,
          );
        }
        return;
      }
      if (new Set(candidates.map(likeness)).size > 1) {
        ambiguous = true;
        return;
      }
      const maker = candidates.reduce((a, b) => (b.call < a.call ? b : a));
      free.delete(maker);
      const output = maker.input.f === 'add' ? { value: Number(event.value), revision: event.revision } : { revision: event.revision };
      made.set(maker, { ...maker, outcome: 'ok', ret: Math.max(maker.call, limit), output });
    });
    if (ambiguous) {
      left += pending.length;
      continue;
    }
    for (const [op, patch] of made) replaced.set(op, patch);
    for (const op of free) replaced.set(op, null);
  }

  let resolved = 0;
  let dropped = 0;
  const patched: Op[] = [];
  for (const op of ops) {
    const patch = replaced.get(op);
    if (patch === undefined) patched.push(op);
    else if (patch === null) dropped++;
    else {
      resolved++;
      patched.push(patch);
    }
  }
  return { ops: patched, resolved, dropped, left, unexplained };
}
