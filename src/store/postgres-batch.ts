import type pg from 'pg';
import { type EntryRow, isLive, toEntry } from './entry-row.js';
import { type Quota, type Usage, checkQuota, entrySize } from './quota.js';
import type { Change, Entry } from './store.js';
import type { Actor } from './history-types.js';

/**
 * PostgreSQL writes, batched per bucket (the store's `write`). Each write is a synchronous
 * function over a `BatchView`: the bucket's revision and usage and the rows of the keys the
 * batch touches, read in one statement. The writes run in memory in their order of arrival, each
 * checking its condition, its quota and its own logic before it changes the view, so a refused
 * or failed write leaves nothing behind. What they did is then written in one statement
 * (`applyBatch`: one bump of the bucket row, the entries, the change log and the usage) guarded
 * by the bucket row's version (with the revision_ops rows history keeps): if another instance wrote to the bucket in between, nothing is
 * changed and the batch runs again under the bucket row's lock. Unconditional SETs without a
 * quota skip the read: one statement for the whole batch (`setsFresh`).
 */

/** One change-log row of the batch. */
interface LoggedChange {
  key: Buffer;
  kind: Change['kind'];
  type: string | null;
  value: Buffer | null;
  expiresAt: number | null;
  revision: number;
  /** For `set`: the key's create revision after it (kept from a live row it replaces). */
  createRevision: number | null;
  actor: Actor | undefined;
}

/** The bucket as one batch sees it: read once, changed in memory. */
export class BatchView {
  /** The revision last handed out (the bucket's, until a write takes the next). */
  revision: number;
  readonly changes: LoggedChange[] = [];
  /** What made a revision when it is not a plain set or delete (counter, transaction, rollback): revision_ops rows, in the batch's statement. */
  readonly operations: Array<{ revision: number; operation: string }> = [];
  readonly delta: Usage = { keys: 0, bytes: 0 };
  /** The running write's actor (set before each write runs), recorded on the rows it logs. */
  actor: Actor | undefined;

  constructor(
    readonly now: number,
    revision: number,
    private readonly usage: Usage,
    /** Every key the batch touches: its row, or absent. Raw rows: expired ones too (they count toward usage). */
    private readonly rows: Map<string, EntryRow | undefined>,
    private readonly quota: Quota,
  ) {
    this.revision = revision;
  }

  row(key: string): EntryRow | undefined {
    if (!this.rows.has(key)) throw new Error(`batch view: key ${JSON.stringify(key)} was not read`);
    return this.rows.get(key);
  }

  /** The key's entry if it is live at `now` (the write's own clock, as the store was given it). */
  live(key: string, now: number): Entry | undefined {
    const row = this.row(key);
    return row && isLive(row, now) ? toEntry(row) : undefined;
  }

  /** The bytes the key counts now (undefined: absent). */
  size(key: string): number | undefined {
    const row = this.row(key);
    return row && entrySize(Buffer.from(key), row.value);
  }

  /** Refuses (507) a usage change over the quota; call before changing anything. */
  check(delta: Usage): void {
    checkQuota(this.quota, { keys: this.usage.keys + this.delta.keys, bytes: this.usage.bytes + this.delta.bytes }, delta);
  }

  next(): number {
    return ++this.revision;
  }

  /**
   * Sets a key at `revision` (after `check`), counting its usage and logging the change. A row
   * live at `now` (the write's clock, as its condition saw it) keeps its create revision; returns
   * the key's create revision after the set.
   */
  set(key: string, type: string, value: Buffer, expiresAt: number | null, revision: number, now: number): number {
    const keyBytes = Buffer.from(key);
    const old = this.size(key);
    const before = this.row(key);
    const createRevision = before && isLive(before, now) ? Number(before.create_revision) : revision;
    this.delta.keys += old === undefined ? 1 : 0;
    this.delta.bytes += entrySize(keyBytes, value) - (old ?? 0);
    this.rows.set(key, { type, value, expires_at: expiresAt, revision, create_revision: createRevision });
    this.changes.push({ key: keyBytes, kind: 'set', type, value, expiresAt, revision, createRevision, actor: this.actor });
    return createRevision;
  }

  /** Records what made `revision` (history's `operation`); call after its changes. */
  operation(revision: number, operation: string): void {
    this.operations.push({ revision, operation });
  }

  /** Removes a key at `revision`; false (nothing logged) when it was not there. */
  remove(key: string, revision: number): boolean {
    const old = this.size(key);
    if (old === undefined) return false;
    this.delta.keys -= 1;
    this.delta.bytes -= old;
    this.rows.set(key, undefined);
    this.changes.push({ key: Buffer.from(key), kind: 'delete', type: null, value: null, expiresAt: null, revision, createRevision: null, actor: this.actor });
    return true;
  }
}

/** A refusal for every write of a batch whose bucket is gone. */
export const NO_BUCKET = { refused: 'no_bucket' } as const;

