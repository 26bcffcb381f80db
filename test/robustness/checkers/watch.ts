import type { Op, Verdict, WatchEvent, WatchLog } from '../history.js';
import { describeOp } from './describe-op.js';

/**
 * The watch feed's rules, as etcd's robustness/validate checks its watch (and its API guarantees
 * page states them), one verdict each:
 * - ordered: a watcher's events come in non-decreasing revision across all its segments, a key's
 *   events in strictly increasing revision, and a resumed segment sends nothing at or below its `since`;
 * - unique: no (revision, key) arrives twice, also across a resume;
 * - atomic: the events of one revision arrive together, and a watcher that saw any event of an
 *   acknowledged request's revision saw every key that request changed (within its prefix); two
 *   watchers that saw a revision saw the same keys of it (within both prefixes);
 * - reliable (and resumable): every acknowledged change to a watched key whose revision lies after
 *   the watcher's first `since` and up to the newest revision it is known to have (its last event,
 *   or `caughtUpTo`) arrived, whichever instance each segment was on;
 * - valid: an event at an acknowledged request's revision names a key that request changed, with
 *   the kind it made (set or delete) and, for a set, the value it wrote.
 * A transaction's delete of a key is not expected in the feed: it may have been absent (no event).
 */
const MAX_DETAILS = 10;

interface Seen {
  event: WatchEvent;
  segment: number;
}

/** A verdict's details, the first few only. */
export class Details {
  readonly lines: string[] = [];
  note(line: string): void {
    if (this.lines.length < MAX_DETAILS) this.lines.push(line);
    else if (this.lines.length === MAX_DETAILS) this.lines.push('… more');
  }
  verdict(checker: string, examined: number): Verdict {
    return { checker, result: this.lines.length > 0 ? 'anomaly' : 'ok', details: this.lines, examined };
  }
}

function under(key: string, prefix: string | undefined): boolean {
  return prefix === undefined || key.startsWith(prefix);
}

function describeEvent(watch: WatchLog, seen: Seen): string {
  const { event, segment } = seen;
  const instance = watch.segments[segment]?.instance ?? '?';
  const value = event.value === undefined ? '' : ` ${JSON.stringify(event.value)}`;
  return `watcher ${watch.watcher} segment ${segment} (@${instance}) ${event.kind} ${JSON.stringify(event.key)}${value} rev ${event.revision}`;
}

/** Whether an acknowledged change must show in the feed (a multi-key request's delete may have found nothing). */
function expectedInFeed(op: Op, multiKeyGroups: ReadonlySet<number>): boolean {
  return !(op.input.f === 'delete' && op.group !== undefined && multiKeyGroups.has(op.group));
}

