import type { CallOptions } from './http-types.js';
import { callOf, type HttpTransport, jsonOf } from './http-transport.js';
import type { ChangeKind } from '../values/change-kind.js';

// The webhook routes (/api/v1/webhooks/{bucket}/…): a bucket's subscriptions, for its secret-key holder.

/** The change kinds a webhook may ask for: every kind of change. */
export type WebhookKind = ChangeKind;

/** A webhook as the server shows it (never its secret). */
export interface WebhookInfo {
  id: string;
  url: string;
  prefix: string;
  kinds: WebhookKind[];
  state: 'active' | 'paused';
  paused_reason: string | null;
  /** The newest revision its receiver acknowledged. */
  position: number;
  attempts: number;
  failing_since: string | null;
  next_attempt_at: string | null;
  created_at: string;
}

/** One attempt in a webhook's delivery log. */
export interface WebhookAttempt {
  attempted_at: string;
  first_revision: number;
  last_revision: number;
  status: number | null;
  latency_ms: number;
  ok: boolean;
  error: string | null;
}

export interface WebhookRequest {
  url: string;
  prefix?: string;
  kinds?: WebhookKind[];
}

const hookPath = (bucket: string, id?: string, tail = ''): string =>
  `/api/v1/webhooks/${encodeURIComponent(bucket)}${id === undefined ? '' : `/${encodeURIComponent(id)}`}${tail}`;

/** The webhook routes. */
export class WebhookRequests {
  readonly #http: HttpTransport;

  constructor(http: HttpTransport) {
    this.#http = http;
  }

  async #hookCall<T>(
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
    path: string,
    subject: string,
    options: CallOptions,
    body?: unknown,
  ): Promise<T | undefined> {
    const answer = await this.#http.send({
      ...callOf(options),
      method,
      path,
      subject,
      ...(body !== undefined && { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
      idempotent: method === 'GET' || method === 'PATCH' || method === 'DELETE',
    });
    return answer.status === 204 ? undefined : jsonOf<T>(answer);
  }

  /** Adds a webhook; the answer carries its signing secret, shown this once. Never retried (it would add two). */
  async addWebhook(bucket: string, request: WebhookRequest, options: CallOptions = {}): Promise<WebhookInfo & { secret: string }> {
    return (await this.#hookCall<WebhookInfo & { secret: string }>(
      'POST',
      hookPath(bucket),
      `webhooks of bucket ${bucket}`,
      options,
      request,
    ))!;
  }

  async listWebhooks(bucket: string, options: CallOptions = {}): Promise<WebhookInfo[]> {
    return (await this.#hookCall<WebhookInfo[]>('GET', hookPath(bucket), `webhooks of bucket ${bucket}`, options))!;
  }

  async getWebhook(bucket: string, id: string, options: CallOptions = {}): Promise<WebhookInfo> {
    return (await this.#hookCall<WebhookInfo>('GET', hookPath(bucket, id), `webhook ${id}`, options))!;
  }

  /** Pauses (`paused`) or resumes (`active`: delivery replays from the stored position). */
  async setWebhookState(bucket: string, id: string, state: 'active' | 'paused', options: CallOptions = {}): Promise<WebhookInfo> {
    return (await this.#hookCall<WebhookInfo>('PATCH', hookPath(bucket, id), `webhook ${id}`, options, { state }))!;
  }

  async deleteWebhook(bucket: string, id: string, options: CallOptions = {}): Promise<void> {
    await this.#hookCall('DELETE', hookPath(bucket, id), `webhook ${id}`, options);
  }

  /** A new signing secret, shown this once; deliveries from now on are signed with it. */
  async rotateWebhookSecret(bucket: string, id: string, options: CallOptions = {}): Promise<{ id: string; secret: string }> {
    return (await this.#hookCall<{ id: string; secret: string }>('POST', hookPath(bucket, id, '/secret'), `webhook ${id}`, options))!;
  }

  /** Sends one signed `test` event now; resolves with how it went. */
  async testWebhook(bucket: string, id: string, options: CallOptions = {}): Promise<WebhookAttempt> {
    return (await this.#hookCall<WebhookAttempt>('POST', hookPath(bucket, id, '/test'), `webhook ${id}`, options))!;
  }

  /** The latest delivery attempts, newest first. */
  async webhookDeliveries(bucket: string, id: string, options: CallOptions & { limit?: number } = {}): Promise<WebhookAttempt[]> {
    const query = options.limit === undefined ? '' : `?limit=${options.limit}`;
    return (await this.#hookCall<WebhookAttempt[]>('GET', hookPath(bucket, id, `/deliveries${query}`), `webhook ${id}`, options))!;
  }
}
