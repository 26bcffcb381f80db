/**
 * What the robustness suite records and what its checkers read. A recorder (the workloads) and
 * the checkers meet only here, so either side can change without the other.
 *
 * Times are milliseconds on one monotonic clock shared by every client of a run
 * (`performance.now()` in the runner process). An operation is *indeterminate* when its client
 * cannot know whether it took effect (a timeout, a dropped connection, a 503 that "may or may not
 * have been applied"): it may take effect at any moment after `call`, or never, so its `ret` is
 * `Infinity` and its output is unknown.
 */

import type { WebhookHistory } from './webhook-history.js';

/** How an operation ended, as its client saw it. */
export type Outcome = 'ok' | 'fail' | 'unknown';

/** One operation on one key of the register model (a key holding a text value, or absent). */
export type RegisterInput =
  | { f: 'read' }
  | ({ f: 'write'; value: string } & Expiring)
  /** Compare-and-set: write `value` only if the key is live at revision `rev` (`If-Match`). */
  | ({ f: 'cas'; rev: number; value: string } & Expiring)
  /** Write only if absent (`If-None-Match: *`). */
  | ({ f: 'create'; value: string } & Expiring)
  /**
   * A plain DELETE is ok only if the key was live (404 otherwise). A delete inside a multi-key
   * request (an `Op` with `group`) is ok on an absent key too (a transaction's delete of an absent
   * key is not an error and changes nothing), so the checkers accept both for it.
   */
  | { f: 'delete' };

/**
 * The TTL a write asked for (`?ttl=S`, S > 0): the key expires S seconds after the server's clock
 * at the write. Absent: the bucket's default, which the suite's bucket sets to no expiry.
 */
export interface Expiring {
  ttl?: number;
}

/**
 * What an ok register operation returned: the value read (null = absent) and the revision seen or
 * written. A read of an absent key has no revision (undefined or 0): a 404 names none.
 */
export interface RegisterOutput {
  value?: string | null;
  revision?: number;
  /** For a write with a TTL: the expiry it answered (`Kvb-Expires-At`), on the history's clock. */
  expiresAt?: number;
}

/** One operation on a counter key (int64, absent = 0). */
export type CounterInput = { f: 'read' } | { f: 'add'; delta: number };
export interface CounterOutput {
  /** The counter's value after an add, or the value read. */
  value?: number;
  revision?: number;
}

/**
 * One recorded operation. `key` partitions the history for the per-key linearizability check; an
 * operation that touched several keys (a transaction, a prefix delete, a rollback) is recorded as
 * one `Op` per key it touched with the same `group` and the same call/return times and outcome.
 */
export interface Op<I = RegisterInput | CounterInput, O = RegisterOutput | CounterOutput> {
  /** Unique within a history. */
  id: number;
  /** The client (a process-wide id) that issued it; one client has one operation open at a time. */
  client: number;
  /** The kvb instance it was sent to ('a', 'b', …). */
  instance: string;
  model: 'register' | 'counter';
  key: string;
  input: I;
  call: number;
  /** Infinity when indeterminate. */
  ret: number;
  outcome: Outcome;
  /** An indeterminate operation: when its client saw the request fail without an answer. */
  failedAt?: number;
  /**
   * An indeterminate operation's last moment to take effect, when one is known (set by the
   * checkers from `RecordedHistory.lives`): it took effect before then, or never.
   */
  effectBy?: number;
  /** Set when outcome is 'ok'. */
  output?: O;
  /** Operations of one multi-key request share this id. */
  group?: number;
  /**
   * The HTTP status of the answer, when there was one. A 'fail' of a conditional operation (cas,
   * create, delete) tells the checkers its condition did not hold only when the refusal came from
   * that condition: 412, 409 (a transaction's check) or 404 (a delete). Any other refusal (429, a
   * connection refused before sending, another 4xx) only says it had no effect. Without `status`
   * every 'fail' of a conditional operation is taken as its condition's refusal.
   */
  status?: number;
}

/** One event a watcher received (the `change` events of the watch feed). */
export interface WatchEvent {
  revision: number;
  key: string;
  kind: 'set' | 'delete' | 'expire';
  /** The text value for a set, when the feed carried it. */
  value?: string;
  /** For a set of an expiring key: its `expires_at`, on the history's clock. */
  expiresAt?: number;
  /** When the watcher received it (same clock as Op). */
  at: number;
}

/** What one watcher saw: the feed it followed, every event in arrival order, and where it resumed. */
export interface WatchLog {
  watcher: number;
  /** The prefix it watched; absent = the whole bucket. Only keys under it are expected in its feed. */
  prefix?: string;
  /** Set when it watched with a temporary token: the prefix it names (the watch is narrowed to it). */
  tokenPrefix?: string;
  /**
   * The revision up to which it is known to have received every change (a `progress` event's or
   * the final listing's revision once it caught up). The reliability rule then covers up to it,
   * not only up to the last event it received.
   */
  caughtUpTo?: number;
  /** The instance it was connected to for each segment; a resume may move to another instance. */
  segments: Array<{ instance: string; since: number; events: WatchEvent[] }>;
}

/** One snapshot of the bank workload: every account's balance read at one revision. */
export interface BankRead {
  revision: number;
  balances: Record<string, number>;
  call: number;
  ret: number;
}

/** A checker's answer. `unchecked` (never a pass): the history was too large to search in the time given. */
export interface Verdict {
  checker: string;
  result: 'ok' | 'anomaly' | 'unchecked';
  /** For anomalies: what was wrong, with the operation ids or revisions involved, first few only. */
  details: string[];
  /** How many operations / events it examined. */
  examined: number;
}

/** A write made under a lock, conditional on the lock still being held at `token` (a fenced write). */
export interface FencedWrite {
  holder: number;
  /** The fencing token: the revision at which the holder took the lock. */
  token: number;
  /** The revision the write committed at (ok), absent when refused or indeterminate. */
  revision?: number;
  outcome: Outcome;
  call: number;
  ret: number;
}

/** Everything one scenario run recorded; the checkers take this whole. */
export interface RecordedHistory {
  scenario: string;
  ops: Op[];
  watches: WatchLog[];
  /** The temporary-token workload: every authorized request and every signing-key rotation (history-credentials.ts). */
  credentials?: import('./history-credentials.js').CredentialHistory;
  /** Set by runs with expiring keys: by `settledAt` every key expired before `settledAt - sweepBoundMs` was swept. */
  expiry?: { settledAt: number; sweepBoundMs: number };
  /** The bank workload: its snapshots and the total every snapshot must sum to. */
  bank?: {
    reads: BankRead[];
    total: number;
    accounts: string[];
    /** Set when every transfer checks the balance it takes from: then a negative balance is an anomaly. */
    nonNegative?: boolean;
  };
  fenced?: FencedWrite[];
  /** The webhook scenarios: subscriptions and every request their receiver got (webhook-history.ts). */
  webhooks?: WebhookHistory;
  /**
   * Per instance, each of its processes: when it was spawned and when it was seen gone (a kill
   * or a crash), in the ops' clock. Only where the store is inside the process (SQLite): what a
   * process took committed before it was gone, or never. Not on PostgreSQL, where a COMMIT the
   * process sent before it died can still land after.
   */
  lives?: Record<string, ProcessLife[]>;
}

/** One process of an instance: spawned at `started`, seen gone at `exited` (absent: still running). */
export interface ProcessLife {
  started: number;
  exited?: number;
}
