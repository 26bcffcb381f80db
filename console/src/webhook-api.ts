/**
 * The console's calls to a bucket's webhook routes (/api/v1/webhooks/{bucket}/…), each made by the
 * client library through api.ts's `call`, for the bucket's secret-key holder.
 */

import type { WebhookAttempt, WebhookInfo, WebhookKind } from '../../src/client/webhook-requests.js';
import { type Connection, call, listKeys } from './api.js';

export type { WebhookAttempt, WebhookInfo, WebhookKind };

/** The change kinds a webhook may ask for, in the order the form offers them. */
export const WEBHOOK_KINDS: readonly WebhookKind[] = ['set', 'delete', 'expire'];

/** The bucket's webhooks, and its revision (how far behind each is: its lag). */
export async function listWebhooks(c: Connection): Promise<{ webhooks: WebhookInfo[]; revision: number }> {
  const [webhooks, page] = await Promise.all([call(c.credential, (http) => http.listWebhooks(c.bucket)), listKeys(c, '', undefined, 0)]);
  return { webhooks, revision: page.revision };
}

/** Adds one; the answer carries its signing secret, shown this once. */
export function addWebhook(c: Connection, url: string, prefix: string, kinds: WebhookKind[]): Promise<WebhookInfo & { secret: string }> {
  return call(c.credential, (http) => http.addWebhook(c.bucket, { url, ...(prefix && { prefix }), kinds }));
}

export function setWebhookState(c: Connection, id: string, state: 'active' | 'paused'): Promise<WebhookInfo> {
  return call(c.credential, (http) => http.setWebhookState(c.bucket, id, state));
}

export function deleteWebhook(c: Connection, id: string): Promise<void> {
  return call(c.credential, (http) => http.deleteWebhook(c.bucket, id));
}

/** A new signing secret, shown this once. */
export async function rotateWebhookSecret(c: Connection, id: string): Promise<string> {
  return (await call(c.credential, (http) => http.rotateWebhookSecret(c.bucket, id))).secret;
}

export function testWebhook(c: Connection, id: string): Promise<WebhookAttempt> {
  return call(c.credential, (http) => http.testWebhook(c.bucket, id));
}

/** The latest delivery attempts, newest first. */
export function webhookDeliveries(c: Connection, id: string): Promise<WebhookAttempt[]> {
  return call(c.credential, (http) => http.webhookDeliveries(c.bucket, id));
}
