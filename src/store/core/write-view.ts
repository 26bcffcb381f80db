import type { StoredValue } from '../../values/stored-value.js';
import type { EntryRow } from '../entry-row.js';
import type { Actor, HistoryOperation } from '../history-types.js';
import type { Usage } from '../quota.js';
import type { OpOutcome } from './write-ops.js';
import type { ChangeKind } from '../../values/change-kind.js';

/**
 * One bucket as a batch of writes finds it, before any of them: what an engine loads (all at
 * once, or on demand inside its transaction) for apply-batch.ts. Read only: the batch's own
 * changes are kept by the rules and handed back as a `BatchResult`.
 */
export interface WriteView {
  /** The bucket's revision; undefined when there is no such bucket. */
  readonly revision: number | undefined;
  /** The bucket's usage; asked only when a quota is set. */
  usage(): Usage;
  /** The key's row, expired ones too (they still count toward usage); undefined when absent. */
  row(key: string): EntryRow | undefined;
  /** Up to `limit` keys live at `now` under `prefix`, in byte order (prefix deletes without an engine listing). */
  liveKeys(prefix: string, now: number, limit: number): string[];
}

/** One change-log row a batch made: the key's state after `revision`. */
export interface ChangeRecord {
  key: string;
  kind: ChangeKind;
  /** For `set`: what it wrote. */
  value: StoredValue | undefined;
  expiresAt: number | null;
  revision: number;
  /** For `set`: the key's create revision after it (kept from a live row it replaces). */
  createRevision: number | null;
  actor: Actor | undefined;
}

/**
 * What a batch did, as data for the engine to persist (in one transaction) and for the caller to
 * answer with: one outcome per write, the bucket's revision and usage change, the change-log rows
 * in the order they were made (a key's last row is its final state), and what made the revisions
 * that are not a plain set or delete (history's `operation`).
 */
export interface BatchResult {
  outcomes: OpOutcome[];
  /** The bucket's revision after the batch (the view's when nothing was written). */
  revision: number | undefined;
  usage: Usage;
  changes: ChangeRecord[];
  operations: Array<{ revision: number; operation: HistoryOperation }>;
}
