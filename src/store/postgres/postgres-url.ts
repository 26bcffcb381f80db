import { type PostgresHosts, parsePostgresHosts } from './postgres-hosts.js';

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

export interface ParsedPostgresUrl {
  /** What node-postgres is given: the URL (first host only) without kvb's `schema`, with `application_name` set. */
  connectionString: string;
  schema: string;
  /** Every host of a libpq multi-host URL, and target_session_attrs (see postgres-hosts.ts). */
  hosts: PostgresHosts;
}

/**
 * Reads kvb's own URL parameter (`schema`) and libpq's host list. No `options` startup parameter
 * is sent (PgBouncer refuses it) and no search_path is relied on: every statement names its schema.
 */
export function parsePostgresUrl(url: string): ParsedPostgresUrl {
  const kvbParams = (text: string) => {
    const parsed = new URL(text);
    parsed.searchParams.delete('schema');
    if (!parsed.searchParams.has('application_name')) parsed.searchParams.set('application_name', 'kvb');
    return parsed.toString();
  };
  const raw = parsePostgresHosts(url);
  const hosts: PostgresHosts = { ...raw, urlFor: (host) => kvbParams(raw.urlFor(host)) };
  const first = new URL(raw.urlFor(raw.hosts[0]!));
  const schema = first.searchParams.get('schema') ?? 'public';
  if (!SCHEMA_NAME.test(schema)) {
    throw new Error(`invalid schema name ${JSON.stringify(schema)} (lower-case letters, digits and _, not starting with a digit)`);
  }
  return { connectionString: hosts.urlFor(raw.hosts[0]!), schema, hosts };
}
