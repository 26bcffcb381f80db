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

import type { BucketRecord } from './store.js';

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
