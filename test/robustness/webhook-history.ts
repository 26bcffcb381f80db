/**
 * What the webhook scenarios record for their checker (checkers/webhooks.ts): the subscriptions
 * as they were added, every request the receiver got, and the faults around them. Times are the
 * run's one clock (recorder.ts `now`), like every other time in a RecordedHistory.
 */

/** One subscription as its creation answered: the secret is the one shown then. */
export interface WebhookSubscription {
  id: string;
  /** '' = the whole bucket. */
  prefix: string;
  secret: string;
  /** The bucket's revision when it was added: it delivers the changes after this. */
  position: number;
}

/**
 * What the receiver did with a request: answered 2xx (`ok`), answered 500 (`error`), never
 * answered (`hang`: the connection closed after 1.5 s), or closed the connection before
 * answering (`drop`). Only `ok` acknowledges; the receiver never answers 2xx on a connection it
 * then drops, so an acknowledgement the sender did not see comes from the sender dying, or from a
 * stall longer than the sender's timeout (3 s), which the checker cannot tell from a repeat
 * without a fault.
 */
export type ReceiverAnswer = 'ok' | 'error' | 'hang' | 'drop';

/** One request the receiver got, as it arrived. */
export interface WebhookDelivery {
  /** The subscription the request's path names (each subscription has a URL of its own). */
  subscription: string;
  /** When its body had arrived. */
  at: number;
  body: string;
  /** The `kvb-signature` header (undefined when absent). */
  signature: string | undefined;
  answer: ReceiverAnswer;
}

export interface WebhookHistory {
  bucket: string;
  subscriptions: WebhookSubscription[];
  /** In arrival order. */
  deliveries: WebhookDelivery[];
  /** When each kill -9 of an instance was sent: a delivery acknowledged just before one may be repeated. */
  kills: number[];
  /** The bucket's revision once writes stopped; every change up to it must have arrived. Null when it could not be read: nothing can be checked. */
  finalRevision: number | null;
  /** The change log's floor at the end (`kvb-history-floor`): a `reset` is due only for a position below it. */
  floor: number;
}
