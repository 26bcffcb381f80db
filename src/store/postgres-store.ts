import { createHash } from 'node:crypto';
import { type Compilable, Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { prefixUpperBound } from '../values/keys.js';
import type { StoredValue } from '../values/value-type.js';
import { migrateToLatest } from './migrations.js';
import { type Database, bucketFromRow, bucketUpdate, replaceEntryOnConflict } from './schema.js';
import { StorageUnavailableError, isPostgresConnectionError } from './storage-errors.js';
import type { BucketChanges, BucketRecord, Entry, EntryUpdate, ListQuery, ListedEntry, Store, TxnOp } from './store.js';
import { type EntryRow, isLive, toEntry } from './entry-row.js';

export interface PostgresOptions {
  /** `postgres://` or `postgresql://`; `?schema=NAME` picks (and creates) the schema. */
  url: string;
  poolSize: number;
  /** Told about errors no request is waiting for (an idle connection dying). */
  onBackgroundError?: (err: unknown) => void;
}

/** A numbered placeholder; queries are compiled once, so every value goes through one of these. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a placeholder stands for a value of any column type
const p = (n: number) => sql<any>`${sql.raw(`$${n}`)}`;

/** Lower case only: the name goes unquoted into search_path, where PostgreSQL folds case. */
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;
const INT8_OID = 20;
/** Transactions that lose a deadlock are retried this many times before the error reaches the client. */
const MAX_ATTEMPTS = 5;
const RETRYABLE = new Set(['40001', '40P01']);
/** Whether attempt number `attempt` lost a deadlock or serialization conflict and may run again. */
const mayRetry = (err: unknown, attempt: number) => {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && RETRYABLE.has(code) && attempt < MAX_ATTEMPTS;
};
/** A counter finding its row inserted under it starts over; this bounds a pathological loop. */
const MAX_RETRIES = 100;
/** Returned by a transaction's work to roll back and run it again. */
const RETRY = Symbol('retry');

/**
 * int8 arrives as text; it becomes a number only when that is exact, a bigint otherwise.
 * Installed on this pool only, so nothing else in the process changes behaviour.
 */
function parseInt8(text: string): number | bigint {
  const n = Number(text);
  return Number.isSafeInteger(n) ? n : BigInt(text);
}

const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID && format !== 'binary' ? parseInt8 : pg.types.getTypeParser(oid, format ?? 'text')) as typeof pg.types.getTypeParser,
};

export interface ParsedPostgresUrl {
  /** What node-postgres is given: the URL without `schema`, with `search_path` and `application_name` set. */
  connectionString: string;
  schema: string;
}

/** Reads kvb's own URL parameter (`schema`) and folds it into options PostgreSQL understands. */
export function parsePostgresUrl(url: string): ParsedPostgresUrl {
  const parsed = new URL(url);
  const schema = parsed.searchParams.get('schema') ?? 'public';
  if (!SCHEMA_NAME.test(schema)) {
    throw new Error(`invalid schema name ${JSON.stringify(schema)} (lower-case letters, digits and _, not starting with a digit)`);
  }
  parsed.searchParams.delete('schema');
  const options = parsed.searchParams.get('options');
  parsed.searchParams.set('options', `${options ? `${options} ` : ''}-c search_path=${schema}`);
  if (!parsed.searchParams.has('application_name')) parsed.searchParams.set('application_name', 'kvb');
  return {
    connectionString: parsed.toString(),
    schema,
  };
}

/** The signing key column is bytea (see migrations.ts). */
const signingKeyBytes = (key: string | null) => (key === null ? null : Buffer.from(key, 'utf8'));

/** A 64-bit advisory-lock id for one key of one bucket (a collision only makes two keys wait for each other). */
function lockId(bucket: string, key: Buffer): string {
  const hash = createHash('sha256').update(bucket).update('\u0000').update(key).digest();
  return hash.readBigInt64BE(0).toString();
}

/** Turns a lost connection, refused connection or pool timeout into the one error the server answers with 503. */
function storageError(err: unknown): unknown {
  if (err instanceof StorageUnavailableError) return err;
  return isPostgresConnectionError(err) ? new StorageUnavailableError(err) : err;
}

