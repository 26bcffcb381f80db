import type pg from 'pg';
import { NO_BUCKET, applyBatch } from '../core/apply-batch.js';
import type { OpOutcome, WriteOp } from '../core/write-ops.js';
import type { WriteView } from '../core/write-view.js';
import type { EntryRow } from '../entry-row.js';
import { type Quota, quotaSet } from '../quota.js';
import type { PostgresStatementName } from './postgres-statements.js';

/**
 * PostgreSQL writes, batched (the store's `write`). A batch carries the queued writes of several
 * buckets, each bucket's in order. It reads, in one statement, each bucket's revision and usage
 * and the rows of every key its writes touch (a `WriteView` per bucket), runs the write rules
 * (core/apply-batch.ts) over each bucket's view in memory, and writes what they did in one
 * statement (`applyBatch`: per bucket one bump of its row, the entries, the change log, the usage
 * and the revision_ops rows history keeps), one commit for every bucket. Each bucket is guarded by
 * its row's version: a bucket another instance wrote to in between is left unchanged and runs
 * again alone under its row's lock; the others are done. Unconditional SETs without a quota skip
 * the read: one statement for the whole batch (`setsFresh`), whose revisions are those the rules
 * would give (one each, in order). A refused write (a condition, a quota) is refused alone, as the
 * rules answer it; a storage error fails every write of the statement, and a statement whose
 * answer was lost is reported as of unknown outcome (postgres-statement-runner.ts).
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

/** One bucket's writes in a batch, in the order they queued. */
export interface BucketBatch {
  bucket: string;
  writes: QueuedWrite[];
}

type PlainSet = Extract<WriteOp, { op: 'set' }>;

/** An unconditional SET: with no quota set, batches of only these need no read. */
const isPlainSet = (op: WriteOp): op is PlainSet => op.op === 'set' && op.condition === undefined;

/**
 * Whether `setsFresh` gives these plain SETs what the rules would. It takes a key's create
 * revision from the row before the batch (live at the key's first set's clock) or from the key's
 * first set in the batch. That is the rules' answer unless one of the batch's own sets of a key
 * has expired by the clock of the next set of that key (a batch that waited longer than a TTL):
 * the rules then create the key again, so such a batch goes through the rules.
 */
