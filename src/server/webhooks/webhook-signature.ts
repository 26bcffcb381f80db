import { createHmac, timingSafeEqual } from 'node:crypto';

export { newWebhookId, newWebhookSecret } from '../../store/webhook-ids.js';

/** The header each delivery is signed in, as Stripe's: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "t.body">`. */
export const SIGNATURE_HEADER = 'kvb-signature';

const hmac = (secret: string, unixSeconds: number, body: string) =>
  createHmac('sha256', secret).update(`${unixSeconds}.`).update(body).digest('hex');

/** The `kvb-signature` value of `body` sent at `unixSeconds`. */
export function signDelivery(secret: string, unixSeconds: number, body: string): string {
  return `t=${unixSeconds},v1=${hmac(secret, unixSeconds, body)}`;
}

/** A receiver's check (docs/webhooks.md shows the same in a few lines): the signature matches and is no older than `toleranceSeconds`. */
export function verifyDelivery(secret: string, header: string, body: string, nowSeconds: number, toleranceSeconds = 300): boolean {
  const parts = new Map(header.split(',').map((p) => p.split('=', 2) as [string, string]));
  const t = Number(parts.get('t'));
  const v1 = parts.get('v1') ?? '';
  if (!Number.isInteger(t) || Math.abs(nowSeconds - t) > toleranceSeconds || !/^[0-9a-f]{64}$/.test(v1)) return false;
  return timingSafeEqual(Buffer.from(v1, 'hex'), Buffer.from(hmac(secret, t, body), 'hex'));
}