/**
 * PostgreSQL through node-postgres, for several `kvb serve` instances sharing one database.
 * Kysely builds every query and runs the migrations; hot-path queries are compiled once and run
 * as named prepared statements straight on the pool (one round trip each). There is no entry
 * cache: other instances write too, so every read goes to the database.
 */
export class PostgresStore implements Store {
  readonly backend = 'postgres';
  readonly shared = true;
  private readonly texts = new Map<string, string>();
  /** Per bucket and key: the tail of this instance's queue of counter updates to it. */
  private readonly updateQueues = new Map<string, Promise<unknown>>();

  private constructor(
    private readonly pool: pg.Pool,
    private readonly db: Kysely<Database>,
  ) {}

  static async open(options: PostgresOptions): Promise<PostgresStore> {
    const { connectionString, schema } = parsePostgresUrl(options.url);
    await migrate(connectionString, schema);
    const pool = new pg.Pool({
      connectionString,
      max: options.poolSize,
      // A request waits at most this long for a connection before it is answered 503.
      connectionTimeoutMillis: 3_000,
      idleTimeoutMillis: 30_000,
      // Client-side bound on any one query, so a vanished server cannot hold a request forever.
      query_timeout: 20_000,
      keepAlive: true,
      types,
    });
    // An idle client whose connection dies emits 'error' on the pool; unhandled, that would end the process.
    pool.on('error', (err) => options.onBackgroundError?.(err));
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    return new PostgresStore(pool, db);
  }

  /** Compiles a Kysely query once and keeps its SQL under `name` (also the prepared statement's name). */
  private text(name: string, build: () => Compilable): string {
    let text = this.texts.get(name);
    if (text === undefined) {
      text = build().compile().sql;
      this.texts.set(name, text);
    }
    return text;
  }

  private async query<R extends pg.QueryResultRow>(
    name: string,
    build: () => Compilable,
    values: unknown[],
    client: pg.Pool | pg.PoolClient = this.pool,
  ): Promise<pg.QueryResult<R>> {
    try {
      return await client.query<R>({ name: `kvb_${name}`, text: this.text(name, build), values });
    } catch (err) {
      throw storageError(err);
    }
  }

