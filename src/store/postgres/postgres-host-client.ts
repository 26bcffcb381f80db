/** The pg side of multi-host URLs (postgres-hosts.ts holds the parsing and the choice): a Client class for pg.Pool. */
import pg from 'pg';
import { HostSelector, type HostCheck, NoUsableHostError, type PostgresHosts, type TargetSessionAttrs, label } from './postgres-hosts.js';

/**
 * Why this connection's server does not fit `attrs`, or undefined when it does. The checks are
 * libpq's: read-write asks `transaction_read_only` (on for a hot standby too), primary asks
 * `pg_is_in_recovery()`.
 */
async function unfit(client: pg.Client, attrs: TargetSessionAttrs): Promise<string | undefined> {
  if (attrs === 'read-write') {
    const { rows } = await client.query<{ transaction_read_only: string }>('show transaction_read_only');
    return rows[0]?.transaction_read_only === 'on' ? 'is read-only (a standby?)' : undefined;
  }
  if (attrs === 'primary') {
    const { rows } = await client.query<{ standby: boolean }>('select pg_catalog.pg_is_in_recovery() as standby');
    return rows[0]?.standby ? 'is a standby (in recovery)' : undefined;
  }
  return undefined;
}

export interface HostSelection {
  selector: HostSelector;
  /** For pg.Pool's `Client` option: connects to the selected host, and checks it again once connected. */
  Client: typeof pg.Client;
}

/**
 * A pg.Client class for a pool that connects where `selector` says. Each new connection checks its
 * own server too (one round trip per connection, not per query), since a failover can land
 * between the search and the connect; a connection that fails or finds a server that does not fit
 * makes the selector forget the host, so the next connect searches again.
 */
export function hostSelection(parsed: PostgresHosts, defaultTimeoutMs: number): HostSelection {
  const timeout = parsed.connectTimeoutMs ?? defaultTimeoutMs;
  const check: HostCheck = async (host) => {
    const probe = new pg.Client({ connectionString: parsed.urlFor(host), connectionTimeoutMillis: timeout });
    probe.on('error', () => {});
    try {
      await probe.connect();
      return await unfit(probe, parsed.targetSessionAttrs);
    } finally {
      await probe.end().catch(() => {});
    }
  };
  const selector = new HostSelector(parsed.hosts, parsed.targetSessionAttrs, check);

  class SelectingClient extends pg.Client {
    override connect(): Promise<pg.Client>;
    override connect(callback: ((err: Error) => void) | ((err: null, c: pg.Client) => void)): void;
    override connect(callback?: ((err: Error) => void) | ((err: null, c: pg.Client) => void)): Promise<pg.Client> | undefined {
      const done = this.connectSelected().then(() => this);
      if (!callback) return done;
      const call = callback as (err: Error | null, c?: pg.Client) => void;
      done.then(
        (c) => call(null, c),
        (err: Error) => call(err),
      );
    }

    private async connectSelected(): Promise<void> {
      const target = await selector.pick();
      // node-postgres reads host and port when it connects (and cancels), not when the client is made.
      this.host = target.host;
      // A listed host without a port gets the default, as in libpq (not the first host's port).
      this.port = target.port ?? (Number(process.env.PGPORT) || 5432);
      // Any later failure of this connection (the server died, was shut down or demoted) sends the next connect searching.
      this.on('error', () => selector.forget(target));
      try {
        await super.connect();
      } catch (err) {
        selector.forget(target);
        throw err;
      }
      // pg-pool drops a client whose connect failed without ending it: a refused connection is ended here.
      const refuse = async () => {
        selector.forget(target);
        await this.end().catch(() => {});
      };
      let why: string | undefined;
      try {
        why = await unfit(this, parsed.targetSessionAttrs);
      } catch (err) {
        await refuse();
        throw err;
      }
      if (why !== undefined) {
        await refuse();
        throw new NoUsableHostError(parsed.targetSessionAttrs, [`${label(target)}: ${why}`]);
      }
    }
  }
  return { selector, Client: SelectingClient as typeof pg.Client };
}
