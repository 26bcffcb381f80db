import type { Op, RecordedHistory, Verdict, WatchEvent, WatchLog } from '../history.js';
import { describeOp } from './describe-op.js';
import { CLOCK_SLACK_MS, expiryOf } from './expiry.js';
import { Details } from './watch.js';

/**
 * The watch rules that watch.ts leaves to this file, one verdict each:
 * - scoped: a watcher with a prefix, or with a temporary token (whose watch the server narrows to
 *   the token's prefix), receives no event of a key outside it; that it receives every event inside
 *   it, in order, is watch.ts's (its rules read `prefix`);
 * - expire: the sweeper's `expire` of a key comes only after a set of it that carried an expiry,
 *   with no delete or expire of it between, never before that expiry (on the server's clock, which
 *   the history's shares), at a revision of its own (no other kind of event at it); a set event
 *   of an acknowledged write names the expiry that write asked for, and none for a write without
 *   a TTL; and once the run has settled (`history.expiry`), a complete feed whose last event of a
 *   key is a set that expired more than the sweep bound before then has that key's `expire`.
 * Each is only reported when the history has what it is about (a scoped watcher; expiring writes
 * or expire events), so other scenarios print no verdict they cannot fail.
 */

const describe = (watch: WatchLog, e: WatchEvent): string =>
  `watcher ${watch.watcher} ${e.kind} ${JSON.stringify(e.key)} rev ${e.revision}${e.expiresAt === undefined ? '' : ` expiring at ${e.expiresAt.toFixed(1)}`} (received ${e.at.toFixed(1)})`;

const eventsOf = (watch: WatchLog): WatchEvent[] => watch.segments.flatMap((s) => s.events);

export function checkWatchScope(history: RecordedHistory): Verdict[] {
  const verdicts: Verdict[] = [];
  const scopedWatches = history.watches.filter((w) => w.prefix !== undefined || w.tokenPrefix !== undefined);
  if (scopedWatches.length > 0) verdicts.push(checkScoped(scopedWatches));
  const expiring = history.ops.some((op) => 'ttl' in op.input && op.input.ttl !== undefined);
  const expired = history.watches.some((w) => eventsOf(w).some((e) => e.kind === 'expire'));
  if (expiring || expired || history.expiry) verdicts.push(checkExpire(history));
  return verdicts;
}

function checkScoped(watches: WatchLog[]): Verdict {
  const details = new Details();
  let examined = 0;
  for (const watch of watches) {
    for (const event of eventsOf(watch)) {
      examined++;
      for (const [what, prefix] of [
        ['prefix', watch.prefix],
        ['token prefix', watch.tokenPrefix],
      ] as const) {
        if (prefix !== undefined && !event.key.startsWith(prefix))
          details.note(`${describe(watch, event)}: outside the watcher's ${what} ${JSON.stringify(prefix)}`);
      }
    }
  }
  return details.verdict('watch-scoped', examined);
}

function checkExpire(history: RecordedHistory): Verdict {
  const details = new Details();
  let examined = 0;
  // Acknowledged writes by revision and key: what their set events must say of the expiry.
  const writes = new Map<string, Op>();
  for (const op of history.ops) {
    const revision = op.output?.revision;
    if (op.outcome === 'ok' && revision !== undefined && (op.input.f === 'write' || op.input.f === 'cas' || op.input.f === 'create'))
      writes.set(`${revision}\u0000${op.key}`, op);
  }
  const newest = Math.max(0, ...history.watches.map((w) => w.caughtUpTo ?? 0));
  for (const watch of history.watches) {
    const last = new Map<string, WatchEvent>();
    const kindsAt = new Map<number, Set<WatchEvent['kind']>>();
    for (const event of eventsOf(watch)) {
      kindsAt.set(event.revision, (kindsAt.get(event.revision) ?? new Set()).add(event.kind));
      if (event.kind === 'set') {
        examined++;
        checkSetExpiry(watch, event, writes.get(`${event.revision}\u0000${event.key}`), details);
      } else if (event.kind === 'expire') {
        examined++;
        const before = last.get(event.key);
        // A watcher that began after 0 may not have seen the key's set: nothing to hold the expire to.
        if (before === undefined && watch.segments[0]?.since !== 0) {
          last.set(event.key, event);
          continue;
        }
        if (before === undefined || before.kind !== 'set' || before.expiresAt === undefined)
          details.note(
            `${describe(watch, event)}: the key's event before it ${before ? `(${describe(watch, before)})` : '(none)'} is not a set with an expiry`,
          );
        else if (event.at + CLOCK_SLACK_MS < before.expiresAt)
          details.note(`${describe(watch, event)}: received before the key expired (${before.expiresAt.toFixed(1)})`);
      }
      last.set(event.key, event);
    }
    for (const [revision, kinds] of kindsAt)
      if (kinds.has('expire') && kinds.size > 1)
        details.note(
          `watcher ${watch.watcher}: revision ${revision} mixes expire with ${[...kinds].filter((k) => k !== 'expire').join(', ')}`,
        );
    // Swept in time: a complete feed ends no key on a set that expired well before the run settled.
    const settled = history.expiry;
    if (settled === undefined || watch.caughtUpTo === undefined || watch.caughtUpTo < newest || watch.segments[0]?.since !== 0) continue;
    for (const event of last.values()) {
      if (event.kind === 'set' && event.expiresAt !== undefined && event.expiresAt + settled.sweepBoundMs < settled.settledAt)
        details.note(
          `${describe(watch, event)}: expired, yet no expire event followed by ${settled.settledAt.toFixed(1)} (${settled.sweepBoundMs} ms after its expiry)`,
        );
    }
  }
  return details.verdict('watch-expire', examined);
}

/** A set event of an acknowledged write carries the expiry that write asked for (within the clock's margin), or none. */
function checkSetExpiry(watch: WatchLog, event: WatchEvent, write: Op | undefined, details: Details): void {
  if (write === undefined || write.input.f === 'read' || write.input.f === 'delete' || write.input.f === 'add') return;
  const asked = expiryOf(write.input.ttl, write.output && 'expiresAt' in write.output ? write.output.expiresAt : undefined, write);
  if (asked === undefined) {
    if (event.expiresAt !== undefined) details.note(`${describe(watch, event)}: ${describeOp(write)} asked for no expiry`);
    return;
  }
  const at = event.expiresAt;
  if (at === undefined || at + CLOCK_SLACK_MS < asked.lo || at - CLOCK_SLACK_MS > asked.hi)
    details.note(
      `${describe(watch, event)}: ${describeOp(write)} asked for ttl ${write.input.ttl} s, expiring in [${asked.lo.toFixed(1)}, ${asked.hi.toFixed(1)}]`,
    );
}
