import type { Expression, ExpressionBuilder, Generated, OnConflictBuilder } from 'kysely';
import type { BucketColumns } from './bucket-columns.js';
import type { BucketChanges } from './store.js';
import type { ChangeKind } from '../values/change-kind.js';

/** Kysely's view of the tables (see kvb-migrations.ts); a bucket's policy columns are in bucket-columns.ts. */
export interface BucketsTable extends BucketColumns {
  created_at: number;
  /** Starts at 0 (the column default); every committed change to the bucket adds one. */
  revision: Generated<number>;
  /** The highest revision no longer in `changes` (pruned, or from before the change log). */
  changes_floor: Generated<number>;
  /** The newest revision watchers cannot be carried across (an import's): those behind it get `reset`. */
  watch_floor: Generated<number>;
  /** Stored keys (expired ones until swept) and their bytes (key + value lengths): per-bucket quotas. */
  usage_keys: Generated<number>;
  usage_bytes: Generated<number>;
}

/** The watch feed's log: one row per key changed by a committed revision. */
export interface ChangesTable {
  bucket_id: string;
  revision: number;
  key: Buffer;
  kind: ChangeKind;
  type: string | null;
  value: Buffer | null;
  expires_at: number | string | null;
  committed_at: number;
  /** Who made the change (history-types.ts `Actor`); null on rows from before kvb recorded it. */
  actor_kind: string | null;
  actor_token: string | null;
  actor_address: string | null;
}

/**
 * A change-log row's columns, each with the named parameter that fills it, in the order every
 * insert into `changes` lists them (Kysely's and the raw SQL's alike). `satisfies` keeps the list
 * whole: a column added to ChangesTable fails to compile until it is written here.
 */
export const CHANGE_ROW_PARAMS = {
  bucket_id: 'bucket',
  revision: 'revision',
  key: 'key',
  kind: 'kind',
  type: 'type',
  value: 'value',
  expires_at: 'expiresAt',
  actor_kind: 'actorKind',
  actor_token: 'actorToken',
  actor_address: 'actorAddress',
  committed_at: 'now',
} as const satisfies Record<keyof ChangesTable, string>;

export type ChangeColumn = keyof typeof CHANGE_ROW_PARAMS;

/** The columns of an insert into `changes`, in CHANGE_ROW_PARAMS order. */
export const CHANGE_INSERT_COLUMNS = Object.keys(CHANGE_ROW_PARAMS) as ChangeColumn[];

export interface EntriesTable {
  bucket_id: string;
  key: Buffer;
  type: string;
  value: Buffer;
  expires_at: number | string | null;
  revision: number;
  /** The revision at which the key last became live from absent or expired (a write over a live value keeps it). */
  create_revision: number;
}

/** The columns of an insert into `entries`, in the order every such insert lists them. */
export const ENTRY_INSERT_COLUMNS = [
  'bucket_id',
  'key',
  'type',
  'value',
  'expires_at',
  'revision',
  'create_revision',
] as const satisfies ReadonlyArray<keyof EntriesTable>;

/** PostgreSQL: who may sweep or migrate right now (see leases in postgres-store.ts). */
export interface LeasesTable {
  name: string;
  holder: string;
  expires_at: number;
}

/** History: what made a revision, for the ones that are not a plain set, delete or expiry. */
export interface RevisionOpsTable {
  bucket_id: string;
  revision: number;
  operation: string;
  /** When the revision committed (ms); null on rows made before it was recorded. */
  committed_at: number | null;
}

/** The columns of an insert into `revision_ops`, in the order every such insert lists them. */
export const REVISION_OP_INSERT_COLUMNS = ['bucket_id', 'revision', 'operation', 'committed_at'] as const satisfies ReadonlyArray<
  keyof RevisionOpsTable
>;

