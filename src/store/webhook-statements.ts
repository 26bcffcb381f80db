// The webhook subscriptions' statements, written once for both dialects (see statements.ts).
import { type ExpressionBuilder, type Kysely, sql } from 'kysely';
import type { Dialect } from './dialect.js';
import type { Database } from './schema.js';
import { param } from './statements.js';

/** A subscription's columns as read (everything but the lease). */
export const WEBHOOK_COLUMNS = [
  'id',
  'bucket_id',
  'url',
  'prefix',
  'kinds',
  'state',
  'paused_reason',
  'position',
  'failing_since',
  'attempts',
  'next_attempt_at',
  'created_at',
] as const;

const DELIVERY_COLUMNS = ['attempted_at', 'first_revision', 'last_revision', 'status', 'latency_ms', 'error'] as const;

/** The number of subscriptions of the bucket `b` (the per-bucket limit's guard on an insert selecting from `buckets as b`). */
const bucketWebhookCount = (eb: ExpressionBuilder<Database & { b: Database['buckets'] }, 'b'>) =>
  eb.selectFrom('webhooks as w').select(eb.fn.countAll().as('n')).whereRef('w.bucket_id', '=', 'b.id');

export function webhookStatements(db: Kysely<Database>, dialect: Dialect) {
  const bytes = sql.raw(dialect === 'sqlite' ? 'blob' : 'bytea');
  return {
    /** Adds one unless the bucket is gone or already has `limit` of them (one statement: the check and the insert agree). */
    addWebhook: db
      .insertInto('webhooks')
      .columns(['id', 'bucket_id', 'url', 'prefix', 'kinds', 'secret', 'state', 'position', 'created_at'])
      .expression(
        db
          .selectFrom('buckets as b')
          .select([
            sql`cast(${param('id')} as text)`.as('id'),
            'b.id as bucket_id',
            sql`cast(${param('url')} as text)`.as('url'),
            sql`cast(${param('prefix')} as ${bytes})`.as('prefix'),
            sql`cast(${param('kinds')} as text)`.as('kinds'),
            sql`cast(${param('secret')} as text)`.as('secret'),
            sql`cast('active' as text)`.as('state'),
            'b.revision as position',
            sql`cast(${param('now')} as bigint)`.as('created_at'),
          ])
          .where('b.id', '=', param('bucket'))
          .where(bucketWebhookCount, '<', param('limit')),
      ),
    /**
     * Puts back one subscription as a dump or an import carries it: every column given (a
     * restore's position and retry state, an import's placeholder until placeWebhook), with
     * addWebhook's guard on the bucket and its limit.
     */
    restoreWebhook: db
      .insertInto('webhooks')
      .columns([
        'id',
        'bucket_id',
        'url',
        'prefix',
        'kinds',
        'secret',
        'state',
        'paused_reason',
        'position',
        'failing_since',
        'attempts',
        'next_attempt_at',
        'created_at',
      ])
      .expression(
        db
          .selectFrom('buckets as b')
          .select([
            sql`cast(${param('id')} as text)`.as('id'),
            'b.id as bucket_id',
            sql`cast(${param('url')} as text)`.as('url'),
            sql`cast(${param('prefix')} as ${bytes})`.as('prefix'),
            sql`cast(${param('kinds')} as text)`.as('kinds'),
            sql`cast(${param('secret')} as text)`.as('secret'),
            sql`cast(${param('state')} as text)`.as('state'),
            sql`cast(${param('reason')} as text)`.as('paused_reason'),
            sql`cast(${param('position')} as bigint)`.as('position'),
            sql`cast(${param('failingSince')} as bigint)`.as('failing_since'),
            sql`cast(${param('attempts')} as integer)`.as('attempts'),
            sql`cast(${param('nextAttemptAt')} as bigint)`.as('next_attempt_at'),
            sql`cast(${param('createdAt')} as bigint)`.as('created_at'),
          ])
          .where('b.id', '=', param('bucket'))
          .where(bucketWebhookCount, '<', param('limit')),
      ),
    /** An imported subscription, once its bucket holds the import: from that revision on, in the state it was exported in. */
    placeWebhook: db
      .updateTable('webhooks')
      .set({ position: param('position'), state: param('state'), paused_reason: param('reason') })
      .where('id', '=', param('id'))
      .where('bucket_id', '=', param('bucket')),
    listWebhooks: db
      .selectFrom('webhooks')
      .select(WEBHOOK_COLUMNS)
      .where('bucket_id', '=', param('bucket'))
      .orderBy('created_at')
      .orderBy('id'),
    getWebhook: db.selectFrom('webhooks').select(WEBHOOK_COLUMNS).where('id', '=', param('id')).where('bucket_id', '=', param('bucket')),
    pauseWebhook: db
      .updateTable('webhooks')
      .set({ state: sql.lit('paused'), paused_reason: param('reason') })
      .where('id', '=', param('id'))
      .where('bucket_id', '=', param('bucket')),
    /** Resumes from the stored position, with a fresh retry budget. */
    resumeWebhook: db
      .updateTable('webhooks')
      .set({
        state: sql.lit('active'),
        paused_reason: sql.lit(null),
        attempts: sql.lit(0),
        failing_since: sql.lit(null),
        next_attempt_at: sql.lit(0),
      })
      .where('id', '=', param('id'))
      .where('bucket_id', '=', param('bucket')),
    rotateWebhook: db
      .updateTable('webhooks')
      .set({ secret: param('secret') })
      .where('id', '=', param('id'))
      .where('bucket_id', '=', param('bucket')),
    removeWebhook: db.deleteFrom('webhooks').where('id', '=', param('id')).where('bucket_id', '=', param('bucket')),
    removeWebhookDeliveries: db.deleteFrom('webhook_deliveries').where('webhook_id', '=', param('id')),
    removeBucketWebhookDeliveries: db
      .deleteFrom('webhook_deliveries')
      .where('webhook_id', 'in', (eb) => eb.selectFrom('webhooks').select('id').where('bucket_id', '=', param('bucket'))),
    removeBucketWebhooks: db.deleteFrom('webhooks').where('bucket_id', '=', param('bucket')),
    /**
     * Every subscription (delivery and metrics; a deployment has few), with its bucket's revision
     * (null once the bucket is gone): the delivery loop's scan sees which have changes waiting
     * without a statement per subscription.
     */
    allWebhooks: db
      .selectFrom('webhooks as w')
      .leftJoin('buckets as b', 'b.id', 'w.bucket_id')
      .select([...WEBHOOK_COLUMNS.map((c) => `w.${c}` as const), 'w.secret', 'w.holder', 'w.lease_until', 'b.revision as bucket_revision'])
      .orderBy('w.id'),
    /** One subscription with its secret and lease, as a delivery (after taking the lease) or a test reads it. */
    deliverableWebhook: db
      .selectFrom('webhooks')
      .select([...WEBHOOK_COLUMNS, 'secret', 'holder', 'lease_until'])
      .where('id', '=', param('id')),
    /** Takes or renews a subscription's lease: free, expired, or already this holder's. */
    claimWebhook: db
      .updateTable('webhooks')
      .set({ holder: param('holder'), lease_until: param('until') })
      .where('id', '=', param('id'))
      .where((eb) => eb.or([eb('holder', 'is', null), eb('lease_until', '<=', param('now')), eb('holder', '=', param('holder'))])),
    /** Extends the lease this holder still has (with a delivery's outcome, in its write). */
    renewWebhook: db
      .updateTable('webhooks')
      .set({ lease_until: param('until') })
      .where('id', '=', param('id'))
      .where('holder', '=', param('holder')),
    releaseWebhook: db
      .updateTable('webhooks')
      .set({ holder: sql.lit(null), lease_until: sql.lit(0) })
      .where('id', '=', param('id'))
      .where('holder', '=', param('holder')),
    /**
     * After a 2xx: the position advances, the retry state clears. Only while this holder has the
     * lease, so a delivery taken over meanwhile cannot move it.
     */
    acknowledgeWebhook: db
      .updateTable('webhooks')
      .set({ position: param('position'), attempts: sql.lit(0), failing_since: sql.lit(null), next_attempt_at: sql.lit(0) })
      .where('id', '=', param('id'))
      .where('holder', '=', param('holder'))
      .where('position', '<', param('position')),
    /** After a failure: the next attempt's time, or (past the bound) paused with the reason. */
    failWebhook: db
      .updateTable('webhooks')
      .set({
        attempts: param('attempts'),
        failing_since: param('failingSince'),
        next_attempt_at: param('nextAttemptAt'),
        state: param('state'),
        paused_reason: param('reason'),
      })
      .where('id', '=', param('id'))
      .where('holder', '=', param('holder'))
      .where('state', '=', sql.lit('active')),
    logDelivery: db.insertInto('webhook_deliveries').values({
      webhook_id: param('id'),
      attempt: param('attempt'),
      attempted_at: param('attemptedAt'),
      first_revision: param('firstRevision'),
      last_revision: param('lastRevision'),
      status: param('status'),
      latency_ms: param('latencyMs'),
      error: param('error'),
    }),
    /** Keeps the newest `keep` attempts of a subscription. */
    trimDeliveries: db
      .deleteFrom('webhook_deliveries')
      .where('webhook_id', '=', param('id'))
      .where('attempted_at', '<=', (eb) =>
        eb
          .selectFrom('webhook_deliveries as d')
          .select('d.attempted_at')
          .where('d.webhook_id', '=', param('id'))
          .orderBy('d.attempted_at', 'desc')
          .limit(sql.lit(1))
          .offset(param('keep')),
      ),
    deliveries: db
      .selectFrom('webhook_deliveries')
      .select(DELIVERY_COLUMNS)
      .where('webhook_id', '=', param('id'))
      .orderBy('attempted_at', 'desc')
      .limit(param('limit')),
  };
}

export type WebhookStatementName = keyof ReturnType<typeof webhookStatements>;
