/**
 * The values a write takes and answers with: entries, conditions, transaction operations and
 * outcomes. Apart from store.ts (which re-exports them) so the write rules in this folder depend
 * on nothing above them.
 */
import type { StoredValue } from '../../values/stored-value.js';
import type { ValueType } from '../../values/value-type.js';

export interface Entry {
  type: ValueType;
  data: Buffer;
  /** Milliseconds since the epoch, or null for no expiry. */
  expiresAt: number | null;
  /** The bucket revision of the key's last change. */
  revision: number;
  /**
   * The revision at which the key last became live from absent or expired (etcd's CreateRevision):
   * a write that replaces a live value keeps it. A lock's fencing token. Undefined on history reads.
   */
  createRevision?: number;
}

/** A value as a write stores it (the revisions are assigned by the store). */
export type NewEntry = Omit<Entry, 'revision' | 'createRevision'>;

/**
 * A write's precondition (RFC 9110 section 13). `ifMatch`: the key must be live, and (unless
 * '*') at one of these revisions. `ifNoneMatch`: the key must not be live ('*'), or not at any
 * of these revisions. Both may be given; both must hold.
 */
export interface Condition {
  ifMatch?: '*' | number[];
  ifNoneMatch?: '*' | number[];
}

/** Why a write changed nothing: its condition failed (with the key's live entry), or the bucket is gone. */
export type Refusal = { refused: 'precondition'; current: Entry | undefined } | { refused: 'no_bucket' };

export const isRefusal = (outcome: object): outcome is Refusal => 'refused' in outcome;

/** A committed write: the bucket revision it got. */
export interface Written {
  revision: number;
}

/** A delete: whether a live key was removed (false = 404), and the revision of its commit when one was made. */
export interface Deleted {
  deleted: boolean;
  revision?: number;
}

/** A key's metadata as a `meta` listing reads it: everything but the value, and the value's length. */
export interface EntryMeta {
  type: ValueType;
  /** The stored value's length in bytes. */
  size: number;
  expiresAt: number | null;
  revision: number;
}

export type TxnOp =
  | { op: 'set'; key: string; value: StoredValue; expiresAt: number | null }
  | { op: 'delete'; key: string }
  /**
   * The key is live at revision `rev`, or (with `exists`) is live / is absent, or (with `created`)
   * is live with that create revision (a fencing token). Writes nothing.
   */
  | { op: 'check'; key: string; rev?: number; exists?: boolean; created?: number };

/** Operations a transaction may carry beyond the stores' plain ones. */
export type ReadingOp =
  /** Reads the key as it was before this transaction's writes. Writes nothing. */
  | { op: 'get'; key: string }
  /** Gives the live key a new expiry (null: never), keeping its value. Fails like a check when the key is not live. */
  | { op: 'expire'; key: string; expiresAt: number | null }
  /** Deletes every live key under the prefix. */
  | { op: 'delete_prefix'; key: string };

export type TxnRequestOp = TxnOp | ReadingOp;

/** What an operation reports back: a get's entry (undefined when absent), a prefix delete's count. */
export type OpResult = { op: 'get'; key: string; entry: Entry | undefined } | { op: 'delete_prefix'; deleted: number } | undefined;

/** A transaction's outcome: its one revision, the indices (in `ops`) of the checks that failed, or a missing bucket. */
export type CommitOutcome =
  | (Written & { results?: OpResult[] })
  | { refused: 'checks'; failed: number[] }
  | { refused: 'no_bucket' }
  | { refused: 'moved' };