/** A bucket's webhook subscriptions (kvb-migrations.ts `0011_webhooks`; webhook-store.ts). */
export interface WebhooksTable {
  id: string;
  bucket_id: string;
  url: string;
  prefix: Buffer;
  /** The change kinds delivered, comma-separated. */
  kinds: string;
  /** Signs each delivery, so kept as is (never returned after creation, never exported). */
  secret: string;
  state: string;
  paused_reason: string | null;
  /** The newest revision the receiver acknowledged (or that was before the subscription). */
  position: number;
  failing_since: number | null;
  attempts: number;
  next_attempt_at: number;
  holder: string | null;
  lease_until: number;
  created_at: number;
}

/** The last attempts of each webhook. */
export interface WebhookDeliveriesTable {
  webhook_id: string;
  attempt: string;
  attempted_at: number;
  first_revision: number;
  last_revision: number;
  status: number | null;
  latency_ms: number;
  error: string | null;
}

export interface Database {
  revision_ops: RevisionOpsTable;
  webhooks: WebhooksTable;
  webhook_deliveries: WebhookDeliveriesTable;
  buckets: BucketsTable;
  entries: EntriesTable;
  kvb_leases: LeasesTable;
  changes: ChangesTable;
}

/**
 * The columns a bucket PATCH changes (absent fields untouched; a signing-key change bumps the
 * generation). `signingKey` encodes the key for the backend's column type.
 */
export function bucketUpdate(changes: BucketChanges, signingKey: (key: string | null) => unknown) {
  return (eb: ExpressionBuilder<Database, 'buckets'>) => ({
    ...(changes.secretKeyHash !== undefined && { secret_key_hash: changes.secretKeyHash }),
    ...(changes.readKeyHash !== undefined && { read_key_hash: changes.readKeyHash }),
    ...(changes.writeKeyHash !== undefined && { write_key_hash: changes.writeKeyHash }),
    ...(changes.defaultTtl !== undefined && { default_ttl: changes.defaultTtl }),
    ...(changes.tokenSalt !== undefined && { token_salt: changes.tokenSalt }),
    ...(changes.signingKey !== undefined && {
      signing_key: signingKey(changes.signingKey) as string | null,
      signing_key_generation: eb('signing_key_generation', '+', 1),
    }),
    // Keeps the SET list non-empty when a PATCH changes nothing.
    id: eb.ref('id'),
  });
}

/** ON CONFLICT (bucket_id, key): a write replaces the key's type, value and expiry. */
/** A change-log row written again for the same revision and key (a retried batch) replaces the first. */
export const replaceChangeOnConflict = (oc: OnConflictBuilder<Database, 'changes'>) =>
  oc.columns(['bucket_id', 'revision', 'key']).doUpdateSet((eb) => ({
    kind: eb.ref('excluded.kind'),
    type: eb.ref('excluded.type'),
    value: eb.ref('excluded.value'),
    expires_at: eb.ref('excluded.expires_at'),
    actor_kind: eb.ref('excluded.actor_kind'),
    actor_token: eb.ref('excluded.actor_token'),
    actor_address: eb.ref('excluded.actor_address'),
  }));

/**
 * ON CONFLICT (bucket_id, key): a write replaces the key's type, value, expiry and revision. The
 * create revision stays while the replaced row is live at `now` (a placeholder); a row that had
 * expired is a key created anew, so it takes the new row's. Without `now` (a restore, whose rows
 * carry their own) the new row's, always.
 */
export const replaceEntryOnConflict = (now?: Expression<number>) => (oc: OnConflictBuilder<Database, 'entries'>) =>
  oc.columns(['bucket_id', 'key']).doUpdateSet((eb) => ({
    type: eb.ref('excluded.type'),
    value: eb.ref('excluded.value'),
    expires_at: eb.ref('excluded.expires_at'),
    revision: eb.ref('excluded.revision'),
    create_revision:
      now === undefined
        ? eb.ref('excluded.create_revision')
        : eb
            .case()
            .when(eb.ref('entries.expires_at'), '<=', now)
            .then(eb.ref('excluded.create_revision'))
            .else(eb.ref('entries.create_revision'))
            .end(),
  }));
