import { withClient } from '../helpers/backend.js';
import type { Instance } from './instances.js';
import type { Random } from './random.js';
import { now } from './recorder.js';
import { send } from './send.js';
import type { WebhookHistory, WebhookSubscription } from './webhook-history.js';
import { WebhookReceiver } from './webhook-receiver.js';
import { sleep } from './workload.js';

/**
 * The webhook scenarios' side of a run: the bucket's secret key (webhooks need one), two
 * subscriptions (one on `r/`, one on the whole bucket) posting to the receiver, the lease holder
 * a `kill-holder` fault aims at, and, once writes stop, the wait until every subscription has
 * acknowledged the final revision.
 */

/** The scenario's bucket admin credential: the workload itself stays anonymous (a bucket with only a secret key is public). */
export const WEBHOOK_BUCKET_KEY = 'robustness-webhooks-admin';
/**
 * `kvb serve` arguments: deliveries to the runner on 127.0.0.1, with a 3 s timeout. A 2xx that
 * reaches kvb after its timeout is no acknowledgement, yet the receiver recorded it as one: the
 * timeout stays well above the stalls of a loaded machine, and the receiver's own "no answer"
 * closes the connection after 1.5 s instead of waiting the timeout out.
 */
export const WEBHOOK_ARGS = ['--webhook-allow-private', '--webhook-timeout', '3'];
/** A lease of 6 s (30 s by default, no flag; at least twice the timeout): a killed holder's webhooks are taken over within the run. */
export const WEBHOOK_ENV = { KVB_WEBHOOK_LEASE_MS: '6000' };
const PREFIXES = ['r/', ''];
const auth = { authorization: `Bearer ${WEBHOOK_BUCKET_KEY}` };
/** Bounds the wait for the deliveries to catch up once writes stop (backoff after a streak of failures, a lease to run out). */
const CATCH_UP_MS = 45_000;

export class WebhookRun {
  readonly kills: number[] = [];
  private readonly receiver: WebhookReceiver;
  private readonly subscriptions: WebhookSubscription[] = [];

  constructor(
    private readonly instances: Instance[],
    private readonly bucket: string,
    random: Random,
  ) {
    this.receiver = new WebhookReceiver(random.fork(), (path) => this.subscriptions[Number(path.split('/').at(-1))]?.id ?? path);
  }

  /** Starts the receiver and adds the subscriptions (on the first instance). */
  async start(): Promise<void> {
    await this.receiver.start();
    for (const [n, prefix] of PREFIXES.entries()) {
      const ex = await send(`${this.instances[0]!.url}/api/v1/webhooks/${this.bucket}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...auth },
        body: JSON.stringify({ url: this.receiver.url(n), ...(prefix && { prefix }) }),
      });
      if (ex.answer?.status !== 201)
        throw new Error(`could not add a webhook: ${ex.answer?.status ?? ex.error?.code} ${ex.answer?.text ?? ''}`);
      const added = JSON.parse(ex.answer.text) as { id: string; secret: string; position: number };
      this.subscriptions.push({ id: added.id, prefix, secret: added.secret, position: added.position });
    }
  }

  /** The receiver stops failing requests: the run is healing. */
  heal(): void {
    this.receiver.heal();
  }

  /** Call just before each kill -9. */
  killed(): void {
    this.kills.push(now());
  }

  /**
   * The running instance that holds a live lease on a subscription (PostgreSQL: the holder starts
   * with its process id), looked for up to `waitMs`; undefined when none does.
   */
  async leaseHolder(waitMs: number): Promise<Instance | undefined> {
    const db = this.instances[0]!.db;
    const at = db.indexOf('?');
    const schema = new URLSearchParams(db.slice(at + 1)).get('schema');
    if (at < 0 || !schema) return undefined;
    const deadline = now() + waitMs;
    do {
      const rows = await withClient({ connectionString: db.slice(0, at) }, (c) =>
        c.query<{ holder: string | null; lease_until: string }>(`select holder, lease_until from "${schema}".webhooks`),
      ).then(
        (r) => r.rows,
        () => [],
      );
      const pids = rows.filter((r) => r.holder !== null && Number(r.lease_until) > Date.now()).map((r) => Number(r.holder!.split('@')[0]));
      const holder = this.instances.find((i) => i.running && pids.includes(i.pid ?? -1));
      if (holder) return holder;
      await sleep(200);
    } while (now() < deadline);
    return undefined;
  }

  /** Waits (bounded) until every subscription stands at `finalRevision` (when known), then hands back what was recorded. */
  async finish(finalRevision: number | undefined, errors: string[]): Promise<WebhookHistory> {
    const deadline = now() + CATCH_UP_MS;
    let behind = finalRevision === undefined ? [] : this.subscriptions.map((s) => s.id);
    for (let attempt = 0; behind.length > 0 && now() < deadline; attempt++) {
      const instance = this.instances[attempt % this.instances.length]!;
      const positions = await Promise.all(behind.map((id) => this.position(instance, id)));
      behind = behind.filter((_, i) => (positions[i] ?? -1) < finalRevision!);
      if (behind.length > 0) await sleep(250);
    }
    if (behind.length > 0)
      errors.push(`webhooks ${behind.join(', ')} did not reach revision ${finalRevision} within ${CATCH_UP_MS / 1000} s`);
    const log = await send(`${this.instances[0]!.url}/api/v1/${this.bucket}/?history=true&limit=1`, { headers: auth });
    const floor = Number(log.answer?.headers['kvb-history-floor']);
    if (!Number.isSafeInteger(floor)) errors.push(`could not read the history floor (${log.answer?.status ?? log.error?.code})`);
    return {
      bucket: this.bucket,
      subscriptions: this.subscriptions,
      deliveries: this.receiver.deliveries,
      kills: this.kills,
      finalRevision: finalRevision ?? null,
      floor: Number.isSafeInteger(floor) ? floor : 0,
    };
  }

  private async position(instance: Instance, id: string): Promise<number | undefined> {
    const ex = await send(`${instance.url}/api/v1/webhooks/${this.bucket}/${id}`, { headers: auth });
    return ex.answer?.status === 200 ? (JSON.parse(ex.answer.text) as { position: number }).position : undefined;
  }

  close(): Promise<void> {
    return this.receiver.close();
  }
}
