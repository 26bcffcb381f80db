import type pg from 'pg';
import { NO_BUCKET, applyBatch } from '../core/apply-batch.js';
import type { OpOutcome, WriteOp } from '../core/write-ops.js';
import type { WriteView } from '../core/write-view.js';
import type { EntryRow } from '../entry-row.js';
import { type Quota, quotaSet } from '../quota.js';
import type { PostgresStatementName } from './postgres-statements.js';

/**
 * PostgreSQL writes, batched per bucket (the store's `write`). A batch reads, in one statement,
 * the bucket's revision and usage and the rows of every key its writes touch (a `WriteView`),
 * runs the write rules (core/apply-batch.ts) over it in memory, and writes what they did in one
 * statement (`applyBatch`: one bump of the bucket row, the entries, the change log, the usage and
 * the revision_ops rows history keeps) guarded by the bucket row's version: if another instance
 * wrote to the bucket in between, nothing is changed and the batch runs again under the bucket
 * row's lock. Unconditional SETs without a quota skip the read: one statement for the whole batch
 * (`setsFresh`), whose revisions are those the rules would give (one each, in order).
 */

export { NO_BUCKET };

/** A write waiting for its bucket's next batch. */
export interface QueuedWrite {
  op: WriteOp;
  /** The keys it reads or writes (the batch reads them all in one statement). */
  keys: string[];
  resolve(outcome: OpOutcome): void;
  reject(err: unknown): void;
}

/** An unconditional SET: with no quota set, batches of only these need no read. */
const isPlainSet = (op: WriteOp): op is Extract<WriteOp, { op: 'set' }> => op.op === 'set' && op.condition === undefined;

/**
 * Whether `setsFresh` gives these plain SETs what the rules would. It takes a key's create
 * revision from the row before the batch (live at the key's first set's clock) or from the key's
 * first set in the batch. That is the rules' answer unless one of the batch's own sets of a key
 * has expired by the clock of the next set of that key (a batch that waited longer than a TTL):
 * the rules then create the key again, so such a batch goes through the rules.
 */
function setsFreshAgrees(sets: Array<Extract<WriteOp, { op: 'set' }>>): boolean {
  const last = new Map<string, number | null>();
  for (const set of sets) {
    const expiresAt = last.get(set.key);
    if (expiresAt !== undefined && expiresAt !== null && expiresAt <= set.now) return false;
    last.set(set.key, set.expiresAt);
  }
  return true;
}

/** What the batch runner needs from the store. */
export interface BatchBackend {
  query<R extends pg.QueryResultRow>(
    name: PostgresStatementName,
    args: Record<string, unknown>,
    client?: pg.PoolClient,
  ): Promise<pg.QueryResult<R>>;
  /** A transaction on one connection (retried when PostgreSQL rolls it back as a deadlock victim). */
  transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T>;
  /** Runs `run` again when PostgreSQL rolled it back as a serialization failure or deadlock victim (it then had no effect). */
  retrying<T>(run: () => Promise<T>): Promise<T>;
  quota: Quota;
}

interface BatchRow {
  revision: number;
  usage_keys: number;
  usage_bytes: number;
  version: string;
  key: Buffer | null;
  type: string | null;
  value: Buffer | null;
  expires_at: number | null;
  entry_revision: number | null;
  entry_create_revision: number | null;
}

/**
 * Runs one bucket's batch of writes; resolves or rejects each. `more` hands over the bucket's
 * writes that queued since (up to the batch's room), taken in by a batch that had to wait for
 * the bucket row's lock: they would otherwise wait for that lock again, one batch later.
 */
export async function runBatch(
  backend: BatchBackend,
  bucket: string,
  batch: QueuedWrite[],
  more: (room: number) => QueuedWrite[] = () => [],
  size = batch.length,
): Promise<void> {
  try {
    const outcomes = await backend.retrying(() => attempt(backend, bucket, batch, () => batch.push(...more(size - batch.length))));
    for (const [i, write] of batch.entries()) write.resolve(outcomes[i]!);
  } catch (err) {
    for (const write of batch) write.reject(err);
  }
}

/** The batch's writes when all are plain SETs that `setsFresh` gives what the rules would, else undefined. */
function plainSets(backend: BatchBackend, batch: QueuedWrite[]): Array<Extract<WriteOp, { op: 'set' }>> | undefined {
  if (quotaSet(backend.quota)) return undefined;
  const sets = batch.map((w) => w.op).filter(isPlainSet);
  return sets.length === batch.length && setsFreshAgrees(sets) ? sets : undefined;
}

/**
 * One try of a batch; every statement of it is re-runnable (each is one statement, or inside one
 * transaction). `takeMore` adds the writes queued meanwhile to `batch` (see runBatch).
 */
async function attempt(backend: BatchBackend, bucket: string, batch: QueuedWrite[], takeMore: () => void): Promise<OpOutcome[]> {
  const sets = plainSets(backend, batch);
  // Optimistic: one statement (plain SETs), or read, run and write if nobody wrote in between
  // (two round trips); no lock held.
  const outcomes = sets ? await setsInOneStatement(backend, bucket, sets) : await readRunApply(backend, bucket, batch);
  if (outcomes) return outcomes;
  // Someone wrote to the bucket in between (another instance): again, holding its row. The wait
  // for the lock is when this instance's next writes queue up, so they join this batch.
  return backend.transaction(async (client) => {
    await backend.query('lockBucket', { bucket }, client);
    takeMore();
    // Under the lock, each statement's snapshot sees every write before it: the one-statement
    // SETs cannot lose to another writer, and save the read's round trip.
    const locked = plainSets(backend, batch);
    const done = locked ? await setsInOneStatement(backend, bucket, locked, client) : await readRunApply(backend, bucket, batch, client);
    if (!done) throw new Error('the bucket row changed while locked');
    return done;
  });
}

