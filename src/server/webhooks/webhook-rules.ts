import type { Principal } from '../../auth/access.js';
import { KvbError, badRequest } from '../../errors.js';
import { WEBHOOK_KINDS, type WebhookKind } from '../../store/webhook-types.js';
import { authorize } from '../access-control.js';
import type { CachedBucket } from '../bucket-cache.js';
import { webhookUrlProblem } from './webhook-url.js';

// What a webhook must be, wherever one is added: by its route, or by a bucket's import.

/** Only a bucket's secret-key holder reaches its webhooks, and only in a bucket that has a secret key. */
export function authorizeWebhooks(bucket: CachedBucket, principal: Principal): void {
  authorize(bucket, principal, 'manage');
  // A bucket anyone may manage would let anyone make this server send requests.
  if (!bucket.flags.hasSecretKey) throw new KvbError('forbidden', 'webhooks need a bucket with a secret_key');
}

/** The URL checked (400 with the reason) and the kinds asked for (every kind when none are given). */
export function checkedWebhook(url: string, kinds: readonly string[] | undefined, allowPrivate: boolean): WebhookKind[] {
  const problem = webhookUrlProblem(url, allowPrivate);
  if (problem) throw badRequest(problem);
  const asked = kinds ?? [...WEBHOOK_KINDS];
  if (asked.length === 0 || new Set(asked).size !== asked.length || !asked.every((k) => WEBHOOK_KINDS.includes(k as WebhookKind)))
    throw badRequest(`kinds must list one or more of ${WEBHOOK_KINDS.join(', ')}, each once`);
  return asked as WebhookKind[];
}

/** The 409 of a bucket at its limit. */
export const webhookLimitReached = (limit: number) => new KvbError('conflict', `the bucket has its limit of ${limit} webhooks`);
