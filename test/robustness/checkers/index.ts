import type { RecordedHistory, Verdict } from '../history.js';
import { checkBank } from './bank.js';
import { checkFencing } from './fencing.js';
import { checkLinearizable } from './linearizability.js';
import { checkRevisions } from './revisions.js';
import { checkWatch } from './watch.js';

export { checkBank, checkFencing, checkLinearizable, checkRevisions, checkWatch };

/**
 * Every checker that applies to a recorded run: linearizability and the revision rules when it
 * has operations, the watch rules when it has watchers, the bank invariants and fencing when it
 * ran those workloads. Pure: no I/O, so the runner decides what to print.
 */
export function checkHistory(history: RecordedHistory, options: { budgetMs: number }): Verdict[] {
  const verdicts: Verdict[] = [];
  if (history.ops.length > 0) {
    verdicts.push(checkLinearizable(history.ops, options));
    verdicts.push(checkRevisions(history.ops));
  }
  if (history.watches.length > 0) verdicts.push(...checkWatch(history.watches, history.ops));
  if (history.bank) verdicts.push(checkBank(history.bank));
  if (history.fenced && history.fenced.length > 0) verdicts.push(checkFencing(history.fenced));
  return verdicts;
}
