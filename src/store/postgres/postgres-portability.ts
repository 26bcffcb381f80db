import type pg from 'pg';
import { type ImportStep, checkImportQuota, planImport } from '../core/import-plan.js';
import type { Quota, Usage } from '../quota.js';
import { prefixUpperBound } from '../../values/keys.js';
import { type CompiledStatement, bind } from '../statements.js';
import type { Entry, EntrySnapshot, ImportStaging, KeyedEntry, Written } from '../store.js';
import { type EntryRow, toEntry } from '../entry-row.js';
import type { StatementRunner } from './postgres-statement-runner.js';
import type { PostgresStatements } from './postgres-statements.js';

/** The compiled statements an export or import runs. */
type Statements = PostgresStatements;

/** A bucket row's usage columns as numbers (pg returns bigint as text). */
const usageOf = (row: { usage_keys: number; usage_bytes: number }): Usage => ({
  keys: Number(row.usage_keys),
  bytes: Number(row.usage_bytes),
});

/** A connection checked out for an export or an import. */
interface Connection {
  release: () => void;
  run: <R extends pg.QueryResultRow>(text: string, values?: unknown[]) => Promise<pg.QueryResult<R>>;
  statement: <R extends pg.QueryResultRow>(statement: CompiledStatement, args: Record<string, unknown>) => Promise<pg.QueryResult<R>>;
}

/**
 * A connection of its own for a long-running export or import; `release` hands it back
 * (destroyed if it failed). Its statements go through the runner, so a plain read there is
 * checked to come from a primary like any other (postgres-primary-reads.ts).
 */
async function checkout(runner: StatementRunner): Promise<Connection> {
  let broken: unknown;
  const onError = (err: unknown) => {
    broken = err;
  };
  const client = await runner.checkout(onError);
  let released = false;
  return {
    statement: async <R extends pg.QueryResultRow>(statement: CompiledStatement, args: Record<string, unknown>) => {
      try {
        return await runner.run<R>(statement, args, client);
      } catch (err) {
        broken ??= err;
        throw err;
      }
    },
    run: async <R extends pg.QueryResultRow>(text: string, values: unknown[] = []) => {
      try {
        return await client.query<R>(text, values);
      } catch (err) {
        broken ??= err;
        throw runner.failure(err);
      }
    },
    release: () => {
      if (released) return;
      released = true;
      client.off('error', onError);
      client.release(broken === undefined ? undefined : true);
    },
  };
}

/**
 * An export's snapshot on PostgreSQL: a REPEATABLE READ, READ ONLY transaction on a connection of
 * its own (behind a transaction pooler it pins one server connection for just that transaction),
 * read through a server-side cursor a batch at a time, so the client's pace decides how fast rows
 * are fetched and a batch is all that is held in memory. The bucket's revision is read first, in
 * the same snapshot.
 */
export async function openPostgresSnapshot(
  runner: StatementRunner,
  sql: Statements,
  bucket: string,
  prefix: string,
  now: number,
): Promise<EntrySnapshot | undefined> {
  const connection = await checkout(runner);
  const prefixBytes = Buffer.from(prefix);
  const upper = prefix ? prefixUpperBound(prefixBytes) : undefined;
  const select = upper ? sql.snapshotEntriesUpper : sql.snapshotEntries;
  let revision: number;
  try {
    await connection.run('begin isolation level repeatable read read only');
    // The snapshot's first statement, a plain read: a snapshot a standby took is refused (the runner checks).
    const { rows } = await connection.statement<{ revision: number }>(sql.bucketRevision, { bucket });
    if (rows[0] === undefined) {
      await connection.run('rollback').catch(() => {});
      connection.release();
      return undefined;
    }
    revision = Number(rows[0].revision);
    await connection.run(
      `declare kvb_export no scroll cursor for ${select.sql}`,
      bind(select, { bucket, prefix: prefixBytes, now, upper }),
    );
  } catch (err) {
    await connection.run('rollback').catch(() => {});
    connection.release();
    throw err;
  }
  let open = true;
  return {
    revision,
    async read(max: number): Promise<Array<{ key: string; entry: Entry }>> {
      if (!open) return [];
      const { rows } = await connection.run<EntryRow & { key: Buffer }>(`fetch forward ${Math.max(1, Math.floor(max))} from kvb_export`);
      return rows.map((row) => ({ key: row.key.toString('utf8'), entry: toEntry(row) }));
    },
    async close(): Promise<void> {
      if (!open) return;
      open = false;
      await connection.run('rollback').catch(() => {});
      connection.release();
    },
  };
}