function setsFreshAgrees(sets: PlainSet[]): boolean {
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
  bucket_id: string;
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
 * Runs a batch (one `BucketBatch` per bucket); resolves or rejects each write. A bucket that lost
 * its optimistic try to another writer runs again holding its row's lock, and `more` hands over
 * that bucket's writes queued since (up to `size` in all), taken in after the lock: they would
 * otherwise wait for that lock again, one batch later. The buckets in `lockFirst` (another
 * instance writes them too) skip the optimistic try: it would wait for the other writer's lock
 * and then lose, and the batch would wait for the lock a second time. Returns the buckets that
 * lost their optimistic try.
 */
export async function runBatches(
  backend: BatchBackend,
  batches: BucketBatch[],
  more: (bucket: string, room: number) => QueuedWrite[] = () => [],
  size = 0,
  lockFirst: ReadonlySet<string> = new Set(),
): Promise<string[]> {
  const tried = batches.filter((b) => !lockFirst.has(b.bucket));
  const done = new Map<BucketBatch, OpOutcome[]>();
  const lost: string[] = [];
  let toRun = batches;
  if (tried.length > 0) {
    try {
      const outcomes = await backend.retrying(() => optimistic(backend, tried));
      for (const [i, batch] of tried.entries()) {
        const outcome = outcomes[i];
        if (outcome) done.set(batch, outcome);
        else lost.push(batch.bucket);
      }
    } catch (err) {
      for (const { writes } of tried) for (const write of writes) write.reject(err);
      toRun = batches.filter((b) => lockFirst.has(b.bucket));
    }
  }
  await Promise.all(
    toRun.map(async (batch) => {
      try {
        const outcomes = done.get(batch) ?? (await backend.retrying(() => underLock(backend, batch, size, more)));
        for (const [j, write] of batch.writes.entries()) write.resolve(outcomes[j]!);
      } catch (err) {
        for (const write of batch.writes) write.reject(err);
      }
    }),
  );
  return lost;
}

/** Each batch's plain SETs when every write of every batch is one that `setsFresh` gives what the rules would, else undefined. */
function plainSets(backend: BatchBackend, batches: BucketBatch[]): PlainSet[][] | undefined {
  if (quotaSet(backend.quota)) return undefined;
  const all: PlainSet[][] = [];
  for (const { writes } of batches) {
    const sets = writes.map((w) => w.op).filter(isPlainSet);
    if (sets.length !== writes.length || !setsFreshAgrees(sets)) return undefined;
    all.push(sets);
  }
  return all;
}

/**
 * One try of the batches, with no lock held beyond the one statement that writes: one statement
 * (plain SETs), or read, run and write (two round trips). Per batch its outcomes, or undefined
 * when another writer changed its bucket in between (nothing of it was written). Re-runnable:
 * a statement commits whole or not at all.
 */
function optimistic(backend: BatchBackend, batches: BucketBatch[], client?: pg.PoolClient): Promise<Array<OpOutcome[] | undefined>> {
  const sets = plainSets(backend, batches);
  const buckets = batches.map((b) => b.bucket);
  return sets ? setsInOneStatement(backend, buckets, sets, client) : readRunApply(backend, batches, client);
}

/**
 * One bucket's batch again, holding its row. The wait for the lock is when this instance's next
 * writes to it queue up, so they join it. Under the lock, each statement's snapshot sees every
 * write before it: the one-statement SETs cannot lose to another writer, and save the read's round trip.
 */
function underLock(
  backend: BatchBackend,
  batch: BucketBatch,
  size: number,
  more: (bucket: string, room: number) => QueuedWrite[],
): Promise<OpOutcome[]> {
  return backend.transaction(async (client) => {
    await backend.query('lockBucket', { bucket: batch.bucket }, client);
    batch.writes.push(...more(batch.bucket, size - batch.writes.length));
    const [done] = await optimistic(backend, [batch], client);
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
    const [done] = await readRunApply(backend, [{ bucket, writes: [write] }], client);
    if (!done) throw new Error('the bucket row changed while locked');
    return done[0]!;
  });
}

/** Unconditional SETs only, of each bucket: one statement; per bucket undefined when another writer got in between (nothing of it written). */
async function setsInOneStatement(
  backend: BatchBackend,
  buckets: string[],
  sets: PlainSet[][],
  client?: pg.PoolClient,
): Promise<Array<OpOutcome[] | undefined>> {
  const all = sets.flatMap((ofBucket, i) => ofBucket.map((set, j) => ({ bucket: buckets[i]!, set, step: j + 1 })));
  const { rows } = await backend.query<{ bucket_id: string; base: number | null }>(
    'setsFresh',
    {
      bucketIds: buckets,
      buckets: all.map((s) => s.bucket),
      keys: all.map(({ set }) => Buffer.from(set.key)),
      types: all.map(({ set }) => set.value.type),
      values: all.map(({ set }) => set.value.data),
      expiresAts: all.map(({ set }) => (set.expiresAt === null ? null : String(set.expiresAt))),
      steps: all.map((s) => s.step),
      nows: all.map(({ set }) => set.now),
      actorKinds: all.map(({ set }) => set.actor?.kind ?? null),
      actorTokens: all.map(({ set }) => set.actor?.tokenId ?? null),
      actorAddresses: all.map(({ set }) => set.actor?.address ?? null),
      now: Date.now(),
    },
    client,
  );
  const bases = new Map(rows.map((r) => [r.bucket_id, r.base]));
  return sets.map((ofBucket, i) => {
    const base = bases.get(buckets[i]!);
    if (base === undefined) return ofBucket.map(() => ({ ok: true, value: NO_BUCKET }));
    if (base === null) return undefined;
    return ofBucket.map((_, j) => ({ ok: true, value: { revision: Number(base) + j + 1 } }));
  });
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

/** What readRunApply needs of a bucket's batch: its writes and the keys they touch. */
type ToApply = { bucket: string; writes: Array<Pick<QueuedWrite, 'op' | 'keys'>> };

/** A bucket's batch, run over its view, that changed the bucket. */
type Applied = { bucket: string; version: string; result: ReturnType<typeof applyBatch> };

/**
 * Reads the batches' views, runs each bucket's writes over its own and applies what they did in
 * one statement. Per batch its outcomes, or undefined when its bucket row changed since the read
 * (nothing of it was written).
 */
async function readRunApply(backend: BatchBackend, batches: ToApply[], client?: pg.PoolClient): Promise<Array<OpOutcome[] | undefined>> {
  const keys = batches.map(({ writes }) => [...new Set(writes.flatMap((w) => w.keys))]);
  const { rows } = await backend.query<BatchRow>(
    'readBatch',
    {
      bucketIds: batches.map((b) => b.bucket),
      keyBuckets: batches.flatMap((b, i) => keys[i]!.map(() => b.bucket)),
      keys: keys.flat().map((k) => Buffer.from(k)),
    },
    client,
  );
  const byBucket = new Map<string, BatchRow[]>();
  for (const row of rows) {
    const own = byBucket.get(row.bucket_id);
    if (own) own.push(row);
    else byBucket.set(row.bucket_id, [row]);
  }
  const outcomes: Array<OpOutcome[] | undefined> = [];
  const applied: Applied[] = [];
  for (const [i, { bucket, writes }] of batches.entries()) {
    const own = byBucket.get(bucket) ?? [];
    const view = batchView(keys[i]!, own);
    const result = applyBatch(
      view,
      writes.map((w) => w.op),
      backend.quota,
    );
    outcomes.push(result.outcomes);
    if (result.revision !== view.revision) applied.push({ bucket, version: own[0]!.version, result });
  }
  if (applied.length === 0) return outcomes;
  const written = new Set((await applyInOneStatement(backend, applied, client)).map((r) => r.bucket_id));
  const stale = new Set(applied.map((a) => a.bucket).filter((bucket) => !written.has(bucket)));
  return batches.map(({ bucket }, i) => (stale.has(bucket) ? undefined : outcomes[i]));
}

/** Writes what the rules did to each bucket, each guarded by its row's version; the buckets written. */
async function applyInOneStatement(backend: BatchBackend, applied: Applied[], client?: pg.PoolClient) {
  const changes = applied.flatMap(({ bucket, result }) => result.changes.map((c) => ({ bucket, ...c })));
  const operations = applied.flatMap(({ bucket, result }) => result.operations.map((o) => ({ bucket, ...o })));
  const { rows } = await backend.query<{ bucket_id: string }>(
    'applyBatch',
    {
      bucketIds: applied.map((a) => a.bucket),
      versions: applied.map((a) => a.version),
      bucketRevisions: applied.map((a) => a.result.revision),
      usageKeys: applied.map((a) => a.result.usage.keys),
      usageBytes: applied.map((a) => a.result.usage.bytes),
      buckets: changes.map((c) => c.bucket),
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
      opBuckets: operations.map((o) => o.bucket),
      opRevisions: operations.map((o) => o.revision),
      operations: operations.map((o) => o.operation),
      now: Date.now(),
    },
    client,
  );
  return rows;
}
