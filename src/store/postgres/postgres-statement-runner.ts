import type pg from 'pg';
import { type CompiledStatement, bind } from '../statements.js';
import { StorageUnavailableError, isPostgresConnectionError, mayHaveReachedServer } from '../storage-errors.js';
import type { HostSelector } from './postgres-hosts.js';
import { type ConnectionEpochs, checkingPrimary, isPlainRead, isStandbyRead, primaryResult } from './postgres-primary-reads.js';
import { READ_ONLY, errorCode, storageError, withRetries } from './postgres-retries.js';

/** Returned by a transaction's work: roll back, and answer `value`. */
export class Rollback<T> {
  constructor(readonly value: T) {}
}
export const rollback = <T>(value: T) => new Rollback(value);

/**
 * Runs kvb's compiled statements on PostgreSQL: every statement of the store, its batches, its
 * exports and imports goes through `run`, so each plain read is asked, in the same statement,
 * whether a primary answers (postgres-primary-reads.ts) without its caller doing anything. A
 * standby's answer is discarded: on the pool the read runs once more on a connection opened after
 * it; inside a caller's connection (a transaction, a snapshot) the caller gets the 503.
 */
export class StatementRunner {
  /** With a multi-host URL or target_session_attrs: which host kvb connects to (see postgres-hosts.ts). */
  hostSelector: HostSelector | undefined;
  /** Each plain read's checking form (compiled once per statement). */
  private readonly checked = new WeakMap<CompiledStatement, CompiledStatement | null>();

  constructor(
    readonly pool: pg.Pool,
    private readonly epochs: ConnectionEpochs,
    /** Whether to use named (server-side, per-connection) prepared statements. */
    private readonly named: boolean,
  ) {}

  /** Runs `statement` with named `args` on the pool (a connection of its own) or on `client`. */
  async run<R extends pg.QueryResultRow>(
    statement: CompiledStatement,
    args: Record<string, unknown>,
    client?: pg.PoolClient,
  ): Promise<pg.QueryResult<R>> {
    const values = bind(statement, args);
    const read = this.checkedForm(statement);
    if (client) return this.runOn<R>(client, read ?? statement, values, read !== undefined);
    if (read) return withRetries(() => this.onOwnConnection((c) => this.runOn<R>(c, read, values, true)));
    try {
      return await this.onOwnConnection((c) => this.send<R>(c, statement, values));
    } catch (err) {
      // Outside a transaction a write commits by itself: its answer lost, whether it happened is
      // unknown. (A failed checkout, already a StorageUnavailableError, sent nothing.)
      if (!(err instanceof StorageUnavailableError) && !/^\s*select\b/i.test(statement.sql) && mayHaveReachedServer(err)) {
        throw new StorageUnavailableError(err, { outcomeUnknown: true });
      }
      throw this.failure(err);
    }
  }

  /** The read-only check's form of a plain read; undefined for anything else. */
  private checkedForm(statement: CompiledStatement): CompiledStatement | undefined {
    let read = this.checked.get(statement);
    if (read === undefined) {
      read = isPlainRead(statement.sql) ? checkingPrimary(statement) : null;
      this.checked.set(statement, read);
    }
    return read ?? undefined;
  }

  private async runOn<R extends pg.QueryResultRow>(
    client: pg.PoolClient,
    statement: CompiledStatement,
    values: unknown[],
    checksPrimary: boolean,
  ): Promise<pg.QueryResult<R>> {
    let result: pg.QueryResult;
    try {
      result = await this.send(client, statement, values);
    } catch (err) {
      throw this.failure(err);
    }
    return checksPrimary ? this.fromPrimary<R>(result, client) : (result as pg.QueryResult<R>);
  }

  private send<R extends pg.QueryResultRow>(
    client: pg.PoolClient,
    statement: CompiledStatement,
    values: unknown[],
  ): Promise<pg.QueryResult<R>> {
    return client.query<R>(this.named ? { name: `kvb_${statement.name}`, text: statement.sql, values } : { text: statement.sql, values });
  }

