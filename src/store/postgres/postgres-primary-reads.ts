import type pg from 'pg';
import type { CompiledStatement } from '../statements.js';
import { StorageUnavailableError } from '../storage-errors.js';

/**
 * Every read kvb serves from PostgreSQL comes from a primary: kvb promises linearizable reads, and
 * a standby (a node a failover demoted, still reachable through a PgBouncer pinned to it) answers
 * with data that can be older than a write already acknowledged by the new primary. Checking the
 * server once per connection is not enough: behind a transaction pooler each statement may run
 * on another server connection, and the pooler keeps (or reopens) its connections to the demoted
 * node. So each read asks `pg_is_in_recovery()` in the same statement, one round trip: a read a
 * standby answered is discarded and re-run on a connection opened afterwards (the multi-host
 * search of postgres-hosts.ts then finds the writable host), or answered 503.
 */

const STANDBY = 'kvb_standby';
const ROW = 'kvb_row';

/** A statement that only reads: a select that locks nothing (a locking read already fails on a standby, 25006). */
export const isPlainRead = (sql: string) =>
  /^\s*select\b/i.test(sql) && !/\bfor\s+(update|no\s+key\s+update|share|key\s+share)\b/i.test(sql);

/**
 * The read, answered together with whether its server is in recovery, in one statement: the
 * outer row always exists (a read that finds nothing still says who answered), the read's own
 * rows carry `kvb_row`. A left join on `true` has no join clause, so PostgreSQL can only run it
 * as a nested loop with the one-row side outside: the read's rows come in the read's own order.
 */
export function checkingPrimary(statement: CompiledStatement): CompiledStatement {
  return {
    ...statement,
    sql:
      `select r.*, s.${STANDBY} from (select pg_catalog.pg_is_in_recovery() as ${STANDBY}) as s ` +
      `left join (select true as ${ROW}, q.* from (${statement.sql}) as q) as r on true`,
  };
}

/** A read answered by a server in recovery: SQLSTATE read_only_sql_transaction, as a write there gets. */
export class StandbyReadError extends Error {
  readonly code = '25006';
  constructor() {
    super('a read was answered by a standby (the server is in recovery), so it may be stale: discarded');
    this.name = 'StandbyReadError';
  }
}

/**
 * The read's own result from a `checkingPrimary` statement's, or a 503 (StorageUnavailableError
 * caused by a StandbyReadError) when a standby answered: its rows are never used.
 */
export function primaryResult<R extends pg.QueryResultRow>(result: pg.QueryResult<pg.QueryResultRow>): pg.QueryResult<R> {
  if (result.rows[0]?.[STANDBY] !== false) throw new StorageUnavailableError(new StandbyReadError());
  const rows: R[] = [];
  for (const row of result.rows) {
    if (row[ROW] !== true) continue;
    delete row[ROW];
    delete row[STANDBY];
    rows.push(row as R);
  }
  // In place: the result is this read's alone.
  const own = result as pg.QueryResult<R>;
  own.rows = rows;
  own.rowCount = rows.length;
  own.fields = result.fields.filter((f) => f.name !== ROW && f.name !== STANDBY);
  return own;
}

/** Whether an error is a read that a standby answered (see `primaryResult`). */
export const isStandbyRead = (err: unknown) => err instanceof StorageUnavailableError && err.cause instanceof StandbyReadError;

/**
 * Retires a pool's connections to a host once one of them reaches a standby there: the others
 * lead to the same demoted node (a pooler in front of it does not notice the failover), so each
 * is closed when it next leaves the pool instead of being used. Connections to other hosts are
 * kept. One failover costs each connection to the demoted host one reconnect, nothing more.
 */
export class ConnectionEpochs {
  /** Per host (as the connection names it): how many times a standby answered there. */
  private readonly epochs = new Map<string, number>();
  private readonly born = new WeakMap<pg.Client, number>();

  constructor(...pools: pg.Pool[]) {
    for (const pool of pools) pool.on('connect', (client) => this.born.set(client, this.epochOf(client)));
  }

  private static host(client: pg.Client): string {
    return `${client.host}:${client.port}`;
  }

  private epochOf(client: pg.Client): number {
    return this.epochs.get(ConnectionEpochs.host(client)) ?? 0;
  }

  /** A standby answered on `client`: every connection to its host open now is retired. */
  standbySeen(client: pg.Client): void {
    this.epochs.set(ConnectionEpochs.host(client), this.epochOf(client) + 1);
  }

  /** Whether `client` was opened before the last standby answer on its host. */
  retired(client: pg.Client): boolean {
    return (this.born.get(client) ?? this.epochOf(client)) < this.epochOf(client);
  }
}
