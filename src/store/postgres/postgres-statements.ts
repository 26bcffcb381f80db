// PostgreSQL's own statements: those written with arrays, row versions and leases that SQLite
// does not have. The statements both dialects share are in ../statements.ts.
import { type Compilable, type Kysely as KyselyType, type RawBuilder, sql } from 'kysely';
import { CHANGE_INSERT_COLUMNS, type Database, ENTRY_INSERT_COLUMNS, REVISION_OP_INSERT_COLUMNS } from '../schema.js';
import { compileHistory } from '../history-statements.js';
import { compileAll, compileListShapes, param, portabilityStatements, queryBuilder, sharedStatements } from '../statements.js';

/** PostgreSQL only: leases (the write batch's statements are in postgresBatchStatements). */
export function postgresStatements(db: KyselyType<Database>) {
  return {
    /** Takes (or renews) a lease when it is free, expired, or already ours; returns a row only then. */
    takeLease: db
      .insertInto('kvb_leases')
      .values({ name: param('name'), holder: param('holder'), expires_at: param('until') })
      .onConflict((oc) =>
        oc
          .column('name')
          .doUpdateSet((eb) => ({ holder: eb.ref('excluded.holder'), expires_at: eb.ref('excluded.expires_at') }))
          .where((eb) => eb.or([eb('kvb_leases.expires_at', '<=', param('now')), eb('kvb_leases.holder', '=', param('holder'))])),
      )
      .returning('holder'),
    releaseLease: db
      .updateTable('kvb_leases')
      .set({ expires_at: sql.lit(0) })
      .where('name', '=', param('name'))
      .where('holder', '=', param('holder')),
  };
}

/**
 * PostgreSQL only: the write batch's statements (see postgres-batch.ts), written as SQL because
 * they are data-modifying CTEs over unnested arrays. `version` is the bucket row's `xmin`: any
 * transaction that changed the row (every write bumps its revision) gave it a new one, so a
 * statement guarded by `xmin = version` changes nothing if anyone wrote to the bucket since it
 * was read. Under READ COMMITTED an UPDATE that waited for the row re-checks its WHERE against the
 * newest version, so the guard holds across instances.
 */