  /** `work` on a pooled connection of its own, which is closed if it failed or reached a standby. */
  private async onOwnConnection<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    let broken: unknown;
    const onError = (err: unknown) => {
      broken = err;
    };
    const client = await this.checkout(onError);
    try {
      return await work(client);
    } catch (err) {
      broken ??= err;
      throw err;
    } finally {
      client.off('error', onError);
      client.release(broken === undefined ? undefined : true);
    }
  }

  /**
   * A checked read's own rows. When a standby answered: the connections to its host open now are
   * retired, and the host is forgotten if it was the chosen one (only then: the others may already
   * have moved to the new primary, which a search from the first host could only delay).
   */
  private fromPrimary<R extends pg.QueryResultRow>(result: pg.QueryResult<pg.QueryResultRow>, client: pg.PoolClient): pg.QueryResult<R> {
    try {
      return primaryResult<R>(result);
    } catch (err) {
      if (isStandbyRead(err)) {
        this.epochs.standbySeen(client);
        // A listed host without a port is connected to on the default one.
        const chosen = this.hostSelector?.current;
        if (chosen && chosen.host === client.host && (chosen.port ?? client.port) === client.port) this.hostSelector?.forget(chosen);
      }
      throw err;
    }
  }

  /**
   * A pooled connection opened since the last standby answer (older ones are closed on the way
   * out, see ConnectionEpochs), with `onError` listening: a checked-out client whose connection
   * dies emits 'error' on itself, not on the pool; unhandled, that would end the process. The
   * listener goes on in the connect callback: a promise would leave a gap in which a termination
   * notice arriving in the same network read finds no listener.
   */
  async checkout(onError: (err: unknown) => void): Promise<pg.PoolClient> {
    for (;;) {
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
        throw this.failure(err);
      }
      if (!this.epochs.retired(client)) return client;
      client.off('error', onError);
      client.release(true);
    }
  }

  /**
   * storageError, and: a read-only server reached through a multi-host URL is a failover in
   * progress, so the next connect searches for the primary again and the caller gets 503, not 507.
   */
  failure(err: unknown): unknown {
    if (errorCode(err) === READ_ONLY && this.hostSelector) {
      this.hostSelector.forget();
      return new StorageUnavailableError(err);
    }
    return storageError(err);
  }

  /** Whether the database answers; with a host selection, also that it takes writes. */
  async ping(): Promise<void> {
    try {
      if (!this.hostSelector || this.hostSelector.attrs === 'any') {
        await this.pool.query('select 1');
        return;
      }
      // Ready means writable: a connection to a server demoted since it was opened does not count.
      const { rows } = await this.pool.query<{ transaction_read_only: string }>('show transaction_read_only');
      if (rows[0]?.transaction_read_only === 'on')
        throw Object.assign(new Error('the server is read-only (a standby?)'), { code: READ_ONLY });
    } catch (err) {
      throw this.failure(err);
    }
  }

  /** Runs `work` in a transaction on one connection, retried (see `withRetries`) when PostgreSQL rolls it back. */
  async transaction<T, R = never>(work: (client: pg.PoolClient) => Promise<T | Rollback<R>>): Promise<T | R> {
    return withRetries(async () => {
      let broken: unknown;
      const onError = (err: unknown) => {
        broken = err;
      };
      const client = await this.checkout(onError);
      let committing = false;
      try {
        await client.query('begin');
        const result = await work(client);
        if (result instanceof Rollback) {
          await client.query('rollback');
          return result.value;
        }
        committing = true;
        await client.query('commit');
        return result;
      } catch (err) {
        if (isPostgresConnectionError(err) || err instanceof StorageUnavailableError || errorCode(err) === READ_ONLY) broken = err;
        else await client.query('rollback').catch((e: unknown) => (broken = e));
        // The COMMIT was sent and its answer lost: it may or may not have happened. Never "done".
        if (committing && mayHaveReachedServer(err)) throw new StorageUnavailableError(err, { outcomeUnknown: true });
        throw this.failure(err);
      } finally {
        client.off('error', onError);
        // A connection that failed is destroyed rather than returned to the pool.
        client.release(broken instanceof Error ? broken : broken === undefined ? undefined : true);
      }
    });
  }
}
