import type pg from 'pg';
import type { Usage } from '../quota.js';
import { bucketFromRow } from '../bucket-columns.js';
import { type Database, bucketUpdate } from '../schema.js';
import { queryBuilder } from '../statements.js';
import type { PostgresStatementName } from './postgres-statements.js';
import type { BucketChanges, BucketRecord, BucketStore } from '../store.js';
import { storageError, withRetries } from './postgres-retries.js';
import type { StatementRunner } from './postgres-statement-runner.js';

/** Runs a named statement of the store's (PostgresStore.query). */
type Query = <R extends pg.QueryResultRow>(
  name: PostgresStatementName,
  args: Record<string, unknown>,
  client?: pg.PoolClient,
) => Promise<pg.QueryResult<R>>;

/** The signing key column is bytea (see kvb-migrations.ts). */
const signingKeyBytes = (key: string | null) => (key === null ? null : Buffer.from(key, 'utf8'));

type BucketRow = Omit<Database['buckets'], 'signing_key'> & { signing_key: Buffer | null };
const fromRow = (row: BucketRow) =>
  bucketFromRow({ ...row, signing_key: row.signing_key === null ? null : row.signing_key.toString('utf8') });

/**
 * PostgreSQL's buckets. Ids are generated and never contain NUL, which PostgreSQL text cannot even
 * carry: an id with one names no bucket, and is answered so without a statement.
 */
export class PostgresBuckets implements BucketStore {
  constructor(
    private readonly query: Query,
    private readonly runner: StatementRunner,
    private readonly schema: string,
  ) {}

  async create(b: BucketRecord): Promise<void> {
    await this.query('createBucket', { ...b, signingKey: signingKeyBytes(b.signingKey), createdAt: Date.now() });
  }

  async get(id: string): Promise<BucketRecord | undefined> {
    if (id.includes('\u0000')) return undefined;
    const { rows } = await this.query<BucketRow>('getBucket', { id });
    const row = rows[0];
    return row && fromRow(row);
  }

  async update(id: string, changes: BucketChanges): Promise<boolean> {
    if (id.includes('\u0000')) return false;
    // Rare and shaped by the request, so compiled per call and not prepared.
    const query = queryBuilder('postgres', this.schema)
      .updateTable('buckets')
      .set(bucketUpdate(changes, signingKeyBytes))
      .where('id', '=', id)
      .compile();
    try {
      const result = await withRetries(() => this.runner.pool.query(query.sql, query.parameters as unknown[]));
      return (result.rowCount ?? 0) > 0;
    } catch (err) {
      throw storageError(err);
    }
  }

  async delete(id: string): Promise<boolean> {
    if (id.includes('\u0000')) return false;
    // The bucket row first (it waits for the bucket's running writers), then, in a statement with
    // a fresh snapshot, every key: a writer queued behind the row lock finds no bucket and writes nothing.
    return this.runner.transaction(async (client) => {
      const { rowCount } = await this.query('deleteBucket', { bucket: id }, client);
      await this.query('deleteBucketEntries', { bucket: id }, client);
      await this.query('deleteBucketChanges', { bucket: id }, client);
      await this.query('deleteBucketOperations', { bucket: id }, client);
      return (rowCount ?? 0) > 0;
    });
  }

  async list(after: string | undefined, limit: number): Promise<BucketRecord[]> {
    const { rows } = await this.query<BucketRow>('listBuckets', { after: after ?? '', limit });
    return rows.map(fromRow);
  }

  async count(): Promise<number> {
    const { rows } = await this.query<{ n: number }>('countBuckets', {});
    return Number(rows[0]?.n ?? 0);
  }

  async revision(bucket: string): Promise<number | undefined> {
    if (bucket.includes('\u0000')) return undefined;
    const { rows } = await this.query<{ revision: number }>('bucketRevision', { bucket });
    return rows[0] === undefined ? undefined : Number(rows[0].revision);
  }

  async usage(bucket: string): Promise<Usage | undefined> {
    if (bucket.includes('\u0000')) return undefined;
    const { rows } = await this.query<{ usage_keys: number; usage_bytes: number }>('bucketUsage', { bucket });
    const row = rows[0];
    return row && { keys: Number(row.usage_keys), bytes: Number(row.usage_bytes) };
  }
}
