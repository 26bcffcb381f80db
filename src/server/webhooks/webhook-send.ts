import type { DeliveryAttempt } from '../../store/webhook-types.js';
import { VERSION } from '../../version.js';
import type { Clock } from '../clock.js';
import type { Batch } from './webhook-batch.js';
import { type PostOptions, type PostOutcome, postWebhook } from './webhook-post.js';
import { SIGNATURE_HEADER, signDelivery } from './webhook-signature.js';

/** POSTs a signed body to a subscription's URL (the secret signs; it is never logged). */
export function postSigned(
  w: { id: string; url: string; secret: string },
  body: string,
  clock: Clock,
  options: Pick<PostOptions, 'timeoutMs' | 'allowPrivate' | 'agent'>,
): Promise<PostOutcome> {
  const t = Math.floor(clock() / 1000);
  return postWebhook(new URL(w.url), body, {
    timeoutMs: options.timeoutMs,
    allowPrivate: options.allowPrivate,
    agent: options.agent,
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
