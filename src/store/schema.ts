/** Kysely's view of the tables (see migrations.ts). */
export interface BucketsTable {
  id: string;
  email: string;
  secret_key_hash: string | null;
  read_key_hash: string | null;
  write_key_hash: string | null;
  signing_key: string | null;
  signing_key_generation: number;
  default_ttl: number;
  created_at: number;
}

export interface EntriesTable {
  bucket_id: string;
  key: Buffer;
  type: string;
  value: Buffer;
  expires_at: number | string | null;
}

export interface Database {
  buckets: BucketsTable;
  entries: EntriesTable;
}

import type { ExpressionBuilder, OnConflictBuilder } from 'kysely';
import type { BucketChanges, BucketRecord } from './store.js';

export function bucketFromRow(row: BucketsTable): BucketRecord {
  return {
    id: row.id,
    email: row.email,
    secretKeyHash: row.secret_key_hash,
    readKeyHash: row.read_key_hash,
    writeKeyHash: row.write_key_hash,
    signingKey: row.signing_key,
    signingKeyGeneration: Number(row.signing_key_generation),
    defaultTtl: Number(row.default_ttl),
  };
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
    ...(changes.signingKey !== undefined && {
      signing_key: signingKey(changes.signingKey) as string | null,
      signing_key_generation: eb('signing_key_generation', '+', 1),
    }),
    // Keeps the SET list non-empty when a PATCH changes nothing.
    id: eb.ref('id'),
  });
}

/** ON CONFLICT (bucket_id, key): a write replaces the key's type, value and expiry. */
export const replaceEntryOnConflict = (oc: OnConflictBuilder<Database, 'entries'>) =>
  oc.columns(['bucket_id', 'key']).doUpdateSet((eb) => ({
    type: eb.ref('excluded.type'),
    value: eb.ref('excluded.value'),
    expires_at: eb.ref('excluded.expires_at'),
  }));
