import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { FastifyBaseLogger } from 'fastify';
import type { Store } from '../../store/store.js';
import type { DeliverableWebhook, Webhook } from '../../store/webhook-types.js';
import type { Clock } from '../clock.js';
import { type Batch, resetBatch } from './webhook-batch.js';
import { batchAfter } from './webhook-next-batch.js';
import { WebhookConnections } from './webhook-post.js';
import { publicOnlyLookup } from './webhook-address.js';
import { type WebhookLagDetail, lagDetail } from './webhook-health.js';
import { DeliveryLease } from './webhook-lease.js';
import type { DeliveryOptions } from './webhook-options.js';
import { afterFailure } from './webhook-retry.js';
import { attemptOf, postSigned } from './webhook-send.js';
import { CarriedTails } from './webhook-tail.js';

/**
 * How long a caught-up webhook whose bucket moved during its delivery waits before the next one,
 * so that the changes of that time go together: under a steady stream of writes each request
 * then carries several times the changes, and its fixed cost (the reads under the lease, the
 * request, the acknowledgement) is paid that much less often. A full batch goes on at once.
 */
export const GATHER_MS = 25;
/** setTimeout's longest delay; a later wake is taken in steps. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** Attempts kept in each subscription's delivery log. */
export const DELIVERY_LOG_KEEP = 50;

/**
 * How a delivery ended: `more` (acknowledged, and the bucket has changes past it), `caught-up`
 * (the webhook stands at the bucket's revision as the delivery read it), or `stop` (not
 * delivered: failed, paused, not due, a lease another holder has).
 */
type DeliveryEnd = { next: 'more' | 'caught-up'; webhook: DeliverableWebhook } | { next: 'stop' };
const STOP: DeliveryEnd = { next: 'stop' };

/** A short pause; held (not unref'd), as `stop` may be waiting for the delivery after it. */
const gathered = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Notes `w` as waiting for its bucket's next commit. */
function waitFor(wakeOn: Map<string, Map<string, DeliverableWebhook>>, w: DeliverableWebhook): void {
  const waiting = wakeOn.get(w.bucket) ?? new Map<string, DeliverableWebhook>();
  wakeOn.set(w.bucket, waiting.set(w.id, w));
}

/** Counts for the metrics endpoint (this instance's). */
export interface DeliveryStats {
  delivered: number;
  failed: number;
  /** Each subscription's latest look: state, and how far behind its bucket it was. */
  seen: Map<string, { bucket: string; state: 'active' | 'paused' | 'retrying'; lagRevisions: number; pendingSince: number | null }>;
}

/**
 * Delivers each subscription's changes, one request in flight per subscription, from its stored
 * position: read from the change log as a watcher reads it, so it works on both engines and across
 * instances. The position moves only after the receiver's 2xx, so a crash repeats at most the
 * batch in flight. Each delivery first takes or renews the subscription's lease: with several
 * instances on one PostgreSQL database, one of them delivers a subscription at a time, and another
 * takes it over once the lease runs out.
 */