export function postgresBatchStatements(schema: string) {
  const db = queryBuilder('postgres');
  const t = (name: string) => sql.table(`${schema}.${name}`);
  const raw = (query: RawBuilder<unknown>): Compilable => ({ compile: () => query.compile(db) });
  // The insert column lists, from schema.ts (unquoted, as the rest of this SQL is written).
  const changeColumns = sql.raw(CHANGE_INSERT_COLUMNS.join(', '));
  const entryColumns = sql.raw(ENTRY_INSERT_COLUMNS.join(', '));
  const operationColumns = sql.raw(REVISION_OP_INSERT_COLUMNS.join(', '));
  /** The batch's change rows and the final state of each key it set, from arrays in lockstep. */
  const written = sql`w as (select * from unnest(${param('keys')}::bytea[], ${param('kinds')}::text[], ${param('types')}::text[], ${param('values')}::bytea[], ${param('expiresAts')}::bigint[], ${param('revisions')}::bigint[], ${param('createRevisions')}::bigint[], ${param('actorKinds')}::text[], ${param('actorTokens')}::text[], ${param('actorAddresses')}::text[]) as w(key, kind, type, value, expires_at, revision, create_revision, actor_kind, actor_token, actor_address))`;
  const replace = sql`on conflict (bucket_id, key) do update set type = excluded.type, value = excluded.value, expires_at = excluded.expires_at, revision = excluded.revision`;
  /** The batch view decided each set's create revision (postgres-batch.ts `set`). */
  const replaceWithCreated = sql`${replace}, create_revision = excluded.create_revision`;
  return {
    /**
     * Point reads coalesced (postgres-point-reads.ts): the rows of (bucket, key) pairs given as two
     * arrays in lockstep, each with `i`, the 1-based position of the pair it answers.
     */
    readEntries: raw(sql`select q.i, e.type, e.value, e.expires_at, e.revision, e.create_revision
      from unnest(${param('buckets')}::text[], ${param('keys')}::bytea[]) with ordinality as q(bucket_id, key, i)
      join ${t('entries')} e on e.bucket_id = q.bucket_id and e.key = q.key`),
    /** A batch's read: the bucket row (revision, usage, version) and the rows of the keys its writes touch, in one snapshot. */
    readBatch:
      raw(sql`select b.revision, b.usage_keys, b.usage_bytes, b.xmin::text as version, e.key, e.type, e.value, e.expires_at, e.revision as entry_revision, e.create_revision as entry_create_revision
      from ${t('buckets')} b left join ${t('entries')} e on e.bucket_id = b.id and e.key = any(${param('keys')}::bytea[])
      where b.id = ${param('bucket')}`),
    /** The bucket row, locked for the rest of the transaction (a batch that found it changed since its read). */
    lockBucket: raw(sql`select 1 from ${t('buckets')} where id = ${param('bucket')} for update`),
    /**
     * A batch's writes in one statement, if the bucket row is still at `version`: the revision
     * set to the batch's last, the usage changed by the batch's delta, each key that ends set
     * upserted and each key that ends deleted removed (final state: the last row per key in `w`),
     * every change-log row, and the revision_ops rows (what made a counter's, transaction's or
     * rollback's revision). Returns the revision; no row (and no change) when stale.
     */
    applyBatch: raw(sql`with ${written},
      b as (update ${t('buckets')} set revision = ${param('revision')}::bigint, usage_keys = usage_keys + ${param('usageKeys')}::bigint, usage_bytes = usage_bytes + ${param('usageBytes')}::bigint
        where id = ${param('bucket')} and xmin = ${param('version')}::xid returning revision),
      f as (select distinct on (key) key, kind, type, value, expires_at, revision, create_revision from w order by key, revision desc),
      e as (insert into ${t('entries')} (${entryColumns})
        select ${param('bucket')}::text, f.key, f.type, f.value, f.expires_at, f.revision, f.create_revision from f, b where f.kind = 'set' ${replaceWithCreated}),
      d as (delete from ${t('entries')} where bucket_id = ${param('bucket')} and key in (select key from f where kind <> 'set') and exists (select 1 from b)),
      c as (insert into ${t('changes')} (${changeColumns})
        select ${param('bucket')}::text, w.revision, w.key, w.kind, w.type, w.value, w.expires_at, w.actor_kind, w.actor_token, w.actor_address, ${param('now')}::bigint from w, b),
      o as (insert into ${t('revision_ops')} (${operationColumns})
        select ${param('bucket')}::text, r.revision, r.operation, ${param('now')}::bigint from unnest(${param('opRevisions')}::bigint[], ${param('operations')}::text[]) as r(revision, operation), b
        on conflict (bucket_id, revision) do update set operation = excluded.operation, committed_at = excluded.committed_at)
      select revision from b`),
    /**
     * Unconditional SETs without a quota, in one statement and one round trip: the bucket's
     * revision and the old sizes are read from the statement's snapshot, and the bump (revision
     * plus the count of sets, usage by the sizes' difference) is guarded by the row's version as
     * read: if another writer committed in between, nothing changes and no row comes back.
     * `steps` numbers the sets 1..n; set i gets the snapshot's revision + i. A key that was not
     * live (at its first set's clock, `nows`) is created by its first set in the batch; one that
     * was keeps its create revision.
     */
    setsFresh: raw(sql`with s as (select revision, xmin from ${t('buckets')} where id = ${param('bucket')}),
      w as (select * from unnest(${param('keys')}::bytea[], ${param('types')}::text[], ${param('values')}::bytea[], ${param('expiresAts')}::bigint[], ${param('steps')}::bigint[], ${param('nows')}::bigint[], ${param('actorKinds')}::text[], ${param('actorTokens')}::text[], ${param('actorAddresses')}::text[]) as w(key, type, value, expires_at, step, now, actor_kind, actor_token, actor_address)),
      f as (select distinct on (key) key, type, value, expires_at, step, min(step) over (partition by key) as first_step,
          first_value(now) over (partition by key order by step) as first_now from w order by key, step desc),
      o as (select length(key) + length(value) as size from ${t('entries')} where bucket_id = ${param('bucket')} and key in (select key from f)),
      b as (update ${t('buckets')} set revision = revision + ${param('count')}::bigint,
          usage_keys = usage_keys + (select count(*) from f) - (select count(*) from o),
          usage_bytes = usage_bytes + (select coalesce(sum(length(key) + length(value)), 0) from f) - (select coalesce(sum(size), 0) from o)
        where id = ${param('bucket')} and xmin = (select xmin from s) returning revision - ${param('count')}::bigint as base),
      e as (insert into ${t('entries')} (${entryColumns})
        select ${param('bucket')}::text, f.key, f.type, f.value, f.expires_at, b.base + f.step,
          case when o.key is not null and (o.expires_at is null or o.expires_at > f.first_now) then o.create_revision else b.base + f.first_step end
        from f cross join b left join ${t('entries')} o on o.bucket_id = ${param('bucket')} and o.key = f.key where true ${replaceWithCreated}),
      c as (insert into ${t('changes')} (${changeColumns})
        select ${param('bucket')}::text, b.base + w.step, w.key, 'set', w.type, w.value, w.expires_at, w.actor_kind, w.actor_token, w.actor_address, ${param('now')}::bigint from w, b)
      select (select base from b) as base, exists (select 1 from s) as found`),
  };
}

/** Every statement the PostgreSQL store runs, compiled once for `schema`, under names the type checker knows. */
export function compilePostgresStatements(schema: string) {
  const builder = queryBuilder('postgres', schema);
  return {
    ...compileAll(sharedStatements(builder)),
    ...compileAll(postgresStatements(builder)),
    ...compileAll(postgresBatchStatements(schema)),
    // An import stages in a temporary table of its own transaction (see postgres-portability.ts).
    ...compileAll(portabilityStatements(builder, 'pg_temp.kvb_import')),
    ...compileHistory(builder, 'pg_temp.kvb_import'),
    ...compileListShapes(builder),
  };
}

export type PostgresStatements = ReturnType<typeof compilePostgresStatements>;

/** A PostgreSQL statement's name: a misspelt one does not compile. */
export type PostgresStatementName = keyof PostgresStatements;
