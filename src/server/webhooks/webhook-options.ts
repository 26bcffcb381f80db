/** How a WebhookDeliverer delivers: `kvb serve`'s settings (webhook-delivery.ts), or a test's. */
export interface DeliveryOptions {
  /** Deliveries may reach loopback, private and link-local addresses (`--webhook-allow-private`). */
  allowPrivate: boolean;
  /** A delivery not answered with a 2xx within this long has failed. */
  timeoutMs: number;
  /** A subscription failing for longer than this is paused. */
  retryBoundMs: number;
  /**
   * How often a shared store's subscriptions are looked at while it has some: other instances'
   * commits are seen only this way (PgBouncer in transaction mode has no LISTEN). A store whose
   * every commit is this process's (SQLite) is not polled: its commits and retries wake the loop.
   */
  pollMs: number;
  /** How often a shared store with no subscription is looked at (one may be added through another instance). */
  idlePollMs: number;
  /** How long a lease on a subscription lasts unless renewed (an instance that dies frees its subscriptions after this). */
  leaseMs: number;
  /** The jitter's randomness (tests pass their own). */
  random?: () => number;
}
