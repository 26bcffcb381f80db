import { randomBytes } from 'node:crypto';

// A webhook's id and signing secret, made where a subscription is added (the routes) and where
// one is put back without its secret (a restore): one shape for both.

/** A new signing secret: shown once when a webhook is added or its secret rotated. */
export const newWebhookSecret = () => `whsec_${randomBytes(24).toString('base64url')}`;

/** A new webhook id. */
export const newWebhookId = () => `wh_${randomBytes(9).toString('base64url')}`;
