import type { BucketPolicy } from './bucket-policy.js';
import { revisionOf } from './client-errors.js';
import type { BucketChanges, BucketUsage, CallOptions, CreateBucketFields, Health, TokenRequest, TxnOutcome } from './http-types.js';
import { bucketPath, callOf, type HttpTransport, jsonOf } from './http-transport.js';

// The routes on a bucket as a whole (create, policy and usage, update, delete), /health,
// transactions and token minting.

const decoder = new TextDecoder();
const encoder = new TextEncoder();

/** Buckets, health, transactions and tokens. */
export class BucketRequests {
  readonly #http: HttpTransport;

  constructor(http: HttpTransport) {
    this.#http = http;
  }

  async health(options: CallOptions = {}): Promise<Health> {
    return jsonOf(
      await this.#http.send({ ...callOf(options), method: 'GET', path: '/health', subject: 'health check', auth: false, idempotent: true }),
    );
  }

  /** Creates a bucket; resolves with its id. The token, if any, is the operator's bucket-creation key. */
  async createBucket(fields: CreateBucketFields, options: CallOptions = {}): Promise<string> {
    const form = new URLSearchParams();
    for (const [name, value] of Object.entries(fields)) if (value !== undefined) form.set(name, String(value));
    const answer = await this.#http.send({
      ...callOf(options),
      method: 'POST',
      path: '/api/v1/',
      subject: 'create bucket',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: form.toString(),
    });
    return decoder.decode(answer.data).trim();
  }

  async policy(bucket: string, options: CallOptions = {}): Promise<BucketPolicy> {
    return (await this.policyAndUsage(bucket, options)).policy;
  }

  /** The policy projection, and the usage the server sends beside it in headers (absent from servers before quotas). */
  async policyAndUsage(bucket: string, options: CallOptions = {}): Promise<{ policy: BucketPolicy; usage?: BucketUsage }> {
    const answer = await this.#http.send({
      ...callOf(options),
      method: 'GET',
      path: bucketPath(bucket),
      subject: `bucket ${bucket}`,
      idempotent: true,
    });
    const policy = jsonOf<BucketPolicy>(answer);
    const number = (name: string) => {
      const text = answer.headers.get(name);
      return text === null ? undefined : Number(text);
    };
    const keys = number('kvb-usage-keys');
    const bytes = number('kvb-usage-bytes');
    if (keys === undefined || bytes === undefined) return { policy };
    return {
      policy,
      usage: {
        keys,
        bytes,
        quotaKeys: number('kvb-quota-keys'),
        quotaBytes: number('kvb-quota-bytes'),
        historyFloor: number('kvb-history-floor'),
        revision: number('kvb-revision'),
      },
    };
  }

  /** HEAD on the bucket: true with admin access to an existing bucket, false on 404. */
  async bucketExists(bucket: string, options: CallOptions = {}): Promise<boolean> {
    try {
      await this.#http.send({
        ...callOf(options),
        method: 'HEAD',
        path: bucketPath(bucket),
        subject: `bucket ${bucket}`,
        idempotent: true,
      });
      return true;
    } catch (err) {
      if (err instanceof Error && 'status' in err && err.status === 404) return false;
      throw err;
    }
  }

  async updateBucket(bucket: string, changes: BucketChanges, options: CallOptions = {}): Promise<void> {
    await this.#http.send({
      ...callOf(options),
      method: 'PATCH',
      path: bucketPath(bucket),
      subject: `bucket ${bucket}`,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(changes),
      // Setting fields to given values: the same request twice leaves the same policy.
      idempotent: true,
    });
  }

  async deleteBucket(bucket: string, options: CallOptions = {}): Promise<void> {
    await this.#http.send({
      ...callOf(options),
      method: 'DELETE',
      path: bucketPath(bucket),
      subject: `bucket ${bucket}`,
      idempotent: true,
    });
  }

  /** Commits `{"txn":[…]}` given as JSON text (sent exactly as written, so numbers keep their precision). Never retried. */
  async txn(bucket: string, json: string, options: CallOptions & { acceptConflict?: boolean } = {}): Promise<TxnOutcome> {
    const answer = await this.#http.send({
      ...callOf(options),
      method: 'POST',
      path: bucketPath(bucket),
      subject: `transaction in bucket ${bucket}`,
      headers: { 'content-type': 'application/json' },
      body: encoder.encode(json),
      // Failed checks are an answer for atomic().commit(), an error for the CLI.
      accept: options.acceptConflict ? [409] : undefined,
    });
    if (answer.status === 409) {
      const failed = answer.headers.get('kvb-failed-checks') ?? '';
      return {
        ok: false,
        failedChecks: failed
          .split(',')
          .filter((s) => /^\d+$/.test(s.trim()))
          .map(Number),
      };
    }
    const revision = revisionOf(answer.headers.get('kvb-revision'));
    return answer.status === 200 ? { ok: true, revision, results: decoder.decode(answer.data) } : { ok: true, revision };
  }

  async mintToken(bucket: string, request: TokenRequest, options: CallOptions = {}): Promise<{ access_token: string; id?: string }> {
    const form = new URLSearchParams({ prefix: request.prefix, permissions: request.permissions.join(','), ttl: String(request.ttl) });
    return jsonOf(
      await this.#http.send({
        ...callOf(options),
        method: 'POST',
        path: `${bucketPath(bucket)}/tokens/`,
        subject: `token for bucket ${bucket}`,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: form.toString(),
      }),
    );
  }
}