export class WebhookDeliverer {
  /**
   * This instance as a lease holder. A store only this process writes to (SQLite: one server per
   * file) has one holder whatever the process: a server restarted after a crash goes on at once
   * instead of waiting out its dead predecessor's leases. A shared store's holder starts with the
   * process id and host name, so whoever reads the `webhooks` table can tell which instance holds
   * a webhook (the robustness suite kills that one).
   */
  readonly holder: string;
  readonly stats: DeliveryStats = { delivered: 0, failed: 0, seen: new Map() };
  private readonly inFlight = new Map<string, Promise<void>>();
  /** The bucket of each delivery in flight, and whether a local commit to it came since the delivery began. */
  private readonly moved = new Map<string, { bucket: string; moved: boolean }>();
  /** Each webhook's kept connection (deliveries back to back reuse it). */
  private readonly connections: WebhookConnections;
  /** On SQLite, the latest changes of the buckets with active webhooks, as the commits carried them. */
  private readonly tails: CarriedTails | undefined;
  /** The next wake (a retry due, a lease running out, a poll) and when it is. */
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Number.POSITIVE_INFINITY;
  /**
   * The active subscriptions neither in flight nor backing off, caught up with their bucket, by
   * bucket: a local commit to one starts their deliveries (no look at every subscription).
   */
  private wakeOn = new Map<string, Map<string, DeliverableWebhook>>();
  private scanning: Promise<void> | undefined;
  private again = false;
  private scanFailing = false;
  private stopped = false;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly log: FastifyBaseLogger,
    private readonly options: DeliveryOptions,
  ) {
    this.holder = store.flags.shared ? `${process.pid}@${hostname()}/${randomUUID()}` : 'this-server';
    this.connections = new WebhookConnections(options.allowPrivate ? undefined : publicOnlyLookup);
    this.tails = CarriedTails.of(store.changes);
  }

  /**
   * Looks once, then wakes only when there may be work: a local commit to a bucket that has a
   * subscription waiting for changes (which starts that delivery), a subscription added or
   * resumed here, a retry or a lease falling due, the end of a delivery; on a shared store also
   * every poll. With no subscription, a commit costs a look-up in an empty map.
   */
  start(): this {
    this.store.changes.onCommit?.((buckets, committed) => {
      if (this.stopped) return;
      this.tails?.committed(buckets, committed);
      for (const d of this.moved.values()) if (!d.moved && buckets.includes(d.bucket)) d.moved = true;
      // During a look, whatever the bucket: that look may have read the revisions before this commit.
      if (this.scanning) return this.kick();
      for (const bucket of buckets) {
        const waiting = this.wakeOn.get(bucket);
        this.wakeOn.delete(bucket);
        for (const w of waiting?.values() ?? []) if (!this.inFlight.has(w.id)) this.startDelivery(w);
      }
    });
    this.store.webhooks.onSubscribed(() => this.kick());
    this.kick();
    return this;
  }

  /** Wakes the loop at `at` (store clock, ms) unless an earlier wake is set. */
  private wakeAt(at: number): void {
    if (this.stopped || at >= this.timerAt) return;
    clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        this.timerAt = Number.POSITIVE_INFINITY;
        this.kick();
      },
      Math.min(MAX_TIMER_MS, Math.max(0, at - this.clock())),
    );
    this.timer.unref();
  }

  /** Looks at the subscriptions now (once more after the current look, if one is running). */
  kick(): void {
    if (this.stopped) return;
    if (this.scanning) {
      this.again = true;
      return;
    }
    this.scanning = this.scan()
      .then((next) => {
        if (this.scanFailing) this.log.info('webhook deliveries resumed');
        this.scanFailing = false;
        if (next !== undefined) this.wakeAt(next);
      })
      .catch((err: unknown) => {
        // Once per outage, not every poll while the database is away.
        if (!this.scanFailing) this.log.warn({ err }, 'webhook scan failed; retrying every poll');
        this.scanFailing = true;
        this.wakeAt(this.clock() + this.options.pollMs);
      })
      .finally(() => {
        this.scanning = undefined;
        if (this.again) {
          this.again = false;
          this.kick();
        }
      });
  }

  /** Starts a delivery for each subscription with changes waiting and due; returns when to look next, if before a commit. */
  private async scan(): Promise<number | undefined> {
    const now = this.clock();
    const all = await this.store.webhooks.all();
    const ids = new Set(all.map((w) => w.id));
    for (const id of this.stats.seen.keys()) if (!ids.has(id)) this.stats.seen.delete(id);
    const active = all.filter((w) => w.state === 'active');
    this.connections.keepOnly(new Set(active.map((w) => w.id)));
    this.tails?.keep(active);
    const wakeOn = new Map<string, Map<string, DeliverableWebhook>>();
    let next = this.store.changes.onCommit
      ? Number.POSITIVE_INFINITY
      : now + (all.length > 0 ? this.options.pollMs : this.options.idlePollMs);
    for (const w of all) {
      this.note(w, w.bucketRevision === null ? undefined : w.bucketRevision - w.position);
      // One in flight looks again when it ends.
      if (w.state !== 'active' || this.inFlight.has(w.id)) continue;
      if (w.nextAttemptAt > now) {
        next = Math.min(next, w.nextAttemptAt);
        continue;
      }
      if (w.bucketRevision !== null && w.bucketRevision <= w.position) {
        waitFor(wakeOn, w);
        continue;
      }
      if (w.holder !== null && w.holder !== this.holder && w.leaseUntil > now) {
        next = Math.min(next, w.leaseUntil);
        continue;
      }
      this.startDelivery(w);
    }
    this.wakeOn = wakeOn;
    return Number.isFinite(next) ? next : undefined;
  }

  /** `afterMs`: held that long first (GATHER_MS), counted in flight meanwhile so nothing else starts it. */
  private startDelivery(w: DeliverableWebhook, afterMs = 0): void {
    const commits = { bucket: w.bucket, moved: false };
    // Commits during the pause are in the delivery's own read: only those after it starts count as moved.
    const begin = () => {
      this.moved.set(w.id, commits);
      return this.deliver(w);
    };
    const delivered = afterMs > 0 ? gathered(afterMs).then(() => (this.stopped ? STOP : begin())) : begin();
    const running = delivered.then(
      (end) => {
        this.inFlight.delete(w.id);
        this.moved.delete(w.id);
        this.afterDelivery(end, commits.moved);
      },
      (err: unknown) => {
        this.inFlight.delete(w.id);
        this.moved.delete(w.id);
        this.log.warn({ err, webhook: w.id }, 'webhook delivery failed; will retry');
        this.wakeAt(this.clock() + this.options.pollMs);
      },
    );
    this.inFlight.set(w.id, running);
  }

  /**
   * What follows a delivery. One acknowledged with more waiting (its read saw the bucket past
   * what it sent), or after which this process committed to the bucket, goes on with the next at
   * once; one that left the webhook caught up waits for the bucket's next local commit. Neither
   * looks at every subscription again: under load that look, after every delivery, cost the
   * request thread about as much as the delivery's own reads. Anything else (a failure, a pause,
   * a lease lost, a look under way that may not count this webhook) is a look, as is every end on
   * a shared store, where other instances' commits are seen only by looking.
   */
  private afterDelivery(end: DeliveryEnd, moved: boolean): void {
    if (this.stopped) return;
    if (end.next === 'more') this.startDelivery(end.webhook);
    else if (end.next === 'caught-up' && moved && this.store.changes.onCommit) {
      this.startDelivery(end.webhook, GATHER_MS);
    } else if (end.next === 'caught-up' && this.store.changes.onCommit && !this.scanning) {
      waitFor(this.wakeOn, end.webhook);
    } else {
      this.kick();
    }
  }

  private note(w: Webhook, lagRevisions: number | undefined): void {
    const previous = this.stats.seen.get(w.id);
    const state = w.state === 'paused' ? 'paused' : w.attempts > 0 ? 'retrying' : 'active';
    const lag = lagRevisions ?? previous?.lagRevisions ?? 0;
    const pendingSince = lag > 0 ? (previous?.pendingSince ?? this.clock()) : null;
    this.stats.seen.set(w.id, { bucket: w.bucket, state, lagRevisions: lag, pendingSince });
  }

  /** One delivery for one subscription (or its position moved past changes it does not want), under its lease. */
  private async deliver(seen: DeliverableWebhook): Promise<DeliveryEnd> {
    const lease = new DeliveryLease(this.store, this.clock, seen.id, this.holder, this.options.leaseMs);
    // Each delivery's outcome renews the lease (settle): back to back under load, the next one
    // need not take it again while it has enough of its time left, which no other holder can take.
    if (seen.holder === this.holder) lease.until = seen.leaseUntil;
    if (!this.covers(lease) && !(await lease.renew())) return STOP;
    // Renewed while the delivery lasts: a database or receiver slower than the lease must not let
    // another instance take the webhook over mid-delivery and send the same changes again (in the
    // robustness suite's pg2-webhook-kill at a load of 30, without this, a webhook was sent again
    // every lease for seconds while neither instance's acknowledgement could land).
    const renewal = setInterval(() => void lease.renew().catch(() => {}), this.options.leaseMs / 3);
    renewal.unref();
    try {
      return await this.deliverClaimed(seen.id, lease);
    } finally {
      clearInterval(renewal);
    }
  }

  /**
   * Whether the lease, as this instance last took it, lasts through a request that takes the
   * whole timeout and a third of a lease more, for storing its outcome (a renewal falls in that
   * third): a batch sent on less could be acknowledged, the lease then run out before the new
   * position is stored, and another instance send the batch again.
   */
  private covers(lease: DeliveryLease): boolean {
    return lease.until - this.clock() >= this.options.timeoutMs + this.options.leaseMs / 3;
  }

  private async deliverClaimed(id: string, lease: DeliveryLease): Promise<DeliveryEnd> {
    const now = this.clock();
    // Read again under the lease: paused, rotated or moved on since the scan (or the delivery before) saw it.
    const w = await this.store.webhooks.deliverable(id);
    if (w?.state !== 'active') this.connections.drop(id);
    if (w?.state !== 'active' || w.nextAttemptAt > now) return STOP;
    const bounds = await this.store.changes.bounds(w.bucket);
    if (!bounds) {
      await this.store.webhooks.removeBucket(w.bucket);
      this.connections.drop(id);
      return STOP;
    }
    const from = w.position;
    this.note(w, bounds.revision - from);
    if (bounds.revision <= from) return { next: 'caught-up', webhook: w };
    const batch =
      w.position < bounds.watchFloor
        ? resetBatch(w.bucket, w, bounds)
        : await batchAfter(this.store.changes, this.tails, w, bounds.revision);
    // The reads may have taken a while under load: the lease must still cover the request.
    if (batch.events.length > 0 && !this.covers(lease) && !(await lease.renew())) return STOP;
    const leaseUntil = batch.events.length > 0 ? await this.send(w, batch, lease) : undefined;
    if (leaseUntil === null) return STOP;
    // Only a position the store took is one to go on from (a lease taken over meanwhile refuses it).
    if (batch.events.length === 0 && batch.upTo > w.position && !(await this.store.webhooks.acknowledge(w.id, this.holder, batch.upTo))) {
      return STOP;
    }
    this.note(w, bounds.revision - batch.upTo);
    if (batch.upTo <= from) return STOP;
    this.tails?.advanced({ id: w.id, bucket: w.bucket, position: batch.upTo });
    const webhook = { ...w, position: batch.upTo, attempts: 0, failingSince: null, leaseUntil: lease.until };
    return { next: bounds.revision > batch.upTo ? 'more' : 'caught-up', webhook };
  }

  /**
   * Sends one batch, stores what came of it and logs the attempt; when the receiver acknowledged
   * it and the store took the new position, the lease's new end, else null.
   */
  private async send(w: DeliverableWebhook, batch: Batch, lease: DeliveryLease): Promise<number | null> {
    const body = `{"webhook":${JSON.stringify(w.id)},"bucket":${JSON.stringify(w.bucket)},"events":[${batch.events.join(',')}]}`;
    const started = this.clock();
    const outcome = await postSigned(w, body, this.clock, { ...this.options, agent: this.connections.agentFor(w.id, new URL(w.url)) });
    const attempt = attemptOf(outcome, started, this.clock() - started, batch);
    // The outcome, the lease and the log in one write: the delivery loop's cost on the writer is
    // one transaction per request (and storing the position waits for nothing else).
    if (attempt.error === null) {
      const answered = this.clock();
      const leaseUntil = await lease.storeAcknowledged(batch.upTo, attempt, DELIVERY_LOG_KEEP, () => this.stopped);
      this.stats.delivered += batch.events.length;
      if (leaseUntil !== null) return leaseUntil;
      // Another instance took the lease over before the position was stored: it sends this batch again.
      const timing = { requestMs: attempt.latencyMs, storeMs: this.clock() - answered, leaseLeftMs: lease.until - answered };
      this.log.warn({ webhook: w.id, ...timing }, 'webhook batch acknowledged, but its lease was lost before the position was stored');
      return null;
    }
    const leaseUntil = this.clock() + this.options.leaseMs;
    this.stats.failed++;
    const failure = afterFailure(w, this.clock(), this.options.retryBoundMs, attempt.error, this.options.random);
    await this.store.webhooks.settle(w.id, this.holder, { failure }, leaseUntil, attempt, DELIVERY_LOG_KEEP);
    if (failure.pausedReason !== null) this.log.warn({ webhook: w.id, bucket: w.bucket, reason: failure.pausedReason }, 'webhook paused');
    return null;
  }

  /** /health's detail: the webhooks whose changes have waited past the threshold. */
  lagging(): WebhookLagDetail | undefined {
    return lagDetail(
      [...this.stats.seen.values()].map((s) => (s.state === 'paused' ? null : s.pendingSince)),
      this.clock(),
    );
  }

  /** Stops looking, waits for the deliveries in flight and hands back this instance's leases. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.scanning;
    await Promise.all(this.inFlight.values());
    this.connections.close();
    this.tails?.keep([]);
    const held = (await this.store.webhooks.all().catch(() => [])).filter((w) => w.holder === this.holder);
    await Promise.all(held.map((w) => this.store.webhooks.release(w.id, this.holder).catch(() => {})));
  }
}
