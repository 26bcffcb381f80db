import type { StoredValue } from '../values/stored-value.js';
import type { ChangeKind, HistoryOperation } from '../values/change-kind.js';

export { HISTORY_OPERATIONS, type HistoryOperation } from '../values/change-kind.js';

/**
 * Who made a change, as the server saw the request: the kind of credential (`server`: the TTL
 * sweeper's expiries), the token's id (never the token), and the client address (Fastify's
 * `request.ip`, so `--trust-proxy` applies). Never a secret or a key hash.
 */
export const ACTOR_KINDS = ['secret', 'write', 'read', 'anonymous', 'token', 'server'] as const;
export type ActorKind = (typeof ACTOR_KINDS)[number];

export interface Actor {
  kind: ActorKind;
  /** A token's id (its `jti`); absent for other kinds and for tokens minted without one. */
  tokenId?: string | undefined;
  address?: string | undefined;
}

/** The expiries the TTL sweeper records: the server itself, at no address. */
export const SERVER_ACTOR: Actor = { kind: 'server' };

/** A history read narrowed to one actor: a credential kind, or (kind `token`) one token's id. */
export interface ActorFilter {
  kind: ActorKind;
  tokenId?: string | undefined;
}

/** One recorded change of one key. */
export interface HistoryRecord {
  revision: number;
  operation: HistoryOperation;
  /** The key's state after it: set (with value and expiry), or absent (delete, expire). */
  kind: ChangeKind;
  /** When it committed (ms since the epoch). */
  time: number;
  value?: StoredValue;
  expiresAt?: number | null;
  /** Who made it; null for changes recorded before kvb kept actors. */
  actor: Actor | null;
}

/** A change of the bucket-wide log: a key's recorded change, and the key. */
export interface LoggedKeyChange extends HistoryRecord {
  key: string;
}

/**
 * What a read of the bucket-wide change log covers: changes after the position `after` (a
 * revision and a key of it: the previous page's last), up to `untilRevision`, committed within
 * [sinceTime, untilTime] (ms), to keys under `prefix`, by `actor` when given.
 */
export interface BucketLogQuery {
  prefix: string;
  after: { revision: number; key: string } | undefined;
  sinceRevision: number;
  untilRevision: number;
  sinceTime: number;
  untilTime: number;
  actor: ActorFilter | undefined;
  limit: number;
}

/** A bucket's history: its floor (oldest revision readable) and its revision. */
export interface ChangeLogBounds {
  floor: number;
  /** The oldest revision a watcher can resume from: the floor, or a later import's revision (never below the floor). */
  watchFloor: number;
  revision: number;
}

/** A read of the past: its value, or why there is none (the revision is older than history, or not yet made). */
export type PastRead<T> =
  | { outcome: 'ok'; value: T; bounds: ChangeLogBounds }
  | { outcome: 'below_floor' | 'future'; bounds: ChangeLogBounds }
  | { outcome: 'no_bucket' };
