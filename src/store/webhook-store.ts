import type { Dialect } from './dialect.js';
import type {
  DeliverableWebhook,
  DeliveryAttempt,
  DeliveryOutcome,
  FailureState,
  RestoredWebhook,
  ScannedWebhook,
  Webhook,
  WebhookKind,
  WebhookStore,
} from './webhook-types.js';
import type { WebhooksTable } from './schema.js';
import { type CompiledStatement, bind, compileAll, queryBuilder } from './statements.js';
import { type WebhookStatementName, webhookStatements } from './webhook-statements.js';

/** One statement with its arguments. */
export interface BoundStatement {
  statement: CompiledStatement;
  values: unknown[];
}

/**
 * How an engine runs the webhook statements: reads on any connection, writes (one or several,
 * in one transaction) where that engine writes. Each answers rows and, for writes, rows changed.
 */
export interface SqlPort {
  read<R>(statement: BoundStatement): Promise<R[]>;
  write(statements: BoundStatement[]): Promise<number[]>;
}

type Row = Pick<WebhooksTable, typeof import('./webhook-statements.js').WEBHOOK_COLUMNS[number]>;

const toWebhook = (row: Row): Webhook => ({
  id: row.id,
  bucket: row.bucket_id,
  url: row.url,
  prefix: Buffer.from(row.prefix).toString('utf8'),
  kinds: row.kinds.split(',').filter(Boolean) as WebhookKind[],
  state: row.state === 'paused' ? 'paused' : 'active',
  pausedReason: row.paused_reason,
  position: Number(row.position),
  failingSince: row.failing_since === null ? null : Number(row.failing_since),
  attempts: Number(row.attempts),
  nextAttemptAt: Number(row.next_attempt_at),
  createdAt: Number(row.created_at),
});

type DeliverableRow = Row & { secret: string; holder: string | null; lease_until: number };
const toDeliverable = (row: DeliverableRow): DeliverableWebhook => ({
  ...toWebhook(row),
  secret: row.secret,
  holder: row.holder,
  leaseUntil: Number(row.lease_until),
});

/** The WebhookStore of either engine: the statements once, run through the engine's port. */
export class SqlWebhookStore implements WebhookStore {
  private readonly sql: Record<WebhookStatementName, CompiledStatement>;
  private readonly subscribed: Array<() => void> = [];

  constructor(
    dialect: Dialect,
    schema: string | undefined,
    private readonly port: SqlPort,
  ) {
    this.sql = compileAll(webhookStatements(queryBuilder(dialect, schema), dialect));
  }

  private bound(name: WebhookStatementName, args: Record<string, unknown>): BoundStatement {
    const statement = this.sql[name];
    return { statement, values: bind(statement, args) };
  }

  private read<R>(name: WebhookStatementName, args: Record<string, unknown>): Promise<R[]> {
    return this.port.read<R>(this.bound(name, args));
  }

  private async change(name: WebhookStatementName, args: Record<string, unknown>): Promise<boolean> {
    const [changed] = await this.port.write([this.bound(name, args)]);
    return (changed ?? 0) > 0;
  }

  async add(webhook: Parameters<WebhookStore['add']>[0], limit: number, now: number): Promise<boolean> {
    const { id, bucket, url, prefix, kinds, secret } = webhook;
    const added = await this.change('addWebhook', {
      id,
      bucket,
      url,
      prefix: Buffer.from(prefix, 'utf8'),
      kinds: kinds.join(','),
      secret,
      now,
      limit,
    });
    if (added) this.notifySubscribed();
    return added;
  }

  onSubscribed(listener: () => void): void {
    this.subscribed.push(listener);
  }

  private notifySubscribed(): void {
    for (const listener of this.subscribed) listener();
  }

  restore(w: RestoredWebhook, limit: number): Promise<boolean> {
    return this.change('restoreWebhook', {
      id: w.id,
      bucket: w.bucket,
      url: w.url,
      prefix: Buffer.from(w.prefix, 'utf8'),
      kinds: w.kinds.join(','),
      secret: w.secret,
      state: w.state,
      reason: w.pausedReason,
      position: w.position,
      failingSince: w.failingSince,
      attempts: w.attempts,
      nextAttemptAt: w.nextAttemptAt,
      createdAt: w.createdAt,
      limit,
    });
  }

  /** An imported subscription taking its place (and state): one placed active is a subscription the delivery loop must look at. */
  async place(bucket: string, id: string, position: number, state: Webhook['state'], reason: string | null): Promise<boolean> {
    const placed = await this.change('placeWebhook', { bucket, id, position, state, reason });
    if (placed && state === 'active') this.notifySubscribed();
    return placed;
  }

