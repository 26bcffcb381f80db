import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { badRequest } from '../errors.js';
import { checkKey } from '../values/keys.js';
import { newWebhookSecret } from './webhook-ids.js';
import { type RestoredWebhook, WEBHOOK_KINDS, type WebhookKind } from './webhook-types.js';

// A bucket's webhooks in a dump (`kvb db dump|restore`). Each keeps its id, position and retry
// state, so a restored server resumes where the dumped one stood. The signing secret is never
// written in clear: sealed (AES-256-GCM) with the operator's key when one is given, else left out,
// and a webhook restored without its secret comes back paused until its secret is rotated.

const SEALED = /^aes-256-gcm:([A-Za-z0-9_-]{16}):([A-Za-z0-9_-]+):([A-Za-z0-9_-]{22})$/;

/** Why a webhook restored without its secret is paused. */
export const NO_SECRET_REASON = 'restored without its signing secret: rotate the secret, give it to the receiver, then resume';

/** The operator's key for sealing secrets: 32 bytes written as 64 hex digits (`openssl rand -hex 32`). */
export function secretsKeyOf(text: string): Buffer {
  const hex = text.trim();
  if (!/^[0-9a-fA-F]{64}$/.test(hex)) throw badRequest('the secrets key must be 64 hex digits (32 bytes: openssl rand -hex 32)');
  return Buffer.from(hex, 'hex');
}

/** Sealed to its webhook: the id is authenticated with it, so a sealed secret cannot be moved to another webhook. */
function seal(secret: string, id: string, key: Buffer): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv).setAAD(Buffer.from(id));
  const sealed = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
  return `aes-256-gcm:${iv.toString('base64url')}:${sealed.toString('base64url')}:${cipher.getAuthTag().toString('base64url')}`;
}

function unseal(sealed: string, id: string, key: Buffer): string {
  const [, iv, data, tag] = SEALED.exec(sealed) ?? [];
  if (!iv || !data || !tag) throw badRequest('a sealed secret is malformed');
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url')).setAAD(Buffer.from(id));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(data, 'base64url')), decipher.final()]).toString('utf8');
  } catch {
    throw badRequest(`the secrets key does not open webhook ${id}'s secret (a different key?)`);
  }
}

interface WebhookLine {
  kvb: 'webhook';
  id: string;
  url: string;
  prefix: string;
  kinds: WebhookKind[];
  state: 'active' | 'paused';
  paused_reason: string | null;
  position: number;
  failing_since: number | null;
  attempts: number;
  next_attempt_at: number;
  created_at: number;
  /** Sealed with the operator's key, or null when the dump was written without one. */
  secret: string | null;
}

/** One webhook's dump line, its secret sealed with `key` or left out. */
export function webhookDumpLine(w: RestoredWebhook, key: Buffer | undefined): string {
  const line: WebhookLine = {
    kvb: 'webhook',
    id: w.id,
    url: w.url,
    prefix: w.prefix,
    kinds: w.kinds,
    state: w.state,
    paused_reason: w.pausedReason,
    position: w.position,
    failing_since: w.failingSince,
    attempts: w.attempts,
    next_attempt_at: w.nextAttemptAt,
    created_at: w.createdAt,
    secret: key ? seal(w.secret, w.id, key) : null,
  };
  return `${JSON.stringify(line)}\n`;
}

const count = (v: unknown) => Number.isSafeInteger(v) && (v as number) >= 0;

/**
 * A dumped webhook as it is restored into `bucket`: with its secret when the dump sealed it and
 * `key` opens it; otherwise paused with a new secret no one knows (NO_SECRET_REASON).
 */
export function webhookFromDump(line: WebhookLine, bucket: string, key: Buffer | undefined): RestoredWebhook {
  const kinds = line.kinds as unknown;
  if (
    typeof line.id !== 'string' ||
    !/^wh_[\w-]+$/.test(line.id) ||
    typeof line.url !== 'string' ||
    typeof line.prefix !== 'string' ||
    !Array.isArray(kinds) ||
    !kinds.every((k) => WEBHOOK_KINDS.includes(k as WebhookKind)) ||
    (line.state !== 'active' && line.state !== 'paused') ||
    !(line.paused_reason === null || typeof line.paused_reason === 'string') ||
    !count(line.position) ||
    !(line.failing_since === null || count(line.failing_since)) ||
    !count(line.attempts) ||
    !count(line.next_attempt_at) ||
    !count(line.created_at) ||
    !(line.secret === null || typeof line.secret === 'string')
  ) {
    throw badRequest('malformed webhook line');
  }
  if (line.prefix !== '') checkKey(line.prefix, 'prefix');
  const secret = line.secret !== null && key ? unseal(line.secret, line.id, key) : undefined;
  const webhook: RestoredWebhook = {
    id: line.id,
    bucket,
    url: line.url,
    prefix: line.prefix,
    kinds: line.kinds,
    state: line.state,
    pausedReason: line.paused_reason,
    position: line.position,
    failingSince: line.failing_since,
    attempts: line.attempts,
    nextAttemptAt: line.next_attempt_at,
    createdAt: line.created_at,
    secret: secret ?? newWebhookSecret(),
  };
  return secret === undefined ? { ...webhook, state: 'paused', pausedReason: NO_SECRET_REASON } : webhook;
}

export type { WebhookLine };
