/** The preconditions a write or a transaction check tests against a key's live entry. */
import type { Condition, Entry, TxnOp } from './write-types.js';

/** Whether `condition` holds for the key's live entry (undefined when absent or expired). */
export function conditionHolds(condition: Condition | undefined, current: Entry | undefined): boolean {
  if (!condition) return true;
  const { ifMatch, ifNoneMatch } = condition;
  if (ifMatch !== undefined) {
    if (!current) return false;
    if (ifMatch !== '*' && !ifMatch.includes(current.revision)) return false;
  }
  if (ifNoneMatch !== undefined && current) {
    if (ifNoneMatch === '*' || ifNoneMatch.includes(current.revision)) return false;
  }
  return true;
}

/** Whether a transaction check holds for the key's live entry. */
export function checkHolds(op: Extract<TxnOp, { op: 'check' }>, current: Entry | undefined): boolean {
  if (op.rev !== undefined) return current !== undefined && current.revision === op.rev;
  if (op.created !== undefined) return current !== undefined && current.createRevision === op.created;
  return op.exists === (current !== undefined);
}