  async list(bucket: string): Promise<Webhook[]> {
    return (await this.read<Row>('listWebhooks', { bucket })).map(toWebhook);
  }

  async get(bucket: string, id: string): Promise<Webhook | undefined> {
    const [row] = await this.read<Row>('getWebhook', { bucket, id });
    return row && toWebhook(row);
  }

  pause(bucket: string, id: string, reason: string) {
    return this.change('pauseWebhook', { bucket, id, reason });
  }

  async resume(bucket: string, id: string): Promise<boolean> {
    const resumed = await this.change('resumeWebhook', { bucket, id });
    if (resumed) this.notifySubscribed();
    return resumed;
  }

  rotate(bucket: string, id: string, secret: string) {
    return this.change('rotateWebhook', { bucket, id, secret });
  }

  async remove(bucket: string, id: string): Promise<boolean> {
    const [removed] = await this.port.write([this.bound('removeWebhook', { bucket, id }), this.bound('removeWebhookDeliveries', { id })]);
    return (removed ?? 0) > 0;
  }

  async removeBucket(bucket: string): Promise<void> {
    await this.port.write([this.bound('removeBucketWebhookDeliveries', { bucket }), this.bound('removeBucketWebhooks', { bucket })]);
  }

  async all(): Promise<ScannedWebhook[]> {
    const rows = await this.read<DeliverableRow & { bucket_revision: number | null }>('allWebhooks', {});
    return rows.map((row) => ({
      ...toDeliverable(row),
      bucketRevision: row.bucket_revision === null ? null : Number(row.bucket_revision),
    }));
  }

  async deliverable(id: string): Promise<DeliverableWebhook | undefined> {
    const [row] = await this.read<DeliverableRow>('deliverableWebhook', { id });
    return row && toDeliverable(row);
  }

  claim(id: string, holder: string, until: number, now: number) {
    return this.change('claimWebhook', { id, holder, until, now });
  }

  async release(id: string, holder: string): Promise<void> {
    await this.change('releaseWebhook', { id, holder });
  }

  acknowledge(id: string, holder: string, position: number) {
    return this.change('acknowledgeWebhook', { id, holder, position });
  }

  async fail(id: string, holder: string, s: FailureState): Promise<boolean> {
    const [changed] = await this.port.write([this.failed(id, holder, s)]);
    return (changed ?? 0) > 0;
  }

  private failed(id: string, holder: string, s: FailureState): BoundStatement {
    return this.bound('failWebhook', {
      id,
      holder,
      attempts: s.attempts,
      failingSince: s.failingSince,
      nextAttemptAt: s.nextAttemptAt,
      state: s.pausedReason === null ? 'active' : 'paused',
      reason: s.pausedReason,
    });
  }

  async log(id: string, a: DeliveryAttempt, keep: number): Promise<void> {
    await this.port.write(this.logged(id, a, keep));
  }

  private logged(id: string, a: DeliveryAttempt, keep: number): BoundStatement[] {
    const attempt = `${a.attemptedAt}-${Math.random().toString(36).slice(2, 10)}`;
    return [this.bound('logDelivery', { id, attempt, ...a }), this.bound('trimDeliveries', { id, keep })];
  }

  async settle(
    id: string,
    holder: string,
    outcome: DeliveryOutcome,
    leaseUntil: number,
    a: DeliveryAttempt,
    keep: number,
  ): Promise<boolean> {
    // The outcome first: the lease is renewed only if this holder still had it.
    const [changed] = await this.port.write([
      'position' in outcome
        ? this.bound('acknowledgeWebhook', { id, holder, position: outcome.position })
        : this.failed(id, holder, outcome.failure),
      this.bound('renewWebhook', { id, holder, until: leaseUntil }),
      ...this.logged(id, a, keep),
    ]);
    return (changed ?? 0) > 0;
  }

  async deliveries(id: string, limit: number): Promise<DeliveryAttempt[]> {
    const rows = await this.read<{
      attempted_at: number;
      first_revision: number;
      last_revision: number;
      status: number | null;
      latency_ms: number;
      error: string | null;
    }>('deliveries', { id, limit });
    return rows.map((r) => ({
      attemptedAt: Number(r.attempted_at),
      firstRevision: Number(r.first_revision),
      lastRevision: Number(r.last_revision),
      status: r.status === null ? null : Number(r.status),
      latencyMs: Number(r.latency_ms),
      error: r.error,
    }));
  }
}