/**
 * An import staged in a temporary table inside one transaction on a connection of its own: the
 * staging takes no lock on the bucket's rows. `apply` then bumps the bucket row (its lock orders
 * the import with the bucket's other writers, as for any write), runs the import's plan
 * (core/import-plan.ts: history, the staged rows copied over at one revision, the quota), and
 * commits. Any failure, or `abort`, rolls everything back. The temporary
 * table is dropped at commit: no session state outlives the transaction (transaction poolers).
 */
export async function beginPostgresImport(runner: StatementRunner, sql: Statements, bucket: string, quota: Quota): Promise<ImportStaging> {
  const connection = await checkout(runner);
  let finished = false;
  const finish = async (how: 'commit' | 'rollback') => {
    finished = true;
    try {
      await connection.run(how);
    } finally {
      connection.release();
    }
  };
  try {
    await connection.run('begin');
    // The import's own scratch table, not kvb's schema: so not in statements.ts.
    await connection.run(
      'create temporary table kvb_import (key bytea primary key, type text not null, value bytea not null, expires_at bigint, revision bigint not null, create_revision bigint) on commit drop',
    );
  } catch (err) {
    await finish('rollback').catch(() => {});
    throw err;
  }
  return {
    async add(entries: KeyedEntry[]): Promise<void> {
      await stageRows(connection, entries);
    },
    async apply({ replace, prefix, restoreRevision, actor }): Promise<Written | { refused: 'no_bucket' }> {
      if (finished) throw new Error('import already finished');
      let revision: number;
      try {
        // The bucket row first, as every write does: it locks the row (ordering the import with the
        // bucket's other writers) and is the plan's bump, so the plan is made from the revision before it.
        const bumped = await connection.statement<{ revision: number; usage_keys: number; usage_bytes: number }>(sql.bumpBucket, {
          bucket,
        });
        const row = bumped.rows[0];
        const plan = planImport(
          { bucket, replace, prefix, restoreRevision, actor, now: Date.now() },
          row === undefined ? undefined : Number(row.revision) - 1,
        );
        if ('refused' in plan) {
          await finish('rollback');
          return plan;
        }
        revision = plan.revision;
        // Usage as of the row lock, before any of the import's statements.
        const before = usageOf(row!);
        for (const step of plan.steps)
          await runImportStep(connection, sql, bucket, step, (after) => checkImportQuota(quota, before, after));
      } catch (err) {
        if (!finished) await finish('rollback').catch(() => {});
        throw err;
      }
      await finish('commit');
      return { revision };
    },
    async abort(): Promise<void> {
      if (!finished) await finish('rollback').catch(() => {});
    },
  };
}

/** Stages a batch of an import's rows in its temporary table. */
async function stageRows(connection: Connection, entries: KeyedEntry[]): Promise<void> {
  // One row per key within a statement (ON CONFLICT cannot touch a row twice): the last wins.
  const last = new Map<string, KeyedEntry>();
  for (const e of entries) last.set(e.key, e);
  const rows = [...last.values()];
  if (rows.length === 0) return;
  await connection.run(
    `insert into pg_temp.kvb_import (key, type, value, expires_at, revision, create_revision)
         select * from unnest($1::bytea[], $2::text[], $3::bytea[], $4::bigint[], $5::bigint[], $6::bigint[])
         on conflict (key) do update set type = excluded.type, value = excluded.value, expires_at = excluded.expires_at, revision = excluded.revision, create_revision = excluded.create_revision`,
    [
      rows.map((r) => Buffer.from(r.key)),
      rows.map((r) => r.entry.type),
      rows.map((r) => r.entry.data),
      rows.map((r) => (r.entry.expiresAt === null ? null : String(r.entry.expiresAt))),
      rows.map((r) => String(r.entry.revision ?? 0)),
      rows.map((r) => (r.entry.createRevision === undefined ? null : String(r.entry.createRevision))),
    ],
  );
}

/** Runs one step of an import's plan on its connection; `checkQuota` is given the usage after the import's rows. */
async function runImportStep(
  connection: Connection,
  sql: Statements,
  bucket: string,
  step: ImportStep,
  checkQuota: (after: Usage) => void,
): Promise<void> {
  switch (step.step) {
    case 'bump':
      return;
    case 'setRevision':
      await connection.statement(sql.setRevision, { bucket, revision: step.revision });
      return;
    case 'statement':
      await connection.statement(sql[step.name], step.args);
      return;
    case 'checkQuota': {
      const after = await connection.statement<{ usage_keys: number; usage_bytes: number }>(sql.bucketUsage, { bucket });
      checkQuota(usageOf(after.rows[0]!));
      return;
    }
    case 'compact':
      await connection.statement(sql.raiseFloor, { bucket, revision: step.revision });
      await connection.statement(sql.compactChanges, { bucket, revision: step.revision, floor: step.floor });
      await connection.statement(sql.pruneOperations, { bucket, revision: step.revision });
      return;
  }
}
