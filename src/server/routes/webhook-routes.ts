import type { FastifyInstance, FastifyRequest } from 'fastify';
import { KvbError } from '../../errors.js';
import type { DeliveryAttempt, Webhook, WebhookKind } from '../../store/webhook-types.js';
import { checkKey } from '../../values/keys.js';
import { openBucket } from '../access-control.js';
import { decodeBucket, parseInteger } from '../request-input.js';
import type { ServerContext } from '../server-context.js';
import { DELIVERY_LOG_KEEP } from '../webhooks/webhook-deliverer.js';
import { sendTestDelivery } from '../webhooks/webhook-send.js';
import { newWebhookId, newWebhookSecret } from '../webhooks/webhook-signature.js';
import { authorizeWebhooks, checkedWebhook, webhookLimitReached } from '../webhooks/webhook-rules.js';
import { webhookSchemas } from './webhook-schemas.js';

/** A subscription as answered: never its secret. */
export function webhookView(w: Webhook) {
  return {
    id: w.id,
    url: w.url,
    prefix: w.prefix,
    kinds: w.kinds,
    state: w.state,
    paused_reason: w.pausedReason,
    position: w.position,
    attempts: w.attempts,
    failing_since: w.failingSince === null ? null : new Date(w.failingSince).toISOString(),
    next_attempt_at: w.attempts > 0 && w.state === 'active' ? new Date(w.nextAttemptAt).toISOString() : null,
    created_at: new Date(w.createdAt).toISOString(),
  };
}

interface Params {
  bucket: string;
  id?: string;
}

/** Who may reach a bucket's webhooks, and one of them by id (404 when it is not the bucket's). */
function webhookAccess({ buckets, store }: ServerContext) {
  /** The bucket, once its secret-key holder is the caller. */
  const manage = async (request: FastifyRequest) => {
    const id = decodeBucket((request.params as Params).bucket);
    const { bucket, principal } = await openBucket(buckets, id, request);
    authorizeWebhooks(bucket, principal);
    return id;
  };
  const found = async (bucket: string, request: FastifyRequest | { params: Params }) => {
    const w = await store.webhooks.get(bucket, (request.params as Params).id ?? '');
    if (!w) throw new KvbError('not_found', 'no such webhook');
    return w;
  };
  return { manage, found };
}

/**
 * `/api/v1/webhooks/{bucket}[/{id}[/secret|/test|/deliveries]]`: a bucket's webhook subscriptions,
 * for its secret-key holder only. Outside `/api/v1/{bucket}/`, where every path names a key: bucket
 * ids are UUIDs, so no bucket is called `webhooks`, and no key path changes meaning.
 */
export async function webhookRoutes(app: FastifyInstance, ctx: ServerContext): Promise<void> {
  const { store, config, clock } = ctx;
  const { manage, found } = webhookAccess(ctx);

  app.get('/api/v1/webhooks/:bucket', { schema: webhookSchemas.list }, async (request) => {
    const bucket = await manage(request);
    return (await store.webhooks.list(bucket)).map(webhookView);
  });

  app.post('/api/v1/webhooks/:bucket', { schema: webhookSchemas.add }, async (request, reply) => {
    const bucket = await manage(request);
    const body = request.body as { url: string; prefix?: string; kinds?: WebhookKind[] };
    const kinds = checkedWebhook(body.url, body.kinds, config.webhookAllowPrivate);
    const prefix = body.prefix === undefined || body.prefix === '' ? '' : checkKey(body.prefix, 'prefix');
    const id = newWebhookId();
    const secret = newWebhookSecret();
    const added = await store.webhooks.add({ id, bucket, url: body.url, prefix, kinds, secret }, config.maxWebhooksPerBucket, clock());
    if (!added) throw webhookLimitReached(config.maxWebhooksPerBucket);
    const w = await found(bucket, { params: { bucket, id } });
    reply.code(201).header('location', `/api/v1/webhooks/${bucket}/${id}`);
    // The one time the secret is shown.
    return { ...webhookView(w), secret };
  });

  app.get('/api/v1/webhooks/:bucket/:id', { schema: webhookSchemas.get }, async (request) => {
    const bucket = await manage(request);
    return webhookView(await found(bucket, request));
  });

  app.patch('/api/v1/webhooks/:bucket/:id', { schema: webhookSchemas.update }, async (request) => {
    const bucket = await manage(request);
    const w = await found(bucket, request);
    const { state } = request.body as { state: 'active' | 'paused' };
    if (state === 'paused') await store.webhooks.pause(bucket, w.id, 'paused by request');
    else await store.webhooks.resume(bucket, w.id);
    return webhookView(await found(bucket, request));
  });

  app.delete('/api/v1/webhooks/:bucket/:id', { schema: webhookSchemas.remove }, async (request, reply) => {
    const bucket = await manage(request);
    if (!(await store.webhooks.remove(bucket, (request.params as Params).id ?? ''))) throw new KvbError('not_found', 'no such webhook');
    return reply.code(204).send();
  });

  app.post('/api/v1/webhooks/:bucket/:id/secret', { schema: webhookSchemas.rotate }, async (request) => {
    const bucket = await manage(request);
    const w = await found(bucket, request);
    const secret = newWebhookSecret();
    await store.webhooks.rotate(bucket, w.id, secret);
    return { id: w.id, secret };
  });
  await webhookLogRoutes(app, ctx);
}

const attemptView = (a: DeliveryAttempt) => ({
  attempted_at: new Date(a.attemptedAt).toISOString(),
  first_revision: a.firstRevision,
  last_revision: a.lastRevision,
  status: a.status,
  latency_ms: a.latencyMs,
  ok: a.error === null,
  error: a.error,
});

/** `…/{id}/test` and `…/{id}/deliveries`: a test event now, and the delivery log. */
async function webhookLogRoutes(app: FastifyInstance, ctx: ServerContext): Promise<void> {
  const { store, config, clock } = ctx;
  const { manage, found } = webhookAccess(ctx);

  app.post('/api/v1/webhooks/:bucket/:id/test', { schema: webhookSchemas.test }, async (request) => {
    const bucket = await manage(request);
    const w = await found(bucket, request);
    const secret = (await store.webhooks.deliverable(w.id))?.secret;
    if (secret === undefined) throw new KvbError('not_found', 'no such webhook');
    const attempt = await sendTestDelivery({ ...w, secret }, clock, config);
    await store.webhooks.log(w.id, attempt, DELIVERY_LOG_KEEP);
    return attemptView(attempt);
  });

  app.get('/api/v1/webhooks/:bucket/:id/deliveries', { schema: webhookSchemas.deliveries }, async (request) => {
    const bucket = await manage(request);
    const w = await found(bucket, request);
    const { limit } = request.query as { limit?: string };
    const n = limit === undefined ? DELIVERY_LOG_KEEP : parseInteger(limit, 'limit', 1, DELIVERY_LOG_KEEP);
    return (await store.webhooks.deliveries(w.id, n)).map(attemptView);
  });
}