  /** Runs `work` in a transaction on one connection; retried when PostgreSQL picks it as a deadlock victim. */
  private async transaction<T>(work: (client: pg.PoolClient) => Promise<T | typeof RETRY>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      let broken: unknown;
      // A checked-out client whose connection dies between two queries emits 'error' on itself,
      // not on the pool; unhandled, that would end the process (the next query fails anyway).
      // The listener goes on in the connect callback: a promise would leave a gap in which a
      // termination notice arriving in the same network read finds no listener.
      const onError = (err: unknown) => {
        broken = err;
      };
      let client: pg.PoolClient;
      try {
        client = await new Promise<pg.PoolClient>((resolve, reject) =>
          this.pool.connect((err, connected) => {
            if (err || !connected) return reject(err ?? new Error('no client'));
            connected.on('error', onError);
            resolve(connected);
          }),
        );
      } catch (err) {
        throw storageError(err);
      }
      try {
        await client.query('begin');
        const result = await work(client);
        if (result === RETRY) {
          await client.query('rollback');
          if (attempt >= MAX_RETRIES) throw new Error(`gave up after ${attempt} attempts`);
          continue;
        }
        await client.query('commit');
        return result;
      } catch (err) {
        if (isPostgresConnectionError(err)) broken = err;
        else await client.query('rollback').catch((e: unknown) => (broken = e));
        if (mayRetry(err, attempt)) continue;
        throw storageError(err);
      } finally {
        client.off('error', onError);
        // A connection that failed is destroyed rather than returned to the pool.
        client.release(broken instanceof Error ? broken : broken === undefined ? undefined : true);
      }
    }
  }

  async createBucket(b: BucketRecord): Promise<void> {
    await this.query(
      'createBucket',
      () =>
        this.db.insertInto('buckets').values({
          id: p(1),
          email: p(2),
          secret_key_hash: p(3),
          read_key_hash: p(4),
          write_key_hash: p(5),
          signing_key: p(6),
          signing_key_generation: p(7),
          default_ttl: p(8),
          created_at: p(9),
        }),
      [b.id, b.email, b.secretKeyHash, b.readKeyHash, b.writeKeyHash, signingKeyBytes(b.signingKey), b.signingKeyGeneration, b.defaultTtl, Date.now()],
    );
  }

  async getBucket(id: string): Promise<BucketRecord | undefined> {
    // Ids are generated and never contain NUL, which PostgreSQL text cannot even carry.
    if (id.includes('\u0000')) return undefined;
    const { rows } = await this.query<Omit<Database['buckets'], 'signing_key'> & { signing_key: Buffer | null }>(
      'getBucket',
      () => this.db.selectFrom('buckets').selectAll().where('id', '=', p(1)),
      [id],
    );
    const row = rows[0];
    return row && bucketFromRow({ ...row, signing_key: row.signing_key && row.signing_key.toString('utf8') });
  }

  async updateBucket(id: string, changes: BucketChanges): Promise<boolean> {
    if (id.includes('\u0000')) return false;
    // Rare and shaped by the request, so compiled per call and not prepared.
    const query = this.db
      .updateTable('buckets')
      .set(bucketUpdate(changes, signingKeyBytes))
      .where('id', '=', id)
      .compile();
    try {
      const result = await this.pool.query(query.sql, query.parameters as unknown[]);
      return (result.rowCount ?? 0) > 0;
    } catch (err) {
      throw storageError(err);
    }
  }

  async deleteBucket(id: string): Promise<boolean> {
    if (id.includes('\u0000')) return false;
    // One statement: the bucket and its keys go together or not at all. It locks many rows, so
    // it can deadlock with a transaction on the same bucket; PostgreSQL aborts one, and it is retried.
    const { rowCount } = await this.retryOnDeadlock(() => this.query(
      'deleteBucket',
      () =>
        this.db
          .with('gone', (db) => db.deleteFrom('entries').where('bucket_id', '=', p(1)).returning('bucket_id'))
          .deleteFrom('buckets')
          .where('id', '=', p(1)),
      [id],
    ));
    return (rowCount ?? 0) > 0;
  }

  private async retryOnDeadlock<T>(run: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await run();
      } catch (err) {
        if (!mayRetry(err, attempt)) throw err;
      }
    }
  }

  private selectEntry(forUpdate: boolean) {
    const query = this.db
      .selectFrom('entries')
      .select(['type', 'value', 'expires_at'])
      .where('bucket_id', '=', p(1))
      .where('key', '=', p(2));
    return forUpdate ? query.forUpdate() : query;
  }

  private upsertEntry() {
    return this.db
      .insertInto('entries')
      .values({ bucket_id: p(1), key: p(2), type: p(3), value: p(4), expires_at: p(5) })
      .onConflict(replaceEntryOnConflict);
  }

  async getEntry(bucket: string, key: string, now: number): Promise<Entry | undefined> {
    const { rows } = await this.query<EntryRow>('getEntry', () => this.selectEntry(false), [bucket, Buffer.from(key)]);
    const row = rows[0];
    return row && isLive(row, now) ? toEntry(row) : undefined;
  }

  async setEntry(bucket: string, key: string, value: StoredValue, expiresAt: number | null): Promise<void> {
    await this.query('setEntry', () => this.upsertEntry(), [bucket, Buffer.from(key), value.type, value.data, expiresAt]);
  }

  async deleteEntry(bucket: string, key: string, now: number): Promise<boolean> {
    const { rows } = await this.query<{ expires_at: number | null }>(
      'deleteEntry',
      () => this.db.deleteFrom('entries').where('bucket_id', '=', p(1)).where('key', '=', p(2)).returning('expires_at'),
      [bucket, Buffer.from(key)],
    );
    return rows[0] !== undefined && isLive(rows[0], now);
  }

  /**
   * Runs this instance's updates of one key one after another. Correctness across instances comes
   * from the row lock; this only keeps a hot counter from parking every pooled connection on the
   * same lock (which would starve every other request of connections).
   */
  private async queued<T>(id: string, work: () => Promise<T>): Promise<T> {
    const run = (this.updateQueues.get(id) ?? Promise.resolve()).then(work, work);
    const tail = run.catch(() => {});
    this.updateQueues.set(id, tail);
    try {
      return await run;
    } finally {
      if (this.updateQueues.get(id) === tail) this.updateQueues.delete(id);
    }
  }

  async updateEntry(bucket: string, key: string, now: number, update: EntryUpdate): Promise<Entry> {
    return this.queued(`${bucket}\u0000${key}`, () => this.lockAndUpdate(bucket, key, now, update));
  }

  private async lockAndUpdate(bucket: string, key: string, now: number, update: EntryUpdate): Promise<Entry> {
    const keyBytes = Buffer.from(key);
    // The row is locked (FOR UPDATE) from the read until the commit, so concurrent updates from
    // any instance queue up behind each other. An absent row cannot be locked: it is inserted with
    // ON CONFLICT DO NOTHING, and if another instance inserted it first, the whole thing starts over.
    return this.transaction(async (client) => {
      const { rows } = await this.query<EntryRow>('lockEntry', () => this.selectEntry(true), [bucket, keyBytes], client);
      const row = rows[0];
      const next = update(row && isLive(row, now) ? toEntry(row) : undefined);
      const values = [bucket, keyBytes, next.type, next.data, next.expiresAt];
      if (row) {
        await this.query(
          'updateEntry',
          () =>
            this.db
              .updateTable('entries')
              .set({ type: p(3), value: p(4), expires_at: p(5) })
              .where('bucket_id', '=', p(1))
              .where('key', '=', p(2)),
          values,
          client,
        );
        return next;
      }
      const inserted = await this.query(
        'insertEntry',
        () =>
          this.db
            .insertInto('entries')
            .values({ bucket_id: p(1), key: p(2), type: p(3), value: p(4), expires_at: p(5) })
            .onConflict((oc) => oc.columns(['bucket_id', 'key']).doNothing()),
        values,
        client,
      );
      return inserted.rowCount === 1 ? next : RETRY;
    });
  }

  async listEntries(bucket: string, q: ListQuery, now: number): Promise<ListedEntry[]> {
    const prefix = Buffer.from(q.prefix);
    const upper = q.prefix ? prefixUpperBound(prefix) : undefined;
    const after = q.after === undefined ? undefined : Buffer.from(q.after);
    const shape = `list_${q.reverse ? 'desc' : 'asc'}_${q.withValues ? 'v' : 'k'}${upper ? '_u' : ''}${after ? '_a' : ''}`;
    const values: unknown[] = [bucket, prefix, now, q.limit, q.offset];
    if (upper) values.push(upper);
    if (after) values.push(after);
    const { rows } = await this.query<EntryRow & { key: Buffer }>(
      shape,
      () => {
        let query = this.db
          .selectFrom('entries')
          .select(q.withValues ? ['key', 'type', 'value', 'expires_at'] : ['key'])
          .where('bucket_id', '=', p(1))
          .where('key', '>=', p(2))
          .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', p(3))]));
        let n = 6;
        if (upper) query = query.where('key', '<', p(n++));
        if (after) query = query.where('key', q.reverse ? '<' : '>', p(n++));
        return query
          .orderBy('key', q.reverse ? 'desc' : 'asc')
          .limit(p(4))
          .offset(p(5));
      },
      values,
    );
    return rows.map((row) => ({
      key: row.key.toString('utf8'),
      ...(q.withValues && { entry: toEntry(row) }),
    }));
  }

  async commit(bucket: string, ops: TxnOp[]): Promise<void> {
    // Operations are blind writes, so the outcome is the last operation on each key.
    const last = new Map<string, TxnOp>();
    for (const op of ops) {
      last.delete(op.key);
      last.set(op.key, op);
    }
    const final = [...last.values()];
    const sets = final.filter((op) => op.op === 'set');
    const deletes = final.filter((op) => op.op === 'delete').map((op) => Buffer.from(op.key));
    await this.transaction(async (client) => {
      if (final.length > 1) {
        // Every key is locked, in one global order, before anything is written: two transactions
        // on overlapping keys run one after the other (never interleaved, never deadlocked).
        const ids = [...new Set(final.map((op) => lockId(bucket, Buffer.from(op.key))))].sort();
        await this.query(
          'lockKeys',
          () =>
            this.db
              .selectFrom(sql`unnest(${p(1)}::bigint[])`.as('k'))
              .select(sql`pg_advisory_xact_lock(k)`.as('locked')),
          [ids],
          client,
        );
      }
      if (sets.length > 0) {
        await this.query(
          'commitSets',
          () =>
            this.db
              .insertInto('entries')
              .columns(['bucket_id', 'key', 'type', 'value', 'expires_at'])
              // Set-returning functions in one select list advance in lockstep: one row per operation.
              .expression(
                this.db.selectNoFrom([
                  p(1).as('bucket_id'),
                  sql`unnest(${p(2)}::bytea[])`.as('key'),
                  sql`unnest(${p(3)}::text[])`.as('type'),
                  sql`unnest(${p(4)}::bytea[])`.as('value'),
                  sql`unnest(${p(5)}::bigint[])`.as('expires_at'),
                ]),
              )
              .onConflict(replaceEntryOnConflict),
          [
            bucket,
            sets.map((op) => Buffer.from(op.key)),
            sets.map((op) => (op.op === 'set' ? op.value.type : '')),
            sets.map((op) => (op.op === 'set' ? op.value.data : Buffer.alloc(0))),
            sets.map((op) => (op.op === 'set' && op.expiresAt !== null ? String(op.expiresAt) : null)),
          ],
          client,
        );
      }
      if (deletes.length > 0) {
        await this.query(
          'commitDeletes',
          () => this.db.deleteFrom('entries').where('bucket_id', '=', p(1)).where('key', '=', sql<Buffer>`any(${p(2)}::bytea[])`),
          [bucket, deletes],
          client,
        );
      }
    });
  }

  async sweepExpired(now: number, batch: number): Promise<number> {
    // Several instances sweep at once: each takes rows no other sweep (or writer) holds.
    const { rowCount } = await this.query(
      'sweep',
      () =>
        this.db.deleteFrom('entries').where(
          sql.ref('ctid'),
          'in',
          this.db
            .selectFrom('entries')
            .select(sql.ref('ctid').as('ctid'))
            .where('expires_at', '<=', p(1))
            .limit(p(2))
            .forUpdate()
            .skipLocked(),
        ),
      [now, batch],
    );
    return rowCount ?? 0;
  }

  async countEntries(): Promise<number> {
    const { rows } = await this.query<{ n: number }>(
      'count',
      () => this.db.selectFrom('entries').select((eb) => eb.fn.countAll().as('n')),
      [],
    );
    return Number(rows[0]?.n ?? 0);
  }

  async ping(): Promise<void> {
    try {
      await this.pool.query('select 1');
    } catch (err) {
      throw storageError(err);
    }
  }

  async close(): Promise<void> {
    await this.db.destroy();
  }
}

/**
 * Creates the schema and runs the migrations under a session advisory lock on a connection of
 * its own, so instances starting together migrate one at a time and the rest find nothing to do.
 */
async function migrate(connectionString: string, schema: string): Promise<void> {
  const lock = new pg.Client({ connectionString, connectionTimeoutMillis: 5_000, types });
  lock.on('error', () => {});
  await lock.connect();
  const pool = new pg.Pool({ connectionString, max: 1, connectionTimeoutMillis: 5_000, types });
  pool.on('error', () => {});
  const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
  try {
    await lock.query(`select pg_advisory_lock(hashtext('kvb.migrate'), hashtext($1))`, [schema]);
    // Checked first: CREATE SCHEMA IF NOT EXISTS still needs the CREATE privilege, which a role
    // that only owns its tables in an existing schema may lack.
    const { rowCount } = await lock.query('select 1 from pg_namespace where nspname = $1', [schema]);
    if (rowCount === 0) await lock.query(`create schema "${schema}"`);
    await migrateToLatest(db, 'postgres', schema);
  } finally {
    await db.destroy().catch(() => {});
    await lock.end().catch(() => {});
  }
}
