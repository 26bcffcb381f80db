// Imports nothing, so the web console (console/src/api.ts) can take this type without type-checking
// the client's runtime modules under its browser-only tsconfig.

/** A bucket's policy: the body of GET /api/v1/{bucket}. */
export interface BucketPolicy {
  default_ttl: number;
  has_secret_key: boolean;
  has_read_key: boolean;
  has_write_key: boolean;
  has_signing_key: boolean;
  signing_key_generation: number;
  anonymous_access: { read: boolean; write: boolean; enumerate: boolean; delete: boolean };
}
