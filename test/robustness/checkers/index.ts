import type { RecordedHistory, Verdict } from '../history.js';
import { checkBank } from './bank.js';
import { checkCredentials } from './credentials.js';
import { checkWatchScope } from './watch-scope.js';
import { checkFencing } from './fencing.js';
import { type LinearizabilityOptions, checkLinearizable } from './linearizability.js';
import { type PatchResult, patchFromFeed } from './patch.js';
import { boundByProcessLives } from './process-lives.js';
import { checkRevisions } from './revisions.js';
import { checkWatch } from './watch.js';
import { checkWebhooks } from './webhooks.js';

export { checkBank, checkFencing, checkLinearizable, checkRevisions, checkWatch, checkWebhooks, patchFromFeed };

/**
 * Every checker that applies to a recorded run: linearizability and the revision rules when it
 * has operations, the watch rules when it has watchers, the bank invariants and fencing when it
 * ran those workloads, the webhook rules when it had subscriptions. Linearizability searches the history patched from the watch feed when that
 * feed is known complete (patch.ts), its indeterminate operations bounded by the death of the
 * process that took them where that is known (process-lives.ts); the other checkers read the
 * history as recorded. Pure: no
 * I/O, so the runner decides what to print.
 */
export function checkHistory(history: RecordedHistory, options: LinearizabilityOptions): Verdict[] {
  const verdicts: Verdict[] = [];
  const watchVerdicts = history.watches.length > 0 ? [...checkWatch(history.watches, history.ops), ...checkWatchScope(history)] : [];
  if (history.ops.length > 0) {
    const patch = patchFromFeed(history.ops, history.watches, watchVerdicts);
    const ops = boundByProcessLives(patch?.ops ?? history.ops, history.lives);
    verdicts.push(withPatch(checkLinearizable(ops, options), patch));
    verdicts.push(checkRevisions(history.ops));
  }
  verdicts.push(...watchVerdicts);
  if (history.credentials) verdicts.push(checkCredentials(history.credentials));
  if (history.bank) verdicts.push(checkBank(history.bank));
  if (history.fenced && history.fenced.length > 0) verdicts.push(checkFencing(history.fenced));
  if (history.webhooks) verdicts.push(checkWebhooks(history.webhooks, history.watches));
  return verdicts;
}

/** The linearizability verdict with what patching did, and the feed's events no request explains as anomalies. */
function withPatch(verdict: Verdict, patch: PatchResult | undefined): Verdict {
  if (patch === undefined) return verdict;
  const summary = `patched from the watch feed: ${patch.resolved} indeterminate operations resolved, ${patch.dropped} dropped (never applied), ${patch.left} left indeterminate`;
  if (patch.unexplained.length > 0) return { ...verdict, result: 'anomaly', details: [...patch.unexplained, ...verdict.details, summary] };
  if (verdict.result === 'anomaly') {
    const note =
      "an operation resolved from the feed is listed as answered ok at its event's revision, by the time that revision was first seen";
    return { ...verdict, details: [...verdict.details, summary, note] };
  }
  return { ...verdict, details: [...verdict.details, summary] };
}
