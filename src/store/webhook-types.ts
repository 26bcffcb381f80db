// A bucket's webhook subscriptions as the store keeps them: the shapes and the WebhookStore
// interface (store.ts names it, so this module imports only values; webhook-store.ts implements it).

import { CHANGE_KINDS, type ChangeKind } from '../values/change-kind.js';

/** The change kinds a subscription may ask for: every kind of change (the watch feed's). */
export const WEBHOOK_KINDS = CHANGE_KINDS;
export type WebhookKind = ChangeKind;

/** A subscription as stored, without its secret and lease. */
export interface Webhook {
  id: string;
  bucket: string;
  url: string;
  prefix: string;
  kinds: WebhookKind[];
  state: 'active' | 'paused';
  pausedReason: string | null;
  /** The newest revision its receiver acknowledged (at creation: the bucket's revision then). */
  position: number;
  /** When the current run of failures began (ms); null while deliveries succeed. */
  failingSince: number | null;
  attempts: number;
  nextAttemptAt: number;
  createdAt: number;
}

/** A subscription as the delivery loop reads it: with its secret and its lease. */
export interface DeliverableWebhook extends Webhook {
  secret: string;
  holder: string | null;
  leaseUntil: number;
}

/** A subscription as a dump or an import puts it back: every stored column but the lease. */
export type RestoredWebhook = Omit<DeliverableWebhook, 'holder' | 'leaseUntil'>;

/** A subscription as the delivery loop's scan reads it: with its bucket's revision (null: the bucket is gone). */
export interface ScannedWebhook extends DeliverableWebhook {
  bucketRevision: number | null;
}

/** One attempt in a subscription's delivery log. */
export interface DeliveryAttempt {
  attemptedAt: number;
  firstRevision: number;
  lastRevision: number;
  /** The receiver's HTTP status; null when no answer came (refused, timed out, unreachable). */
  status: number | null;
  latencyMs: number;
  /** What went wrong, or a short excerpt of the answer; null after a 2xx. */
  error: string | null;
}

/** What a failed attempt leaves: when to try next, or paused with the reason. */
export interface FailureState {
  attempts: number;
  failingSince: number;
  nextAttemptAt: number;
  pausedReason: string | null;
}

/** What came of a delivery: acknowledged up to `position`, or failed, leaving `failure`. */
export type DeliveryOutcome = { position: number } | { failure: FailureState };

/**
 * A bucket's webhook subscriptions and their delivery state, stored with the bucket in both
 * engines. Reads and writes of the subscription rows only; the delivery loop (src/server/webhooks/)
 * reads changes from the store's change feed.
 */
export interface WebhookStore {
  /** Adds a subscription at the bucket's current revision; false when the bucket has `limit` already (or is gone). */
  add(
    webhook: { id: string; bucket: string; url: string; prefix: string; kinds: WebhookKind[]; secret: string },
    limit: number,
    now: number,
  ): Promise<boolean>;
  /** Puts back a subscription with every column given; false when the bucket has `limit` already (or is gone). */
  restore(webhook: RestoredWebhook, limit: number): Promise<boolean>;
  /** Sets an imported subscription's position and state (see restore). */
  place(bucket: string, id: string, position: number, state: Webhook['state'], pausedReason: string | null): Promise<boolean>;
  list(bucket: string): Promise<Webhook[]>;
  get(bucket: string, id: string): Promise<Webhook | undefined>;
  pause(bucket: string, id: string, reason: string): Promise<boolean>;
  resume(bucket: string, id: string): Promise<boolean>;
  rotate(bucket: string, id: string, secret: string): Promise<boolean>;
  remove(bucket: string, id: string): Promise<boolean>;
  /** A deleted bucket's subscriptions and logs. */
  removeBucket(bucket: string): Promise<void>;
  /** Every subscription with its secret, lease and bucket revision (the delivery loop's scan). */
  all(): Promise<ScannedWebhook[]>;
  /** One subscription with its secret and lease. */
  deliverable(id: string): Promise<DeliverableWebhook | undefined>;
  /** Takes or renews the lease on one subscription until `until`; false while another holder has it. */
  claim(id: string, holder: string, until: number, now: number): Promise<boolean>;
  release(id: string, holder: string): Promise<void>;
  /** The receiver acknowledged up to `position`: stored, and the retry state cleared (only while `holder` has the lease). */
  acknowledge(id: string, holder: string, position: number): Promise<boolean>;
  fail(id: string, holder: string, state: FailureState): Promise<boolean>;
  /**
   * One delivery's end in one write (one transaction): its outcome (as `acknowledge` or `fail`,
   * only while `holder` has the lease), the lease renewed to `leaseUntil` if it does, and the
   * attempt logged (as `log`). True when the outcome was stored.
   */
  settle(
    id: string,
    holder: string,
    outcome: DeliveryOutcome,
    leaseUntil: number,
    attempt: DeliveryAttempt,
    keep: number,
  ): Promise<boolean>;
  /** Logs one attempt and keeps the newest `keep`. */
  log(id: string, attempt: DeliveryAttempt, keep: number): Promise<void>;
  deliveries(id: string, limit: number): Promise<DeliveryAttempt[]>;
  /**
   * Calls `listener` after a subscription is added or resumed through this store (this process):
   * the delivery loop, which otherwise wakes only for commits and retries, looks at it at once.
   */
  onSubscribed(listener: () => void): void;
}
