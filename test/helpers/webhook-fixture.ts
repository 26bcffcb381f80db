import type { ScannedWebhook } from '../../src/store/webhook-types.js';

/** A subscription as the delivery loop sees it (active, at position 0, no lease held), with `over` on top. */
export function testWebhook(over: Partial<ScannedWebhook> = {}): ScannedWebhook {
  return {
    id: 'wh_1',
    bucket: 'b',
    url: 'https://example.com/',
    prefix: 'p/',
    kinds: ['set', 'delete', 'expire'],
    state: 'active',
    pausedReason: null,
    position: 0,
    failingSince: null,
    attempts: 0,
    nextAttemptAt: 0,
    createdAt: 0,
    secret: 'whsec_x',
    holder: null,
    leaseUntil: 0,
    bucketRevision: null,
    ...over,
  };
}
