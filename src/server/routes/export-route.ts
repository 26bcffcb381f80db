import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { KvbError } from '../../errors.js';
import { EXPORT_CONTENT_TYPE, endLine, entryLine, headerLine } from '../../values/export-format.js';
import { checkKey } from '../../values/keys.js';
import { authorize, openBucket } from '../access-control.js';
import type { ResponseStreams } from '../response-streams.js';
import type { ServerContext } from '../server-context.js';
import { bucketIdOf, queryOf, singleParam } from '../request-input.js';
import { effectivePrefix } from './effective-prefix.js';
import { pastSnapshot, revisionParam } from './history-routes.js';

/** Entries read from the snapshot at a time: at most 128 values of 16 KiB, about 2 MiB. */
const EXPORT_BATCH = 128;
/**
 * Exports open at once on this instance. Each holds a snapshot: on PostgreSQL a pooled connection
 * in a long read-only transaction, on SQLite a temp copy of the database.
 */
export const MAX_CONCURRENT_EXPORTS = 4;

/**
 * `GET /api/v1/{bucket}/?export=true[&prefix=P]`: every live key with its type, value and expiry,
 * as NDJSON from one consistent snapshot, streamed at the client's pace (see values/export-format.ts).
 */
export async function exportBucket(
  { store, buckets, transfers, clock }: ServerContext,
  streams: ResponseStreams,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<FastifyReply> {
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
