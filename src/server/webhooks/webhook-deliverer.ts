import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { FastifyBaseLogger } from 'fastify';
import type { Store } from '../../store/store.js';
import type { DeliverableWebhook, DeliveryAttempt, ScannedWebhook, Webhook } from '../../store/webhook-types.js';
import { VERSION } from '../../version.js';
import type { Clock } from '../clock.js';
import { type Batch, MAX_BATCH_EVENTS, nextBatch, resetBatch } from './webhook-batch.js';
import { type PostOutcome, postWebhook } from './webhook-post.js';
import { type WebhookLagDetail, lagDetail } from './webhook-health.js';
import { afterFailure } from './webhook-retry.js';
import { SIGNATURE_HEADER, signDelivery } from './webhook-signature.js';

/** Rows of the change log read per delivery at most (whole revisions), and first. */
const READ_LIMIT = 1000;
const FIRST_READ_LIMIT = 2 * MAX_BATCH_EVENTS;
/** setTimeout's longest delay; a later wake is taken in steps. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** Attempts kept in each subscription's delivery log. */
export const DELIVERY_LOG_KEEP = 50;

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
  /** The next wake (a retry due, a lease running out, a poll) and when it is. */
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Number.POSITIVE_INFINITY;
  /** Buckets with an active subscription neither in flight nor backing off: a commit to one wakes the loop. */
  private wakeOn = new Set<string>();
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
  }

  /**
   * Looks once, then wakes only when there may be work: a local commit to a bucket that has a
   * subscription waiting for changes, a subscription added or resumed here, a retry or a lease
   * falling due, the end of a delivery; on a shared store also every poll. With no subscription,
   * a commit costs a look-up in an empty set.
   */
  start(): this {
    this.store.changes.onCommit?.((buckets) => {
      // During a look, whatever the bucket: that look may have read the revisions before this commit.
      if (this.scanning || buckets.some((b) => this.wakeOn.has(b))) this.kick();
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
    const wakeOn = new Set<string>();
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
      wakeOn.add(w.bucket);
      if (w.bucketRevision !== null && w.bucketRevision <= w.position) continue;
      if (w.holder !== null && w.holder !== this.holder && w.leaseUntil > now) {
        next = Math.min(next, w.leaseUntil);
        continue;
      }
      this.startDelivery(w);
    }
    this.wakeOn = wakeOn;
    return Number.isFinite(next) ? next : undefined;
  }

  private startDelivery(w: ScannedWebhook): void {
    const running = this.deliver(w).then(
      () => {
        this.inFlight.delete(w.id);
        this.kick();
      },
      (err: unknown) => {
        this.inFlight.delete(w.id);
        this.log.warn({ err, webhook: w.id }, 'webhook delivery failed; will retry');
        this.wakeAt(this.clock() + this.options.pollMs);
      },
    );
    this.inFlight.set(w.id, running);
  }

  private note(w: Webhook, lagRevisions: number | undefined): void {
    const previous = this.stats.seen.get(w.id);
    const state = w.state === 'paused' ? 'paused' : w.attempts > 0 ? 'retrying' : 'active';
    const lag = lagRevisions ?? previous?.lagRevisions ?? 0;
    const pendingSince = lag > 0 ? (previous?.pendingSince ?? this.clock()) : null;
    this.stats.seen.set(w.id, { bucket: w.bucket, state, lagRevisions: lag, pendingSince });
  }

  /** One delivery for one subscription (or its position moved past changes it does not want), under its lease. */
  private async deliver(seen: DeliverableWebhook): Promise<void> {
    const claim = () => {
      const now = this.clock();
      return this.store.webhooks.claim(seen.id, this.holder, now + this.options.leaseMs, now);
    };
    // Each delivery's outcome renews the lease (settle): back to back under load, the next one
    // need not take it again while it has most of its time left, which no other holder can take.
    const held = seen.holder === this.holder && seen.leaseUntil - this.clock() > (this.options.leaseMs * 2) / 3;
    if (!held && !(await claim())) return;
    // Renewed while the delivery lasts: a database or receiver slower than the lease must not let
    // another instance take the webhook over mid-delivery and send the same changes again (in the
    // robustness suite's pg2-webhook-kill at a load of 30, without this, a webhook was sent again
    // every lease for seconds while neither instance's acknowledgement could land).
    const renewal = setInterval(() => void claim().catch(() => {}), this.options.leaseMs / 3);
    renewal.unref();
    try {
      await this.deliverClaimed(seen.id);
    } finally {
      clearInterval(renewal);
    }
  }

  private async deliverClaimed(id: string): Promise<void> {
    const now = this.clock();
    // Read again under the lease: paused, rotated or moved on since the scan saw it.
    const w = await this.store.webhooks.deliverable(id);
    if (w?.state !== 'active' || w.nextAttemptAt > now) return;
    const bounds = await this.store.changes.bounds(w.bucket);
    if (!bounds) {
      await this.store.webhooks.removeBucket(w.bucket);
      return;
    }
    this.note(w, bounds.revision - w.position);
    if (bounds.revision <= w.position) return;
    const batch = w.position < bounds.watchFloor ? resetBatch(w.bucket, w, bounds) : await this.readBatch(w, bounds.revision);
    if (batch.events.length > 0 && !(await this.send(w, batch))) return;
    if (batch.events.length === 0 && batch.upTo > w.position) await this.store.webhooks.acknowledge(w.id, this.holder, batch.upTo);
    this.note(w, bounds.revision - batch.upTo);
  }

  /**
   * The next batch after the position: first from about what one request holds, and only when
   * that does not fill one (a prefix or kinds that leave most changes out), from READ_LIMIT rows.
   * Under load a backlog of thousands of changes waits; reading READ_LIMIT rows with their values
   * for every request of MAX_BATCH_EVENTS was most of what a delivery cost.
   */
  private async readBatch(w: DeliverableWebhook, upTo: number): Promise<Batch> {
    let batch: Batch | undefined;
    for (const limit of [FIRST_READ_LIMIT, READ_LIMIT]) {
      const rows = await this.store.changes.read(w.bucket, w.position, upTo, limit);
      // Only an empty read says nothing is left up to `upTo`: fewer rows than the limit do not, as
      // a read that stopped inside a revision leaves that revision out (whole revisions). Taking
      // them for the end moved the position past changes never sent.
      const last = rows.at(-1)?.revision;
      batch = nextBatch(w.bucket, w, rows, upTo, last === undefined);
      const full = batch.events.length >= MAX_BATCH_EVENTS || batch.upTo < (last ?? 0);
      if (last === undefined || last >= upTo || full) break;
    }
    return batch!;
  }

  /** Sends one batch, stores what came of it and logs the attempt; true when the receiver acknowledged it. */
  private async send(w: DeliverableWebhook, batch: Batch): Promise<boolean> {
    const body = `{"webhook":${JSON.stringify(w.id)},"bucket":${JSON.stringify(w.bucket)},"events":[${batch.events.join(',')}]}`;
    const started = this.clock();
    const outcome = await postSigned(w, body, this.clock, this.options);
    const attempt = attemptOf(outcome, started, this.clock() - started, batch);
    const leaseUntil = this.clock() + this.options.leaseMs;
    // The outcome, the lease and the log in one write: the delivery loop's cost on the writer is
    // one transaction per request (and storing the position waits for nothing else).
    if (attempt.error === null) {
      await this.store.webhooks.settle(w.id, this.holder, { position: batch.upTo }, leaseUntil, attempt, DELIVERY_LOG_KEEP);
      this.stats.delivered += batch.events.length;
      return true;
    }
    this.stats.failed++;
    const failure = afterFailure(w, this.clock(), this.options.retryBoundMs, attempt.error, this.options.random);
    await this.store.webhooks.settle(w.id, this.holder, { failure }, leaseUntil, attempt, DELIVERY_LOG_KEEP);
    if (failure.pausedReason !== null) this.log.warn({ webhook: w.id, bucket: w.bucket, reason: failure.pausedReason }, 'webhook paused');
    return false;
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
    const held = (await this.store.webhooks.all().catch(() => [])).filter((w) => w.holder === this.holder);
    await Promise.all(held.map((w) => this.store.webhooks.release(w.id, this.holder).catch(() => {})));
  }
}

