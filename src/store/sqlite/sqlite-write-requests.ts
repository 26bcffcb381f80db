import type BetterSqlite3 from 'better-sqlite3';
import { floorWithin } from '../floor-within.js';
import { checkImportQuota, planImport } from '../core/import-plan.js';
import { sweepsOf } from '../core/write-ops.js';
import type { Written } from '../store.js';
import type { SqliteWriter } from './sqlite-writer.js';
import { type ReplyMessage, type WriteMessage, type WriteRequest, decodeRequests, encodeReply } from './sqlite-write-protocol.js';
import { WireEncoder } from './sqlite-wire.js';

/** The writer's side of the wire: one per thread, its buffer reused. */
const encoder = new WireEncoder();

/**
 * Runs every message waiting as one transaction (the writer thread drains its port first, so
 * while one batch commits and syncs the next one gathers) and says what it did, encoded.
 */
export function runWriteMessages(writer: SqliteWriter, messages: WriteMessage[]): ReplyMessage {
  const requests = messages.length === 1 ? decodeRequests(messages[0]!) : messages.flatMap(decodeRequests);
  const done = writer.runBatch(requests, (request) => runWriteRequest(writer, request));
  return encodeReply(encoder, { messages: messages.length, ...done });
}

/**
 * The webhook store's statements (a fixed set, sent as SQL), each prepared once per writer
 * connection: a delivery's write would otherwise prepare its four every time.
 */
const preparedStatements = new WeakMap<BetterSqlite3.Database, Map<string, BetterSqlite3.Statement>>();
function prepared(writer: SqliteWriter, sql: string): BetterSqlite3.Statement {
  const { raw } = writer.conn;
  let cache = preparedStatements.get(raw);
  if (!cache) preparedStatements.set(raw, (cache = new Map()));
  let statement = cache.get(sql);
  if (!statement) cache.set(sql, (statement = raw.prepare(sql)));
  return statement;
}

/** One request inside the running batch. */
function runWriteRequest(writer: SqliteWriter, request: WriteRequest): unknown {
  switch (request.kind) {
    case 'op':
      // The writer runs key writes itself (`SqliteWriter.commitBatch`).
      return writer.applyWrite(request.bucket, request.op);
    case 'createBucket':
      writer.conn.run('createBucket', { ...request.bucket, createdAt: request.createdAt });
      return void writer.createdBucket(request.bucket.id);
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
    case 'watch':
      return writer.watch(request.bucket, request.watched);
    case 'statements':
      return writer.atomically(() => request.statements.map((s) => prepared(writer, s.sql).run(...s.values).changes));
  }
}

/**
 * Applies a staged import (sqlite-import.ts), attached to the writer's connection for the batch,
 * as core/import-plan.ts plans it. One write like any other: one revision of the bucket, checked
 * and bumped inside the batch; its copy is one statement, so 1M staged rows never pass through
 * JavaScript again.
 */
function applyImport(writer: SqliteWriter, request: Extract<WriteRequest, { kind: 'import' }>): Written | { refused: 'no_bucket' } {
  const { bucket, replace, prefix, restoreRevision, actor } = request;
  const { conn } = writer;
  // The import recounts the bucket's usage: the batch's writes so far go in first.
  writer.flush();
  const plan = planImport({ bucket, replace, prefix, restoreRevision, actor, now: writer.batchNow }, writer.currentRevision(bucket));
  if ('refused' in plan) return plan;
  // Its statements in a savepoint, their undo; the batch learns its revision once they are all in.
  writer.atomically(() => {
    const before = writer.usageOf(bucket)!;
    for (const step of plan.steps) {
      switch (step.step) {
        case 'bump':
        case 'setRevision':
          // The plan's revision, the batch's once the import is in (below).
          break;
        case 'statement':
          // A statement on the attached staging database is prepared afresh: it is detached after the batch.
          if (step.staged) conn.runOnce(step.name, step.args);
          else conn.run(step.name, step.args);
          break;
        case 'checkQuota':
          checkImportQuota(writer.quota, before, writer.usageOf(bucket)!);
          break;
        case 'compact':
          writer.compactTo(bucket, step.revision, step.floor);
          break;
      }
    }
  });
  writer.dropCache();
  writer.setRevision(bucket, plan.revision);
  return { revision: plan.revision };
}

/**
 * Deletes up to `batch` expired keys: per bucket, one sweep write (core/apply-batch.ts decides
 * which still expire), each a write of its own like any other (in a batch run again after a
 * failure, one whose row fails leaves the buckets swept before it swept).
 */
function sweepExpired(writer: SqliteWriter, now: number, batch: number): number {
  // It finds the expired keys in the file: the batch's rows so far go in first.
  writer.writeRows();
  const expired = writer.conn.all<{ bucket_id: string; key: Buffer }>('expiredEntries', { now, batch });
  let deleted = 0;
  for (const { bucket, op } of sweepsOf(expired, now)) {
    const outcome = writer.applyWrite(bucket, op);
    if ('swept' in outcome) deleted += outcome.swept;
  }
  return deleted;
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