export function checkWatch(watches: WatchLog[], ops: Op[]): Verdict[] {
  const keysOfGroup = new Map<number, Set<string>>();
  for (const op of ops) {
    if (op.group !== undefined) keysOfGroup.set(op.group, (keysOfGroup.get(op.group) ?? new Set<string>()).add(op.key));
  }
  const multiKeyGroups = new Set([...keysOfGroup].filter(([, keys]) => keys.size > 1).map(([group]) => group));
  // Acknowledged changes by the revision they committed at.
  const changesAt = new Map<number, Op[]>();
  for (const op of ops) {
    const revision = op.output?.revision;
    if (op.outcome !== 'ok' || op.input.f === 'read' || revision === undefined || revision === 0) continue;
    changesAt.set(revision, [...(changesAt.get(revision) ?? []), op]);
  }

  const ordered = new Details();
  const unique = new Details();
  const atomic = new Details();
  const reliable = new Details();
  const valid = new Details();
  let events = 0;
  let expectedChecked = 0;
  // revision -> watcher -> keys it saw, for comparing watchers.
  const keysSeenAt = new Map<number, Map<WatchLog, Set<string>>>();

  for (const watch of watches) {
    const all: Seen[] = watch.segments.flatMap((segment, index) => segment.events.map((event) => ({ event, segment: index })));
    events += all.length;
    const seenAt = new Map<number, Set<string>>();
    const seenPairs = new Map<string, Seen>();
    const lastOfKey = new Map<string, Seen>();
    const closed = new Set<number>();
    let previous: Seen | undefined;
    let newest = -Infinity;
    const resumedPast: string[] = [];

    watch.segments.forEach((segment, index) => {
      if (index > 0 && segment.since > newest && Number.isFinite(newest)) {
        resumedPast.push(
          `segment ${index} (@${segment.instance}) resumed after ${segment.since}, past the last revision received (${newest})`,
        );
      }
      for (const event of segment.events) {
        const seen: Seen = { event, segment: index };
        const { revision, key } = event;
        if (revision <= segment.since) ordered.note(`${describeEvent(watch, seen)} is at or below the segment's since ${segment.since}`);
        if (previous !== undefined && revision < previous.event.revision) {
          ordered.note(`${describeEvent(watch, seen)} came after ${describeEvent(watch, previous)}`);
        }
        const lastKey = lastOfKey.get(key);
        if (lastKey !== undefined && revision < lastKey.event.revision) {
          ordered.note(`${describeEvent(watch, seen)} came after ${describeEvent(watch, lastKey)} of the same key`);
        }
        const pair = `${revision}\u0000${key}`;
        const twice = seenPairs.get(pair);
        if (twice !== undefined) unique.note(`${describeEvent(watch, seen)} arrived twice (first: ${describeEvent(watch, twice)})`);
        else seenPairs.set(pair, seen);
        if (previous !== undefined && previous.event.revision !== revision) closed.add(previous.event.revision);
        if (closed.has(revision)) atomic.note(`${describeEvent(watch, seen)}: revision ${revision}'s events did not arrive together`);
        seenAt.set(revision, (seenAt.get(revision) ?? new Set<string>()).add(key));
        lastOfKey.set(key, seen);
        previous = seen;
        newest = Math.max(newest, revision);
      }
    });

    // Atomic: all of an acknowledged request's keys, once any event of its revision arrived.
    for (const [revision, keys] of seenAt) {
      const byWatcher = keysSeenAt.get(revision) ?? new Map<WatchLog, Set<string>>();
      byWatcher.set(watch, keys);
      keysSeenAt.set(revision, byWatcher);
      const required = (changesAt.get(revision) ?? []).filter((op) => expectedInFeed(op, multiKeyGroups) && under(op.key, watch.prefix));
      const missing = required.filter((op) => !keys.has(op.key));
      if (missing.length > 0) {
        atomic.note(
          `watcher ${watch.watcher} saw revision ${revision} (${[...keys].map((k) => JSON.stringify(k)).join(', ')}) without ${missing.map(describeOp).join('; ')}`,
        );
      }
    }

    // Reliable: every acknowledged change in (first since, newest known].
    const first = watch.segments[0];
    if (first !== undefined) {
      const upTo = Math.max(newest, watch.caughtUpTo ?? -Infinity);
      const gaps: string[] = [];
      for (const [revision, changes] of changesAt) {
        if (revision <= first.since || revision > upTo) continue;
        for (const op of changes) {
          if (!expectedInFeed(op, multiKeyGroups) || !under(op.key, watch.prefix)) continue;
          expectedChecked++;
          if (!seenAt.get(revision)?.has(op.key))
            gaps.push(`watcher ${watch.watcher} never received revision ${revision} of ${JSON.stringify(op.key)}: ${describeOp(op)}`);
        }
      }
      if (gaps.length > 0) {
        for (const gap of gaps.sort()) reliable.note(gap);
        for (const line of resumedPast) reliable.note(`watcher ${watch.watcher}: ${line}`);
      }
    }

    // Valid: what each event at an acknowledged revision says.
    for (const seen of all) {
      const { event } = seen;
      const changes = changesAt.get(event.revision);
      if (changes === undefined) continue;
      const change = changes.find((op) => op.key === event.key);
      if (change === undefined) {
        valid.note(
          `${describeEvent(watch, seen)}: the request acknowledged at that revision changed only ${[...new Set(changes.map((op) => JSON.stringify(op.key)))].join(', ')}`,
        );
        continue;
      }
      const deleted = change.input.f === 'delete';
      if (event.kind === 'expire' || (event.kind === 'delete') !== deleted) {
        valid.note(`${describeEvent(watch, seen)} does not match ${describeOp(change)}`);
        continue;
      }
      if (event.kind === 'set' && event.value !== undefined) {
        const input = change.input;
        const written = input.f === 'add' ? change.output?.value : 'value' in input ? input.value : undefined;
        if (written !== undefined && written !== null && String(written) !== event.value) {
          valid.note(
            `${describeEvent(watch, seen)} carries another value than ${describeOp(change)} wrote (${JSON.stringify(String(written))})`,
          );
        }
      }
    }
  }

  // Atomic across watchers: the keys of one revision, within both watchers' prefixes, agree.
  for (const [revision, byWatcher] of keysSeenAt) {
    const seen = [...byWatcher];
    for (let i = 1; i < seen.length; i++) {
      const [a, aKeys] = seen[0] as [WatchLog, Set<string>];
      const [b, bKeys] = seen[i] as [WatchLog, Set<string>];
      const inBoth = (key: string): boolean => under(key, a.prefix) && under(key, b.prefix);
      const onlyA = [...aKeys].filter((k) => inBoth(k) && !bKeys.has(k));
      const onlyB = [...bKeys].filter((k) => inBoth(k) && !aKeys.has(k));
      if (onlyA.length > 0 || onlyB.length > 0) {
        atomic.note(
          `revision ${revision}: watcher ${a.watcher} saw ${[...aKeys].join(', ')} and watcher ${b.watcher} saw ${[...bKeys].join(', ')}`,
        );
      }
    }
  }

  return [
    ordered.verdict('watch-ordered', events),
    unique.verdict('watch-unique', events),
    atomic.verdict('watch-atomic', events),
    reliable.verdict('watch-reliable', expectedChecked),
    valid.verdict('watch-valid', events),
  ];
}
