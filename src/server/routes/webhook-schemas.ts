/** Schemas of the webhook routes (webhook-routes.ts); shared pieces in schema-parts.ts. */
import { MAX_KEY_BYTES } from '../../limits.js';
import { WEBHOOK_KINDS } from '../../store/webhook-types.js';
import { adminCredential, bucketErrors, errorResponse, noBody } from './schema-parts.js';
import { MAX_WEBHOOK_URL_LENGTH } from '../webhooks/webhook-url.js';
import { CHANGE_KINDS } from '../../values/change-kind.js';

const WEBHOOKS = 'webhooks';

const bucketOnly = {
  type: 'object',
  properties: { bucket: { type: 'string', description: 'the bucket id' } },
  required: ['bucket'],
};
const webhookParams = {
  type: 'object',
  properties: { bucket: { type: 'string', description: 'the bucket id' }, id: { type: 'string', description: 'the webhook id' } },
  required: ['bucket', 'id'],
};
/** The credential may come in the query, as everywhere; nothing else may. */
const credentialQuery = (extra: Record<string, object> = {}) => ({
  type: 'object',
  properties: { access_token: { type: 'string' }, key: { type: 'string' }, ...extra },
  additionalProperties: false,
});

const WEBHOOK_EXAMPLE = {
  id: 'wh_3kTq9vXb2LmA',
  url: 'https://hooks.example.com/kvb',
  prefix: 'orders/',
  kinds: CHANGE_KINDS,
  state: 'active',
  paused_reason: null,
  position: 42,
  attempts: 0,
  failing_since: null,
  next_attempt_at: null,
  created_at: '2026-11-29T10:00:00.000Z',
};
const SECRET_EXAMPLE = 'whsec_Zm9yIGV4YW1wbGUgb25seSwgbm90IGEga2V5';
const ATTEMPT_EXAMPLE = {
  attempted_at: '2026-11-29T10:00:01.000Z',
  first_revision: 43,
  last_revision: 45,
  status: 200,
  latency_ms: 38,
  ok: true,
  error: null,
};

export const webhook = {
  type: 'object',
  description: 'A webhook subscription (never its secret)',
  properties: {
    id: { type: 'string' },
    url: { type: 'string' },
    prefix: { type: 'string', description: 'only keys with this prefix ("" for all)' },
    kinds: { type: 'array', items: { type: 'string', enum: [...WEBHOOK_KINDS] } },
    state: { type: 'string', enum: ['active', 'paused'] },
    paused_reason: { type: ['string', 'null'] },
    position: { type: 'integer', description: 'the newest revision the receiver acknowledged (or that was before the webhook)' },
    attempts: { type: 'integer', description: 'failed attempts since the last success' },
    failing_since: { type: ['string', 'null'], format: 'date-time' },
    next_attempt_at: { type: ['string', 'null'], format: 'date-time', description: 'when a retry is due' },
    created_at: { type: 'string', format: 'date-time' },
  },
  examples: [WEBHOOK_EXAMPLE],
};

const attempt = {
  type: 'object',
  properties: {
    attempted_at: { type: 'string', format: 'date-time' },
    first_revision: { type: 'integer' },
    last_revision: { type: 'integer' },
    status: { type: ['integer', 'null'], description: "the receiver's HTTP status; null when none came" },
    latency_ms: { type: 'integer' },
    ok: { type: 'boolean' },
    error: { type: ['string', 'null'], description: 'what went wrong, with a short excerpt of the answer' },
  },
  examples: [ATTEMPT_EXAMPLE],
};

const noWebhook = errorResponse('not_found', 'No such bucket or webhook', 'no such webhook');
const errors = { ...bucketErrors, 404: noWebhook };
export const secret = { type: 'string', description: 'signs each delivery; shown only here' };

export const webhookSchemas = {
  list: {
    tags: [WEBHOOKS],
    operationId: 'listWebhooks',
    summary: "List a bucket's webhooks",
    params: bucketOnly,
    querystring: credentialQuery(),
    security: adminCredential,
    response: { 200: { type: 'array', items: webhook, examples: [[WEBHOOK_EXAMPLE]] }, ...bucketErrors },
  },
  add: {
    tags: [WEBHOOKS],
    operationId: 'addWebhook',
    summary: 'Add a webhook: each change under the prefix is POSTed to the URL, signed with the secret answered (once)',
    params: bucketOnly,
    querystring: credentialQuery(),
    security: adminCredential,
    body: {
      type: 'object',
      properties: {
        url: { type: 'string', minLength: 1, maxLength: MAX_WEBHOOK_URL_LENGTH, description: 'https:// to a public address' },
        prefix: { type: 'string', description: `only keys with this prefix (up to ${MAX_KEY_BYTES} bytes); default all` },
        kinds: { type: 'array', items: { type: 'string', enum: [...WEBHOOK_KINDS] }, description: 'default all' },
      },
      required: ['url'],
      additionalProperties: false,
    },
    response: {
      201: { ...webhook, properties: { ...webhook.properties, secret }, examples: [{ ...WEBHOOK_EXAMPLE, secret: SECRET_EXAMPLE }] },
      409: errorResponse('conflict', 'The bucket has its limit of webhooks', 'the bucket has its limit of 10 webhooks'),
      ...bucketErrors,
    },
  },
  get: {
    tags: [WEBHOOKS],
    operationId: 'getWebhook',
    summary: 'Read one webhook',
    params: webhookParams,
    querystring: credentialQuery(),
    security: adminCredential,
    response: { 200: webhook, ...errors },
  },
  update: {
    tags: [WEBHOOKS],
    operationId: 'updateWebhook',
    summary: 'Pause or resume a webhook (resuming replays from its position)',
    params: webhookParams,
    querystring: credentialQuery(),
    security: adminCredential,
    body: {
      type: 'object',
      properties: { state: { type: 'string', enum: ['active', 'paused'] } },
      required: ['state'],
      additionalProperties: false,
    },
    response: { 200: webhook, ...errors },
  },
  remove: {
    tags: [WEBHOOKS],
    operationId: 'deleteWebhook',
    summary: 'Delete a webhook',
    params: webhookParams,
    querystring: credentialQuery(),
    security: adminCredential,
    response: { 204: noBody('Deleted'), ...errors },
  },
  rotate: {
    tags: [WEBHOOKS],
    operationId: 'rotateWebhookSecret',
    summary: "Replace a webhook's signing secret (answered once); deliveries from now on are signed with it",
    params: webhookParams,
    querystring: credentialQuery(),
    security: adminCredential,
    response: {
      200: {
        type: 'object',
        properties: { id: { type: 'string' }, secret },
        examples: [{ id: WEBHOOK_EXAMPLE.id, secret: SECRET_EXAMPLE }],
      },
      ...errors,
    },
  },
  test: {
    tags: [WEBHOOKS],
    operationId: 'testWebhook',
    summary: 'Send one signed `test` event now and answer how it went (logged; moves no position)',
    params: webhookParams,
    querystring: credentialQuery(),
    security: adminCredential,
    response: { 200: attempt, ...errors },
  },
  deliveries: {
    tags: [WEBHOOKS],
    operationId: 'webhookDeliveries',
    summary: "A webhook's latest delivery attempts, newest first",
    params: webhookParams,
    querystring: credentialQuery({ limit: { type: 'string', pattern: '^[0-9]+$' } }),
    security: adminCredential,
    response: { 200: { type: 'array', items: attempt, examples: [[ATTEMPT_EXAMPLE]] }, ...errors },
  },
};
