import type { Op, Verdict } from '../history.js';
import { describeOp } from './describe-op.js';

/**
 * The revision rules, across keys and instances (etcd's robustness/validate checks the same of its
 * revisions): a bucket's revision numbers its commits in commit order, so
 * - two acknowledged changes never share a revision, unless they are one multi-key request (one
 *   `group`), whose operations all carry that request's one revision;
 * - a change that began after another change (or any answer naming a revision) was acknowledged
 *   has a greater revision: commit order agrees with real time (A.ret < B.call => A.rev < B.rev);
 * - a read of a live key never goes back: its revision is at least that of every change to the
 *   key acknowledged, and of every read of the key answered, before it began, whichever instance
 *   served them (read-your-writes and monotonic reads across instances).
 * The per-key linearizability check implies part of this per key; this one also holds revisions
 * of different keys against each other, which no per-key search can.
 */
const CHECKER = 'revisions';
const MAX_DETAILS = 10;

function isChange(op: Op): boolean {
  return op.input.f !== 'read';
}

/** An acknowledged operation that named a revision (a read of an absent key names none). */
function revisionOf(op: Op): number | undefined {
  if (op.outcome !== 'ok') return undefined;
  const revision = op.output?.revision;
  return revision === undefined || revision === 0 ? undefined : revision;
}

export function checkRevisions(ops: Op[]): Verdict {
  const details: string[] = [];
  const note = (line: string): void => {
    if (details.length < MAX_DETAILS) details.push(line);
    else if (details.length === MAX_DETAILS) details.push('… more');
  };
  const named = ops.filter((op) => revisionOf(op) !== undefined);
  const changes = named.filter(isChange);

  // One revision, one request.
  const owner = new Map<number, Op>();
  const groupRevision = new Map<number, Op>();
  for (const op of changes) {
    const revision = revisionOf(op) as number;
    if (op.group !== undefined) {
      const first = groupRevision.get(op.group);
      if (first === undefined) groupRevision.set(op.group, op);
      else if (revisionOf(first) !== revision)
        note(`one request (group ${op.group}) answered two revisions: ${describeOp(first)} and ${describeOp(op)}`);
    }
    const other = owner.get(revision);
    if (other === undefined) owner.set(revision, op);
    else if (other.group === undefined || other.group !== op.group) {
      note(`two acknowledged changes share revision ${revision}: ${describeOp(other)} and ${describeOp(op)}`);
    }
  }

  // Real-time order: the greatest revision acknowledged before a change began is below its own.
  const byReturn = [...named].sort((a, b) => a.ret - b.ret);
  let cursor = 0;
  let greatest: Op | undefined;
  for (const op of [...changes].sort((a, b) => a.call - b.call)) {
    while (cursor < byReturn.length && (byReturn[cursor] as Op).ret < op.call) {
      const done = byReturn[cursor++] as Op;
      if (greatest === undefined || (revisionOf(done) as number) > (revisionOf(greatest) as number)) greatest = done;
    }
    if (
      greatest !== undefined &&
      (revisionOf(greatest) as number) >= (revisionOf(op) as number) &&
      (op.group === undefined || greatest.group !== op.group)
    ) {
      note(
        `revision ${revisionOf(op)} of ${describeOp(op)} is not above revision ${revisionOf(greatest)} of ${describeOp(greatest)}, answered before it began`,
      );
    }
  }

  // Per key: a read of a live key is at least as new as everything about the key answered before it began.
  const byKey = new Map<string, Op[]>();
  for (const op of named) {
    const list = byKey.get(op.key);
    if (list) list.push(op);
    else byKey.set(op.key, [op]);
  }
  for (const keyOps of byKey.values()) {
    const returns = [...keyOps].sort((a, b) => a.ret - b.ret);
    let at = 0;
    let newest: Op | undefined;
    for (const read of keyOps.filter((op) => !isChange(op)).sort((a, b) => a.call - b.call)) {
      while (at < returns.length && (returns[at] as Op).ret < read.call) {
        const done = returns[at++] as Op;
        if (newest === undefined || (revisionOf(done) as number) > (revisionOf(newest) as number)) newest = done;
      }
      if (newest !== undefined && (revisionOf(newest) as number) > (revisionOf(read) as number)) {
        note(`stale read: ${describeOp(read)} began after ${describeOp(newest)} was answered`);
      }
    }
  }

  return { checker: CHECKER, result: details.length > 0 ? 'anomaly' : 'ok', details, examined: named.length };
}
