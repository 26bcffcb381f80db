import { floorWithin } from '../floor-within.js';
import { actorFields } from '../change-row.js';
import { sweepsOf } from '../core/write-ops.js';
import { prefixUpperBound } from '../../values/keys.js';
import type { Written } from '../store.js';
import type { SqliteWriter } from './sqlite-writer.js';
import { type BatchReply, type WriteMessage, type WriteRequest, withBuffers } from './sqlite-write-protocol.js';

/**
 * Runs every message waiting as one transaction (the writer thread drains its port first, so
 * while one batch commits and syncs the next one gathers) and says what it did.
 */
export function runWriteMessages(writer: SqliteWriter, messages: WriteMessage[]): BatchReply {
  const requests = messages.length === 1 ? messages[0]!.requests : messages.flatMap((m) => m.requests);
  return { messages: messages.length, ...writer.runBatch(withBuffers(requests), (request) => runWriteRequest(writer, request)) };
}

/** One request inside the running batch. */
function runWriteRequest(writer: SqliteWriter, request: WriteRequest): unknown {
  switch (request.kind) {
    case 'op':
      return writer.applyWrite(request.bucket, request.op);
    case 'createBucket':
      return void writer.conn.run('createBucket', { ...request.bucket, createdAt: request.createdAt });
    case 'updateBucket':
      return writer.conn.raw.prepare(request.sql).run(...request.parameters).changes > 0;
    case 'deleteBucket':
      return writer.deleteBucket(request.bucket);
    case 'import':
      return applyImport(writer, request);
    case 'sweep':
      return sweepExpired(writer, request.now, request.batch);
    case 'prune':
      return pruneChanges(writer, request.before, request.since, request.batch);
    case 'boundHistory':
      return boundHistory(writer, request.maxBytes, request.since);
  }
}

/**
 * Applies a staged import (sqlite-import.ts), attached to the writer's connection for the batch,
 * with one statement: 1M staged rows never pass through JavaScript again. One write like any
 * other: one revision of the bucket, checked and bumped inside the batch.
 */
function applyImport(writer: SqliteWriter, request: Extract<WriteRequest, { kind: 'import' }>): Written | { refused: 'no_bucket' } {
  const { bucket, replace, prefix, restoreRevision, actor } = request;
  const { conn } = writer;
  const prefixBytes = Buffer.from(prefix);
  const upper = prefix ? prefixUpperBound(prefixBytes) : undefined;
  // The import recounts the bucket's usage: the batch's usage changes so far go in first.
  writer.writeBookkeeping();
  return writer.atomically((): Written | { refused: 'no_bucket' } => {
    let revision: number | undefined;
    if (restoreRevision === undefined) revision = writer.bump(bucket);
    else if (writer.currentRevision(bucket) !== undefined) {
      writer.setRevision(bucket, restoreRevision);
      revision = restoreRevision;
    }
    if (revision === undefined) return { refused: 'no_bucket' };
    writer.dropCache();
    const now = writer.batchNow;
    writer.withinQuota(bucket, () => {
      // History: the import's keys and the keys it removes, as of its revision (statements on the attached database, prepared afresh).
      const who = actorFields(actor);
      conn.runOnce(restoreRevision === undefined ? 'logStaged' : 'logStagedKeepRevisions', { bucket, revision, now, ...who });
      if (replace) {
        conn.runOnce(upper ? 'logClearedUpper' : 'logCleared', { bucket, revision, now, prefix: prefixBytes, upper, ...who });
        conn.run(upper ? 'clearRangeUpper' : 'clearRange', { bucket, prefix: prefixBytes, upper });
      }
      conn.runOnce(restoreRevision === undefined ? 'copyStaged' : 'copyStagedKeepRevisions', { bucket, revision, now });
      // Millions of rows in one statement: the usage is counted again rather than tracked per row.
      conn.run('recountUsage', { bucket });
    });
    // Watchers behind an import (one revision of up to millions of keys) get `reset`. History
    // keeps what the import did not touch: only a restore (the whole bucket, the operator's
    // `kvb db restore`) starts history at its revision; an import's keys are logged above.
    if (restoreRevision === undefined) conn.run('raiseWatchFloor', { bucket, revision });
    else writer.compactTo(bucket, revision, -1);
    conn.run('logOperation', { bucket, revision, operation: 'import', now });
    return { revision };
  });
}

/** Deletes up to `batch` expired keys: per bucket, one sweep write (core/apply-batch.ts decides which still expire). */
function sweepExpired(writer: SqliteWriter, now: number, batch: number): number {
  return writer.atomically(() => {
    const expired = writer.conn.all<{ bucket_id: string; key: Buffer }>('expiredEntries', { now, batch });
    let deleted = 0;
    for (const { bucket, op } of sweepsOf(expired, now)) {
      const outcome = writer.applyWrite(bucket, op);
      if ('swept' in outcome) deleted += outcome.swept;
    }
    return deleted;
  });
}

/** Compacts the change log of up to `batch` revisions committed before `before` (and after `since`). */
function pruneChanges(writer: SqliteWriter, before: number, since: number, batch: number): number {
  return writer.atomically(() => {
    const rows = writer.conn.all<{ bucket_id: string; revision: number }>('prunable', { before, since, batch });
    for (const { bucket_id: bucket, revision } of rows) writer.compactTo(bucket, revision);
    return rows.length;
  });
}

/** Raises the floor of each bucket whose history grew (since `since`) past `maxBytes`; how many it raised. */
function boundHistory(writer: SqliteWriter, maxBytes: number, since: number): number {
  const { conn } = writer;
  return writer.atomically(() => {
    let count = 0;
    const grown = conn.all<{ bucket_id: string }>('historyGrew', { since, batch: Number.MAX_SAFE_INTEGER });
    for (const { bucket_id: bucket } of grown) {
      const sizes = conn.all<{ revision: number; bytes: number }>('historyBytes', { bucket });
      const floor = floorWithin(
        sizes.map((r) => ({ revision: Number(r.revision), bytes: Number(r.bytes) })),
        maxBytes,
      );
      if (floor === undefined) continue;
      writer.compactTo(bucket, floor);
      count++;
    }
    return count;
  });
}
