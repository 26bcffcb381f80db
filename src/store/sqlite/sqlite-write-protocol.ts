/**
 * What the request thread and the SQLite writer thread say to each other. Every message is plain
 * data (structured clone): the request thread posts one `WriteMessage` per turn of its event
 * loop, the writer runs every message waiting into one transaction and answers with one
 * `BatchReply` once it has committed (or failed).
 */
import { KvbError } from '../../errors.js';
import type { Actor } from '../history-types.js';
import type { WriteOp } from '../core/write-ops.js';
import type { BucketRecord } from '../store.js';

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
  | { kind: 'statements'; statements: Array<{ sql: string; values: unknown[] }> };

/** One turn of the request thread's event loop: its writes, in the order they were made. */
export interface WriteMessage {
  requests: WriteRequest[];
}

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

/**
 * Structured clone gives a Buffer back as a plain Uint8Array: the rules and the statements expect
 * Buffers (toString, compare, equals). Everything that crosses is passed through this once, on
 * arrival. It copies nothing: each Buffer is a view of the received bytes.
 */
export function withBuffers<T>(value: T): T {
  return restore(value) as T;
}

function restore(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (value instanceof Uint8Array) return Buffer.isBuffer(value) ? value : Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) value[i] = restore(value[i]);
    return value;
  }
  if (value instanceof Map) {
    for (const [k, v] of value) value.set(k, restore(v));
    return value;
  }
  const object = value as Record<string, unknown>;
  for (const key of Object.keys(object)) object[key] = restore(object[key]);
  return value;
}
