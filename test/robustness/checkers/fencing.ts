import type { FencedWrite, Verdict } from '../history.js';

/**
 * Fencing tokens (Kleppmann's "How to do distributed locking", and etcd's lock + revision
 * compare): each lock holder writes only under a check that the lock is still held at its token,
 * the revision at which it took the lock. Taken in the order they committed (their revisions),
 * the tokens of acknowledged fenced writes therefore never decrease: once a newer holder has
 * written, a holder whose lock was taken over (paused, its lease expired) must not write again.
 * And a write under a token commits after the revision the lock was taken at.
 */
const CHECKER = 'fencing';
const MAX_DETAILS = 10;

function describeWrite(write: FencedWrite): string {
  return `holder ${write.holder} token ${write.token} rev ${write.revision} [${write.call.toFixed(1)}, ${write.ret.toFixed(1)}]`;
}

export function checkFencing(writes: FencedWrite[]): Verdict {
  const details: string[] = [];
  const committed = writes
    .filter((w) => w.outcome === 'ok' && w.revision !== undefined)
    .sort((a, b) => (a.revision as number) - (b.revision as number));
  const note = (line: string): void => {
    if (details.length < MAX_DETAILS) details.push(line);
    else if (details.length === MAX_DETAILS) details.push('… more');
  };
  let highest: FencedWrite | undefined;
  for (const write of committed) {
    // The token is the revision the lock was taken at: a write under it commits after it.
    if ((write.revision as number) <= write.token)
      note(`${describeWrite(write)} committed at or before the revision its lock was taken at`);
    if (highest !== undefined && write.token < highest.token)
      note(`${describeWrite(write)} committed after ${describeWrite(highest)} with an older token`);
    if (highest === undefined || write.token > highest.token) highest = write;
  }
  return { checker: CHECKER, result: details.length > 0 ? 'anomaly' : 'ok', details, examined: committed.length };
}
