/**
 * What the request thread and the SQLite writer thread say to each other. Every message is plain
 * data, encoded into one transferred ArrayBuffer (sqlite-wire.ts): the request thread posts one
 * `WriteMessage` per turn of its event loop, the writer runs every message waiting into one
 * transaction and answers with one encoded `BatchReply` once it has committed (or failed).
 */
import { KvbError } from '../../errors.js';
import type { Actor } from '../history-types.js';
import type { WriteOp } from '../core/write-ops.js';
import type { BucketRecord, CommittedChanges } from '../store.js';
import { type WireEncoder, decodeAll, encodeAll } from './sqlite-wire.js';

/** One write the writer runs: a key write (the shared rules), or one of the engine's own procedures. */
export type WriteRequest =
  | { kind: 'op'; bucket: string; op: WriteOp }
  | { kind: 'createBucket'; bucket: BucketRecord; createdAt: number }
  /** A bucket update, compiled by the request thread (its shape depends on the request). */
  | { kind: 'updateBucket'; sql: string; parameters: unknown[] }
  | { kind: 'deleteBucket'; bucket: string }
  /** Applies a staged import: `file` is attached to the writer's connection for the batch. */
  | { kind: 'import'; bucket: string; file: string; replace: boolean; prefix: string; restoreRevision?: number; actor?: Actor }
  | { kind: 'sweep'; now: number; batch: number }
  | { kind: 'prune'; before: number; since: number; batch: number }
  | { kind: 'boundHistory'; maxBytes: number; since: number }
  /** Statements compiled by the request thread, run together (the webhook rows: webhook-store.ts); answers rows changed. */
  | { kind: 'statements'; statements: Array<{ sql: string; values: unknown[] }> }
  /** Whether the request thread watches the bucket: the writer's answers carry a watched bucket's changes (`BatchReply.carried`). */
  | { kind: 'watch'; bucket: string; watched: boolean };

/** One turn of the request thread's event loop: its `WriteRequest`s, in the order they were made, encoded (`encodeRequests`). */
export type WriteMessage = ArrayBuffer;

/** What the writer answers a run of messages with: one `BatchReply`, encoded (`encodeReply`). */
export type ReplyMessage = ArrayBuffer;

/** An error as it crosses threads: what the request thread needs to answer it as the original would be. */
export interface SentError {
  name: string;
  message: string;
  stack?: string | undefined;
  code?: string | undefined;
  /** A KvbError's kind, detail and headers. */
  kind?: KvbError['kind'];
  detail?: string;
  headers?: Record<string, string> | undefined;
}

export type SentOutcome = { ok: true; value: unknown } | { ok: false; error: SentError };

/** What one transaction did: one outcome per request of the `messages` it ran, in order, once committed. */
export interface BatchReply {
  messages: number;
  outcomes: SentOutcome[];
  /** The transaction failed (nothing of it committed): every request fails with this. */
  failed?: SentError;
  /** Entry-cache ids of the keys it wrote. */
  touched: string[];
  /** It rewrote many keys at once (an import, a bucket delete): the request thread drops its whole cache. */
  clearCache: boolean;
  /** Each bucket's revision after it (null: the bucket was deleted). */
  revisions: Array<[bucket: string, revision: number | null]>;
  /**
   * The changes it committed to watched buckets (`WriteRequest` 'watch'); absent when none. A
   * watched bucket a write changed without change records (an import) is not here: its
   * watchers read the log.
   */
  carried?: CommittedChanges[];
}

export function sendError(error: unknown): SentError {
  if (error instanceof KvbError)
    return { name: error.name, message: error.message, kind: error.kind, detail: error.detail, headers: error.headers };
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return { name: error.name, message: error.message, stack: error.stack, ...(typeof code === 'string' && { code }) };
  }
  return { name: 'Error', message: String(error) };
}

/** The error again on the request thread: a KvbError as itself, a driver's error with its code (storage-errors.ts reads it). */
export function receiveError(sent: SentError): Error {
  if (sent.kind !== undefined) return new KvbError(sent.kind, sent.detail, sent.headers);
  const error = new Error(sent.message) as Error & { code?: string };
  error.name = sent.name;
  if (sent.stack !== undefined) error.stack = sent.stack;
  if (sent.code !== undefined) error.code = sent.code;
  return error;
}

export function encodeRequests(encoder: WireEncoder, requests: readonly WriteRequest[]): WriteMessage {
  return encodeAll(encoder, requests);
}

export function decodeRequests(message: WriteMessage): WriteRequest[] {
  return decodeAll<WriteRequest>(message);
}

export function encodeReply(encoder: WireEncoder, reply: BatchReply): ReplyMessage {
  return encodeAll(encoder, [reply]);
}

export function decodeReply(message: ReplyMessage): BatchReply {
  return decodeAll<BatchReply>(message)[0]!;
}
