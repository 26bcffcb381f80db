import { StorageUnavailableError } from '../../store/storage-errors.js';
import type { Store } from '../../store/store.js';
import type { DeliveryAttempt } from '../../store/webhook-types.js';
import type { Clock } from '../clock.js';

/** How soon an acknowledged position the database could not take is tried again. */
const STORE_RETRY_MS = 250;

/**
 * One delivery's hold on its subscription's lease: when it runs out as far as this instance
 * knows (the end asked for when the claim or renewal that took it was sent, so never later than
 * the stored one), and how to take or extend it.
 */
export class DeliveryLease {
  until = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly id: string,
    private readonly holder: string,
    private readonly leaseMs: number,
  ) {}

  /** Takes or renews the lease (free, run out, or already this holder's); false if another holds it. */
  async renew(): Promise<boolean> {
    const now = this.clock();
    const until = now + this.leaseMs;
    const taken = await this.store.webhooks.claim(this.id, this.holder, until, now);
    if (taken) this.until = Math.max(this.until, until);
    return taken;
  }

  /** A renewal stored with a delivery's outcome (settle) that asked for `until`. */
  private renewed(until: number): void {
    this.until = Math.max(this.until, until);
  }

  /**
   * Stores an acknowledged batch's position with the attempt, renewing the lease: its new end, or
   * null if another holder has it. A database that could not be reached (nothing was sent to it)
   * is tried again while the lease lasts: the batch would otherwise go again, a repeat of what the
   * receiver had acknowledged.
   */
  async storeAcknowledged(position: number, attempt: DeliveryAttempt, keep: number, stopped: () => boolean): Promise<number | null> {
    for (;;) {
      const until = this.clock() + this.leaseMs;
      try {
        const stored = await this.store.webhooks.settle(this.id, this.holder, { position }, until, attempt, keep);
        if (stored) this.renewed(until);
        return stored ? until : null;
      } catch (err) {
        const nothingSent = err instanceof StorageUnavailableError && !err.outcomeUnknown;
        if (!nothingSent || stopped() || this.clock() + STORE_RETRY_MS >= this.until) throw err;
        await new Promise((resolve) => setTimeout(resolve, STORE_RETRY_MS));
      }
    }
  }
}