/** A write waiting for its bucket's next batch. */
export interface QueuedWrite {
  /** The keys it reads or writes (the batch reads them all in one statement). */
  keys: string[];
  /** Runs in memory against the view; throws (quota, bad input) before changing it. */
  run: (view: BatchView) => unknown;
  /** An unconditional SET with no quota set: batches of only these need no read. */
  plainSet?: { key: string; type: string; value: Buffer; expiresAt: number | null; now: number };
  /** Who makes it: recorded on the change rows it logs. */
  actor: Actor | undefined;
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

type Outcome = { ok: true; value: unknown } | { ok: false; err: unknown };

/** What the batch runner needs from the store. */
export interface BatchBackend {
  query<R extends pg.QueryResultRow>(name: string, args: Record<string, unknown>, client?: pg.PoolClient): Promise<pg.QueryResult<R>>;
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

/** Runs one bucket's batch of writes; resolves or rejects each. */
export async function runBatch(backend: BatchBackend, bucket: string, batch: QueuedWrite[]): Promise<void> {
  try {
    settle(batch, await backend.retrying(() => attempt(backend, bucket, batch)));
  } catch (err) {
    for (const write of batch) write.reject(err);
  }
}

/** One try of a batch; every statement of it is re-runnable (each is one statement, or inside one transaction). */
async function attempt(backend: BatchBackend, bucket: string, batch: QueuedWrite[]): Promise<Outcome[]> {
  if (!backend.quota.maxKeys && !backend.quota.maxBytes && batch.every((w) => w.plainSet)) {
    const outcomes = await setsInOneStatement(backend, bucket, batch);
    if (outcomes) return outcomes;
  } else {
    // Optimistic: read, run, write if nobody wrote in between; two round trips, no lock held.
    const outcomes = await readRunApply(backend, bucket, batch);
    if (outcomes) return outcomes;
  }
  // Someone wrote to the bucket in between (another instance): again, holding its row.
  return backend.transaction(async (client) => {
    await backend.query('lockBucket', { bucket }, client);
    const done = await readRunApply(backend, bucket, batch, client);
    if (!done) throw new Error('the bucket row changed while locked');
    return done;
  });
}

function settle(batch: QueuedWrite[], outcomes: Outcome[]): void {
  batch.forEach((write, i) => {
    const outcome = outcomes[i]!;
    if (outcome.ok) write.resolve(outcome.value);
    else write.reject(outcome.err);
  });
}

/** Unconditional SETs only: one statement; undefined when another writer got in between (nothing written). */
async function setsInOneStatement(backend: BatchBackend, bucket: string, batch: QueuedWrite[]): Promise<Outcome[] | undefined> {
  const sets = batch.map((w) => w.plainSet!);
  const { rows } = await backend.query<{ base: number | null; found: boolean }>('setsFresh', {
    bucket,
    keys: sets.map((s) => Buffer.from(s.key)),
    types: sets.map((s) => s.type),
    values: sets.map((s) => s.value),
    expiresAts: sets.map((s) => (s.expiresAt === null ? null : String(s.expiresAt))),
    steps: sets.map((_, i) => i + 1),
    nows: sets.map((s) => s.now),
    actorKinds: batch.map((w) => w.actor?.kind ?? null),
    actorTokens: batch.map((w) => w.actor?.tokenId ?? null),
    actorAddresses: batch.map((w) => w.actor?.address ?? null),
    count: sets.length,
    now: Date.now(),
  });
  const { base, found } = rows[0]!;
  if (!found) return batch.map(() => ({ ok: true, value: NO_BUCKET }));
  if (base === null) return undefined;
  return batch.map((_, i) => ({ ok: true, value: { revision: Number(base) + i + 1 } }));
}

/**
 * Reads the batch's view, runs its writes in memory and applies them in one guarded statement.
 * Undefined when the bucket row changed since the read (nothing was written).
 */
async function readRunApply(backend: BatchBackend, bucket: string, batch: QueuedWrite[], client?: pg.PoolClient): Promise<Outcome[] | undefined> {
  const keys = [...new Set(batch.flatMap((w) => w.keys))];
  const now = Date.now();
  const { rows } = await backend.query<BatchRow>('readBatch', { bucket, keys: keys.map((k) => Buffer.from(k)) }, client);
  const first = rows[0];
  if (!first) return batch.map(() => ({ ok: true, value: NO_BUCKET }));
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
  const start = Number(first.revision);
  const view = new BatchView(now, start, { keys: Number(first.usage_keys), bytes: Number(first.usage_bytes) }, entries, backend.quota);
  const outcomes: Outcome[] = batch.map((write) => {
    view.actor = write.actor;
    try {
      return { ok: true, value: write.run(view) };
    } catch (err) {
      return { ok: false, err };
    }
  });
  if (view.revision === start) return outcomes;
  const changes = view.changes;
  const applied = await backend.query<{ revision: number }>(
    'applyBatch',
    {
      bucket,
      version: first.version,
      revision: view.revision,
      usageKeys: view.delta.keys,
      usageBytes: view.delta.bytes,
      keys: changes.map((c) => c.key),
      kinds: changes.map((c) => c.kind),
      types: changes.map((c) => c.type),
      values: changes.map((c) => c.value),
      expiresAts: changes.map((c) => (c.expiresAt === null ? null : String(c.expiresAt))),
      revisions: changes.map((c) => c.revision),
      createRevisions: changes.map((c) => c.createRevision),
      actorKinds: changes.map((c) => c.actor?.kind ?? null),
      actorTokens: changes.map((c) => c.actor?.tokenId ?? null),
      actorAddresses: changes.map((c) => c.actor?.address ?? null),
      opRevisions: view.operations.map((o) => o.revision),
      operations: view.operations.map((o) => o.operation),
      now,
    },
    client,
  );
  return applied.rows.length > 0 ? outcomes : undefined;
}
