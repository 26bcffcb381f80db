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
 * they are data-modifying CTEs over unnested arrays. One statement carries the batches of several
 * buckets (`bucketIds`, each write or change naming its bucket): one commit for all of them.
 * `versions` are the bucket rows' `xmin`: any transaction that changed a row (every write bumps
 * its revision) gave it a new one, so a bucket guarded by `xmin = version` is left unchanged if
 * anyone wrote to it since it was read, and the statement's other buckets go ahead. Under READ
 * COMMITTED an UPDATE that waited for a row re-checks its WHERE against the newest version, so the
 * guard holds across instances. The rows are locked first, in id order (`lk`, a locking CTE that
 * PostgreSQL always materializes; its rows are locked after the sort), so two statements over
 * the same buckets never wait for each other in a cycle.
 */
export function postgresBatchStatements(schema: string) {
  const db = queryBuilder('postgres');
  const t = (name: string) => sql.table(`${schema}.${name}`);
  const raw = (query: RawBuilder<unknown>): Compilable => ({ compile: () => query.compile(db) });
  // The insert column lists, from schema.ts (unquoted, as the rest of this SQL is written).
  const changeColumns = sql.raw(CHANGE_INSERT_COLUMNS.join(', '));
  const entryColumns = sql.raw(ENTRY_INSERT_COLUMNS.join(', '));
  const operationColumns = sql.raw(REVISION_OP_INSERT_COLUMNS.join(', '));
  const locked = sql`lk as (select id from ${t('buckets')} where id = any(${param('bucketIds')}::text[]) order by id for update)`;
  /** The batches' change rows and the final state of each key they set, from arrays in lockstep. */
  const written = sql`w as (select * from unnest(${param('buckets')}::text[], ${param('keys')}::bytea[], ${param('kinds')}::text[], ${param('types')}::text[], ${param('values')}::bytea[], ${param('expiresAts')}::bigint[], ${param('revisions')}::bigint[], ${param('createRevisions')}::bigint[], ${param('actorKinds')}::text[], ${param('actorTokens')}::text[], ${param('actorAddresses')}::text[]) as w(bucket_id, key, kind, type, value, expires_at, revision, create_revision, actor_kind, actor_token, actor_address))`;
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
    /**
     * The batches' read, in one snapshot: each bucket row (revision, usage, version) and the rows
     * of the (bucket, key) pairs their writes touch (`keyBuckets` and `keys` in lockstep).
     */
    readBatch:
      raw(sql`select b.id as bucket_id, b.revision, b.usage_keys, b.usage_bytes, b.xmin::text as version, e.key, e.type, e.value, e.expires_at, e.revision as entry_revision, e.create_revision as entry_create_revision
      from ${t('buckets')} b left join (unnest(${param('keyBuckets')}::text[], ${param('keys')}::bytea[]) as q(bucket_id, key)
        join ${t('entries')} e on e.bucket_id = q.bucket_id and e.key = q.key) on q.bucket_id = b.id
      where b.id = any(${param('bucketIds')}::text[])`),
    /** The bucket row, locked for the rest of the transaction (a batch that found it changed since its read). */
    lockBucket: raw(sql`select 1 from ${t('buckets')} where id = ${param('bucket')} for update`),
    /**
     * The batches' writes in one statement, each bucket's only if its row is still at its
     * `version`: the revision set to its batch's last, the usage changed by its batch's delta,
     * each key that ends set upserted and each key that ends deleted removed (final state: the
     * last row per key in `w`), every change-log row, and the revision_ops rows (what made a
     * counter's, transaction's or rollback's revision). Returns the buckets written, with their
     * revision; a stale bucket is missing (and none of its rows changed).
     */
    applyBatch: raw(sql`with ${written}, ${locked},
      u as (select * from unnest(${param('bucketIds')}::text[], ${param('versions')}::xid[], ${param('bucketRevisions')}::bigint[], ${param('usageKeys')}::bigint[], ${param('usageBytes')}::bigint[]) as u(id, version, revision, usage_keys, usage_bytes)),
      b as (update ${t('buckets')} x set revision = u.revision, usage_keys = x.usage_keys + u.usage_keys, usage_bytes = x.usage_bytes + u.usage_bytes
        from u join lk on lk.id = u.id where x.id = u.id and x.xmin = u.version returning x.id, x.revision),
      f as (select distinct on (bucket_id, key) bucket_id, key, kind, type, value, expires_at, revision, create_revision from w order by bucket_id, key, revision desc),
      e as (insert into ${t('entries')} (${entryColumns})
        select f.bucket_id, f.key, f.type, f.value, f.expires_at, f.revision, f.create_revision from f join b on b.id = f.bucket_id where f.kind = 'set' ${replaceWithCreated}),
      d as (delete from ${t('entries')} x using f join b on b.id = f.bucket_id where x.bucket_id = f.bucket_id and x.key = f.key and f.kind <> 'set'),
      c as (insert into ${t('changes')} (${changeColumns})
        select w.bucket_id, w.revision, w.key, w.kind, w.type, w.value, w.expires_at, w.actor_kind, w.actor_token, w.actor_address, ${param('now')}::bigint from w join b on b.id = w.bucket_id),
      o as (insert into ${t('revision_ops')} (${operationColumns})
        select r.bucket_id, r.revision, r.operation, ${param('now')}::bigint from unnest(${param('opBuckets')}::text[], ${param('opRevisions')}::bigint[], ${param('operations')}::text[]) as r(bucket_id, revision, operation) join b on b.id = r.bucket_id
        on conflict (bucket_id, revision) do update set operation = excluded.operation, committed_at = excluded.committed_at)
      select id as bucket_id, revision from b`),
    /**
     * Unconditional SETs without a quota, of several buckets, in one statement and one round
     * trip: each bucket's revision and the old sizes are read from the statement's snapshot (`s`),
     * and each bucket's bump (revision plus its count of sets, usage by the sizes' difference) is
     * guarded by its row's version as read: a bucket another writer committed to in between is
     * left unchanged and gets no base. `steps` number each bucket's sets 1..n; set i gets its
     * bucket's snapshot revision + i. A key that was not live (at its first set's clock, `nows`)
     * is created by its first set in the batch; one that was keeps its create revision.
     */
    setsFresh: raw(sql`with s as (select id, xmin from ${t('buckets')} where id = any(${param('bucketIds')}::text[])), ${locked},
      w as (select * from unnest(${param('buckets')}::text[], ${param('keys')}::bytea[], ${param('types')}::text[], ${param('values')}::bytea[], ${param('expiresAts')}::bigint[], ${param('steps')}::bigint[], ${param('nows')}::bigint[], ${param('actorKinds')}::text[], ${param('actorTokens')}::text[], ${param('actorAddresses')}::text[]) as w(bucket_id, key, type, value, expires_at, step, now, actor_kind, actor_token, actor_address)),
      f as (select distinct on (bucket_id, key) bucket_id, key, type, value, expires_at, step, min(step) over (partition by bucket_id, key) as first_step,
          first_value(now) over (partition by bucket_id, key order by step) as first_now from w order by bucket_id, key, step desc),
      o as (select x.bucket_id, x.key, x.expires_at, x.create_revision, length(x.key) + length(x.value) as size from ${t('entries')} x join f on x.bucket_id = f.bucket_id and x.key = f.key),
      n as (select bucket_id, count(*) as sets from w group by bucket_id),
      g as (select f.bucket_id, count(*) as keys, sum(length(f.key) + length(f.value)) as bytes, count(o.key) as old_keys, coalesce(sum(o.size), 0) as old_bytes
        from f left join o on o.bucket_id = f.bucket_id and o.key = f.key group by f.bucket_id),
      b as (update ${t('buckets')} x set revision = x.revision + n.sets, usage_keys = x.usage_keys + g.keys - g.old_keys, usage_bytes = x.usage_bytes + g.bytes - g.old_bytes
        from s join lk on lk.id = s.id join n on n.bucket_id = s.id join g on g.bucket_id = s.id
        where x.id = s.id and x.xmin = s.xmin returning x.id, x.revision - n.sets as base),
      e as (insert into ${t('entries')} (${entryColumns})
        select f.bucket_id, f.key, f.type, f.value, f.expires_at, b.base + f.step,
          case when o.key is not null and (o.expires_at is null or o.expires_at > f.first_now) then o.create_revision else b.base + f.first_step end
        from f join b on b.id = f.bucket_id left join o on o.bucket_id = f.bucket_id and o.key = f.key where true ${replaceWithCreated}),
      c as (insert into ${t('changes')} (${changeColumns})
        select w.bucket_id, b.base + w.step, w.key, 'set', w.type, w.value, w.expires_at, w.actor_kind, w.actor_token, w.actor_address, ${param('now')}::bigint from w join b on b.id = w.bucket_id)
      select s.id as bucket_id, b.base from s left join b on b.id = s.id`),
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
