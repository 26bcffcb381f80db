/**
 * `kvb/client`: a typed client for kvb with no dependency beyond the platform's fetch (Node 20+,
 * browsers, Deno, Bun). See docs/client.md.
 */
export { AtomicOperation } from './atomic-operation.js';
export type {
  BucketLogEntry,
  BucketLogOptions,
  CommitResult,
  ConnectOptions,
  DeleteOptions,
  Entry,
  GetOptions,
  HistoryEntry,
  HistoryOptions,
  ImportOptions,
  IncrementOptions,
  ListedEntry,
  ListOptions,
  Listing,
  SetOptions,
  Stored,
  TokenOptions,
  UpdateOptions,
} from './bucket-types.js';
export { KvbBucket, connect, connectFromEnv, createBucket } from './kvb-bucket.js';
export type { ManyRead, ReadEntry } from './bucket-primitives.js';
export { DEFAULT_LOCK_TTL, type FencingToken, type Lock, type LockOptions } from './lock.js';
export {
  type BucketChanges,
  type BucketPolicy,
  type CallOptions,
  type CreateBucketFields,
  type FetchCache,
  type FetchInit,
  type FetchLike,
  type FetchResponse,
  type ImportedWebhook,
  KvbHttp,
  type RequestBody,
  type RollbackResult,
  type WebhookAttempt,
  type WebhookInfo,
  type WebhookKind,
  type WebhookRequest,
} from './kvb-http.js';
export {
  BadRequestError,
  ConflictError,
  ForbiddenError,
  GoneError,
  InsufficientStorageError,
  InternalServerError,
  KvbHttpError,
  KvbNetworkError,
  KvbTimeoutError,
  NotFoundError,
  PreconditionFailedError,
  RateLimitedError,
  UnauthorizedError,
  UnavailableError,
} from './client-errors.js';
export type { JsonShaped, JsonValue, Storable, Value, ValueType } from './typed-values.js';
export { WatchClosedError, type WatchEvent, type WatchOptions, WatchResetError } from './watch-feed.js';
