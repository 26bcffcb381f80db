import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { KvbError } from '../../errors.js';
import type { Principal } from '../../auth/access.js';
import { EXPORT_CONTENT_TYPE, endLine, entryLine, headerLine, webhookLine } from '../../values/export-format.js';
import { checkKey } from '../../values/keys.js';
import { authorize, openBucket } from '../access-control.js';
import type { CachedBucket } from '../bucket-cache.js';
import type { ResponseStreams } from '../response-streams.js';
import type { ServerContext } from '../server-context.js';
import { bucketIdOf, queryOf, singleParam } from '../request-input.js';
import { effectivePrefix } from './effective-prefix.js';
import { pastSnapshot, revisionParam } from './history-routes.js';
import { authorizeWebhooks } from '../webhooks/webhook-rules.js';

/** Entries read from the snapshot at a time: at most 128 values of 16 KiB, about 2 MiB. */
const EXPORT_BATCH = 128;
/**
 * Exports open at once on this instance. Each holds a snapshot: on PostgreSQL a pooled connection
 * in a long read-only transaction, on SQLite a temp copy of the database.
 */
export const MAX_CONCURRENT_EXPORTS = 4;

/**
 * The webhook lines of an export: the bucket's webhooks, when its secret-key holder exports the
 * whole bucket as it is now (a prefix or a past revision is about keys only), without secrets.
 */
async function exportedWebhooks(ctx: ServerContext, bucket: CachedBucket, principal: Principal, whole: boolean): Promise<string> {
  try {
    authorizeWebhooks(bucket, principal);
  } catch {
    return '';
  }
  if (!whole) return '';
  const list = await ctx.store.webhooks.list(bucket.record.id);
  return list
    .map((w) => webhookLine({ url: w.url, prefix: w.prefix, kinds: w.kinds, state: w.state, paused_reason: w.pausedReason }))
    .join('');
}

/**
 * `GET /api/v1/{bucket}/?export=true[&prefix=P]`: every live key with its type, value and expiry,
 * as NDJSON from one consistent snapshot, streamed at the client's pace (see values/export-format.ts).
 */
export async function exportBucket(
  ctx: ServerContext,
  streams: ResponseStreams,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<FastifyReply> {
  const { store, buckets, transfers, clock } = ctx;
  const query = queryOf(request);
  const pastRevision = revisionParam(request);
  const requestedPrefix = singleParam(query, 'prefix') ?? '';
  if (requestedPrefix !== '') checkKey(requestedPrefix, 'prefix');
  const { bucket, principal } = await openBucket(buckets, bucketIdOf(request), request);
  authorize(bucket, principal, 'list_values');
  const prefix = effectivePrefix(principal, requestedPrefix);

  if (transfers.exports >= MAX_CONCURRENT_EXPORTS) {
    reply.header('retry-after', '5');
    throw new KvbError('service_unavailable', `too many exports at once (at most ${MAX_CONCURRENT_EXPORTS})`);
  }
  streams.acquire(reply);
  transfers.exports++;
  reply.raw.once('close', () => transfers.exports--);

  const webhooks = await exportedWebhooks(ctx, bucket, principal, prefix === '' && pastRevision === undefined);
  const now = clock();
  // `rev=N`: the bucket as it was at revision N, read from history.
  const opened =
    pastRevision === undefined
      ? await store.openSnapshot(bucket.record.id, prefix, now)
      : await pastSnapshot(store, bucket.record.id, prefix, pastRevision);
  if (!opened) throw new KvbError('not_found', 'no such bucket');
  const snapshot = opened;
  reply.raw.once('close', () => void snapshot.close());
  streams.guard(reply);

  async function* lines(): AsyncGenerator<string> {
    const hash = createHash('sha256');
    let count = 0;
    try {
      // The bucket revision the snapshot holds: every change up to it is in the export, none after.
      const header = headerLine(bucket.record.id, now, snapshot.revision);
      hash.update(header);
      yield header;
      hash.update(webhooks);
      if (webhooks) yield webhooks;
      for (;;) {
        const batch = await snapshot.read(EXPORT_BATCH);
        if (batch.length === 0) break;
        let chunk = '';
        for (const { key, entry } of batch) chunk += entryLine(key, entry, entry.expiresAt);
        count += batch.length;
        hash.update(chunk);
        yield chunk;
      }
      yield endLine(count, hash.digest('hex'));
    } finally {
      await snapshot.close();
    }
  }
  reply.header('content-type', EXPORT_CONTENT_TYPE);
  reply.header('kvb-revision', String(snapshot.revision));
  reply.header('content-disposition', `attachment; filename="kvb-export-${bucket.record.id}.ndjson"`);
  return reply.send(Readable.from(lines(), { objectMode: false }));
}