/** POSTs a signed body to a subscription's URL (the secret signs; it is never logged). */
export function postSigned(
  w: { id: string; url: string; secret: string },
  body: string,
  clock: Clock,
  options: Pick<DeliveryOptions, 'timeoutMs' | 'allowPrivate'>,
): Promise<PostOutcome> {
  const t = Math.floor(clock() / 1000);
  return postWebhook(new URL(w.url), body, {
    timeoutMs: options.timeoutMs,
    allowPrivate: options.allowPrivate,
    headers: {
      'content-type': 'application/json',
      'user-agent': `kvb/${VERSION}`,
      'kvb-webhook-id': w.id,
      [SIGNATURE_HEADER]: signDelivery(w.secret, t, body),
    },
  });
}

/** `kvb hook test`: one `test` event, signed like any delivery; it moves no position. */
export async function sendTestDelivery(
  w: { id: string; bucket: string; url: string; secret: string; position: number },
  clock: Clock,
  config: { webhookTimeoutSeconds: number; webhookAllowPrivate: boolean },
): Promise<DeliveryAttempt> {
  const started = clock();
  const event = `{"id":${JSON.stringify(`${w.bucket}:test:${started}`)},"type":"test","rev":${w.position}}`;
  const body = `{"webhook":${JSON.stringify(w.id)},"bucket":${JSON.stringify(w.bucket)},"events":[${event}]}`;
  const outcome = await postSigned(w, body, clock, {
    timeoutMs: config.webhookTimeoutSeconds * 1000,
    allowPrivate: config.webhookAllowPrivate,
  });
  return attemptOf(outcome, started, clock() - started, { events: [event], firstRevision: w.position, upTo: w.position });
}

/** The log entry of one attempt: a 2xx has no error; anything else says what came back. */
export function attemptOf(outcome: PostOutcome, attemptedAt: number, latencyMs: number, batch: Batch): DeliveryAttempt {
  const ok = outcome.status !== null && outcome.status >= 200 && outcome.status < 300;
  const error =
    outcome.status === null ? outcome.error : ok ? null : `HTTP ${outcome.status}${outcome.excerpt ? `: ${outcome.excerpt}` : ''}`;
  return {
    attemptedAt,
    firstRevision: batch.firstRevision,
    lastRevision: batch.upTo,
    status: outcome.status,
    latencyMs: Math.max(0, Math.round(latencyMs)),
    error: error === null ? null : error.slice(0, 300),
  };
}