/**
 * Runs one write alone, in a transaction holding its bucket row from the start: `prepare`, on the
 * same connection, finds what the write needs (a transaction's prefix listing) while no other
 * writer can change the bucket. For a write whose optimistic tries keep losing to other writers.
 */
export function runLocked(
  backend: BatchBackend,
  bucket: string,
  prepare: (client: pg.PoolClient) => Promise<{ op: WriteOp; keys: string[] } | undefined>,
): Promise<OpOutcome> {
  return backend.transaction(async (client) => {
    const locked = await backend.query('lockBucket', { bucket }, client);
    if (locked.rows.length === 0) return { ok: true, value: NO_BUCKET };
    const write = await prepare(client);
    if (write === undefined) return { ok: true, value: NO_BUCKET };
    const done = await readRunApply(backend, bucket, [write], client);
    if (!done) throw new Error('the bucket row changed while locked');
    return done[0]!;
  });
}

/** Unconditional SETs only: one statement; undefined when another writer got in between (nothing written). */
async function setsInOneStatement(
  backend: BatchBackend,
  bucket: string,
  sets: Array<Extract<WriteOp, { op: 'set' }>>,
  client?: pg.PoolClient,
): Promise<OpOutcome[] | undefined> {
  const { rows } = await backend.query<{ base: number | null; found: boolean }>(
    'setsFresh',
    {
      bucket,
      keys: sets.map((s) => Buffer.from(s.key)),
      types: sets.map((s) => s.value.type),
      values: sets.map((s) => s.value.data),
      expiresAts: sets.map((s) => (s.expiresAt === null ? null : String(s.expiresAt))),
      steps: sets.map((_, i) => i + 1),
      nows: sets.map((s) => s.now),
      actorKinds: sets.map((s) => s.actor?.kind ?? null),
      actorTokens: sets.map((s) => s.actor?.tokenId ?? null),
      actorAddresses: sets.map((s) => s.actor?.address ?? null),
      count: sets.length,
      now: Date.now(),
    },
    client,
  );
  const { base, found } = rows[0]!;
  if (!found) return sets.map(() => ({ ok: true, value: NO_BUCKET }));
  if (base === null) return undefined;
  return sets.map((_, i) => ({ ok: true, value: { revision: Number(base) + i + 1 } }));
}

/** The batch's rows as one statement read them: every key it touches, and the bucket's revision and usage. */
function batchView(keys: string[], rows: BatchRow[]): WriteView {
  const first = rows[0];
  const entries = new Map<string, EntryRow | undefined>(keys.map((k) => [k, undefined]));
  for (const row of rows) {
    if (row.key === null) continue;
    entries.set(row.key.toString('utf8'), {
      type: row.type!,
      value: row.value!,
      expires_at: row.expires_at,
      revision: row.entry_revision!,
      create_revision: row.entry_create_revision!,
    });
  }
  return {
    revision: first && Number(first.revision),
    usage: () => ({ keys: Number(first!.usage_keys), bytes: Number(first!.usage_bytes) }),
    row: (key) => {
      if (!entries.has(key)) throw new Error(`batch view: key ${JSON.stringify(key)} was not read`);
      return entries.get(key);
    },
    liveKeys: () => {
      // The store lists a transaction's prefixes before it queues it (CommitOp.listed).
      throw new Error('batch view: prefixes are listed before the batch');
    },
  };
}

/**
 * Reads the batch's view, runs its writes and applies what they did in one guarded statement.
 * Undefined when the bucket row changed since the read (nothing was written).
 */
async function readRunApply(
  backend: BatchBackend,
  bucket: string,
  batch: Array<Pick<QueuedWrite, 'op' | 'keys'>>,
  client?: pg.PoolClient,
): Promise<OpOutcome[] | undefined> {
  const keys = [...new Set(batch.flatMap((w) => w.keys))];
  const now = Date.now();
  const { rows } = await backend.query<BatchRow>('readBatch', { bucket, keys: keys.map((k) => Buffer.from(k)) }, client);
  const view = batchView(keys, rows);
  const result = applyBatch(
    view,
    batch.map((w) => w.op),
    backend.quota,
  );
  if (result.revision === view.revision) return result.outcomes;
  const { changes, operations } = result;
  const applied = await backend.query<{ revision: number }>(
    'applyBatch',
    {
      bucket,
      version: rows[0]!.version,
      revision: result.revision,
      usageKeys: result.usage.keys,
      usageBytes: result.usage.bytes,
      keys: changes.map((c) => Buffer.from(c.key)),
      kinds: changes.map((c) => c.kind),
      types: changes.map((c) => c.value?.type ?? null),
      values: changes.map((c) => c.value?.data ?? null),
      expiresAts: changes.map((c) => (c.expiresAt === null ? null : String(c.expiresAt))),
      revisions: changes.map((c) => c.revision),
      createRevisions: changes.map((c) => c.createRevision),
      actorKinds: changes.map((c) => c.actor?.kind ?? null),
      actorTokens: changes.map((c) => c.actor?.tokenId ?? null),
      actorAddresses: changes.map((c) => c.actor?.address ?? null),
      opRevisions: operations.map((o) => o.revision),
      operations: operations.map((o) => o.operation),
      now,
    },
    client,
  );
  return applied.rows.length > 0 ? result.outcomes : undefined;
}
