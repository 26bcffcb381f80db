import type { Store } from '../../store/store.js';
import type { Clock } from '../clock.js';

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
  renewed(until: number): void {
    this.until = Math.max(this.until, until);
  }
}
