/**
 * The bucket's policy columns, declared once: the `buckets` table's own columns (schema.ts
 * `BucketsTable` adds the ones the store keeps), the `BucketRecord` the store hands out (each
 * column under its camelCase name) and the dump's bucket line (dump.ts) are all derived from it.
 * A column's kind says its type and how a value read from outside (a dump) is checked.
 */
export const BUCKET_COLUMNS = {
  id: 'text',
  email: 'text',
  /** Credentials are hashes. */
  secret_key_hash: 'text?',
  read_key_hash: 'text?',
  write_key_hash: 'text?',
  /** Kept as is because it signs. */
  signing_key: 'text?',
  signing_key_generation: 'integer',
  /**
   * Random, never leaves the server: tokens are signed with a key derived from the signing key and
   * this salt, so a token cannot be used to guess a short signing key offline. Null only for a
   * bucket created by an older version after the upgrade migrated the others (see SECURITY.md).
   */
  token_salt: 'text?',
  /** Seconds; 0 means no expiry. */
  default_ttl: 'integer',
} as const satisfies Record<string, ColumnKind>;

type ColumnKind = 'text' | 'text?' | 'integer';
type ColumnType<K extends ColumnKind> = K extends 'text' ? string : K extends 'text?' ? string | null : number;
type Columns = typeof BUCKET_COLUMNS;
export type BucketColumn = keyof Columns;

/** The policy columns as the table holds them. */
export type BucketColumns = { -readonly [C in BucketColumn]: ColumnType<Columns[C]> };

/** `signing_key_generation` → `signingKeyGeneration`. */
type Camel<S extends string> = S extends `${infer Head}_${infer Tail}` ? `${Head}${Capitalize<Camel<Tail>>}` : S;
export type BucketField<C extends BucketColumn = BucketColumn> = Camel<C>;

/** A bucket as stored: each policy column under its camelCase name. */
export type BucketRecord = { -readonly [C in BucketColumn as Camel<C>]: ColumnType<Columns[C]> };

const camel = <C extends BucketColumn>(column: C) => column.replace(/_(.)/g, (_, c: string) => c.toUpperCase()) as Camel<C>;

/** Each policy column with its kind and its record field, in the table's order. */
export const BUCKET_FIELDS = (Object.keys(BUCKET_COLUMNS) as BucketColumn[]).map((column) => ({
  column,
  kind: BUCKET_COLUMNS[column] as ColumnKind,
  field: camel(column),
}));

/** A row's policy columns as a record (PostgreSQL may answer an integer as a string: made a number). */
export function bucketFromRow(row: BucketColumns): BucketRecord {
  const record: Record<string, unknown> = {};
  for (const { column, kind, field } of BUCKET_FIELDS) record[field] = kind === 'integer' ? Number(row[column]) : row[column];
  return record as BucketRecord;
}

/** A record's policy columns, in the table's order. */
export function bucketToRow(bucket: BucketRecord): BucketColumns {
  const row: Record<string, unknown> = {};
  for (const { column, field } of BUCKET_FIELDS) row[column] = bucket[field];
  return row as BucketColumns;
}

/** Whether a value read from outside has a column's kind. */
export function hasColumnKind(kind: ColumnKind, value: unknown): boolean {
  if (kind === 'integer') return Number.isSafeInteger(value);
  return typeof value === 'string' || (kind === 'text?' && value === null);
}
