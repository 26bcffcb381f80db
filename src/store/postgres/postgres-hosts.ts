import { describeError } from '../storage-errors.js';

/**
 * libpq's multi-host connection strings for node-postgres, which takes only one host:
 * `postgres://u@h1:5432,h2:5433/db?target_session_attrs=read-write`. Hosts are tried in order;
 * with `read-write` (or `primary`) only a server that takes writes is kept. The choice is
 * remembered until a connection to it fails, so steady-state connects cost nothing extra; after a
 * failover the next connect probes the hosts again and finds the new primary. Pure (no driver):
 * the pg.Client that uses it is in postgres-host-client.ts.
 */

export interface PostgresHost {
  host: string;
  /** undefined: node-postgres's default (PGPORT or 5432). */
  port: number | undefined;
}

/** What kvb accepts of libpq's target_session_attrs: kvb writes, so never a standby. */
export type TargetSessionAttrs = 'any' | 'read-write' | 'primary';
const TARGET_SESSION_ATTRS: readonly string[] = ['any', 'read-write', 'primary'];

export interface PostgresHosts {
  hosts: PostgresHost[];
  targetSessionAttrs: TargetSessionAttrs;
  /** libpq's connect_timeout (seconds) in ms, per host; undefined when the URL gives none. */
  connectTimeoutMs: number | undefined;
  /** The same URL naming only `host` (what node-postgres is given); target_session_attrs removed. */
  urlFor(host: PostgresHost): string;
}

const AUTHORITY = /^(postgres(?:ql)?:\/\/)([^/?#]*)(.*)$/is;
const BRACKETED = /^\[([^\]]+)\](?::(\d*))?$/;
const PLAIN = /^([^:[\]]*)(?::(\d*))?$/;

export const label = (h: PostgresHost) => (h.host.includes(':') ? `[${h.host}]` : h.host) + (h.port === undefined ? '' : `:${h.port}`);

/** One line for logs and errors: the hosts, never the credentials. */
export const describeHosts = (hosts: PostgresHost[]) => hosts.map(label).join(', ');

/** Splits a `postgres://` URL's host list (libpq form); throws a message without the password on bad input. */
export function parsePostgresHosts(url: string): PostgresHosts {
  const match = AUTHORITY.exec(url);
  if (!match) throw new Error('not a postgres:// or postgresql:// URL');
  const [, scheme, authority, rest] = match as unknown as [string, string, string, string];
  const at = authority.lastIndexOf('@');
  const userinfo = at >= 0 ? authority.slice(0, at + 1) : '';
  const hostList = authority.slice(at + 1);
  const hosts = hostList === '' ? [] : hostList.split(',').map((text) => parseHost(text, hostList));
  if (hosts.length > 1 && hosts.some((h) => h.host === '')) throw new Error(`empty host in the host list ${JSON.stringify(hostList)}`);

  const query = new URLSearchParams(rest.includes('?') ? rest.slice(rest.indexOf('?') + 1).replace(/#.*$/s, '') : '');
  const attrs = query.get('target_session_attrs') ?? 'any';
  if (!TARGET_SESSION_ATTRS.includes(attrs)) {
    throw new Error(`target_session_attrs=${attrs} is not supported: kvb writes, so use read-write (or primary, or any)`);
  }
  const timeout = query.get('connect_timeout');
  let connectTimeoutMs: number | undefined;
  if (timeout !== null) {
    const seconds = Number(timeout);
    if (!Number.isInteger(seconds) || seconds < 0) throw new Error(`connect_timeout must be whole seconds, not ${JSON.stringify(timeout)}`);
    // libpq: 0 means wait forever; values under 2 are taken as 2.
    connectTimeoutMs = seconds === 0 ? undefined : Math.max(2, seconds) * 1000;
  }
  const withoutAttrs = rest.replace(/([?&])target_session_attrs=[^&#]*(&?)/, (_m, lead: string, trail: string) => (trail ? lead : ''));
  return {
    hosts: hosts.length > 0 ? hosts : [{ host: '', port: undefined }],
    targetSessionAttrs: attrs as TargetSessionAttrs,
    connectTimeoutMs,
    urlFor: (h) =>
      `${scheme}${userinfo}${h.host.includes(':') ? `[${h.host}]` : h.host}${h.port === undefined ? '' : `:${h.port}`}${withoutAttrs}`,
  };
}

function parseHost(text: string, list: string): PostgresHost {
  const match = BRACKETED.exec(text) ?? PLAIN.exec(text);
  if (!match) throw new Error(`cannot read host ${JSON.stringify(text)} in ${JSON.stringify(list)}`);
  const [, host = '', portText] = match;
  if (portText === undefined || portText === '') return { host, port: undefined };
  const port = Number(portText);
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    throw new Error(`invalid port ${JSON.stringify(portText)} for host ${JSON.stringify(host)}`);
  return { host, port };
}

/** Whether kvb must choose among hosts itself (otherwise node-postgres connects as it always did). */
export const needsSelection = (parsed: PostgresHosts) => parsed.hosts.length > 1 || parsed.targetSessionAttrs !== 'any';

/** Whether this connection's server fits: undefined if it does, otherwise why not. */
export type HostCheck = (host: PostgresHost) => Promise<string | undefined>;

/** No listed host fits right now: an 08001 error, which kvb answers with 503. */
export class NoUsableHostError extends Error {
  readonly code = '08001';
  constructor(attrs: TargetSessionAttrs, reasons: string[]) {
    super(`no ${attrs === 'any' ? 'reachable' : attrs} PostgreSQL server among the hosts (${reasons.join('; ')})`);
    this.name = 'NoUsableHostError';
  }
}

/**
 * Remembers which host is the one to use, finds it by checking the hosts in order when there is
 * none (one search at a time, shared by every connect waiting for it), and forgets it when a
 * connection to it fails or it turns out read-only.
 */
export class HostSelector {
  private chosen: PostgresHost | undefined;
  private search: Promise<PostgresHost> | undefined;

  constructor(
    readonly hosts: PostgresHost[],
    readonly attrs: TargetSessionAttrs,
    private readonly check: HostCheck,
  ) {}

  get current(): PostgresHost | undefined {
    return this.chosen;
  }

  async pick(): Promise<PostgresHost> {
    if (this.chosen) return this.chosen;
    this.search ??= this.find().finally(() => {
      this.search = undefined;
    });
    return this.search;
  }

  /** Forgets the chosen host (only if it is still `host`, when given): the next connect searches again. */
  forget(host?: PostgresHost): void {
    if (!host || (this.chosen && this.chosen.host === host.host && this.chosen.port === host.port)) this.chosen = undefined;
  }

  private async find(): Promise<PostgresHost> {
    const reasons: string[] = [];
    for (const host of this.hosts) {
      const why = await this.check(host).catch((err: unknown) => describeError(err));
      if (why === undefined) {
        this.chosen = host;
        return host;
      }
      reasons.push(`${label(host)}: ${why}`);
    }
    throw new NoUsableHostError(this.attrs, reasons);
  }
}
