import type { FastifyRequest } from 'fastify';
import { badRequest } from '../errors.js';
import { isImportRequest } from './routes/import-route.js';
import { isRollbackRequest } from './routes/history-routes.js';

/**
 * Query strings are decoded here, once, for every route (Fastify's `querystringParser`), and each
 * API route's parameters are checked here, once, before its handler runs: a parameter that is
 * malformed, unknown to the route, or meaningful only in another of its modes is a 400 naming it,
 * never taken literally or ignored.
 */

type Query = Record<string, string | string[]>;

/** The first parameter whose name or value has malformed percent-encoding (not valid UTF-8 included). */
const MALFORMED = Symbol('kvb.malformedQuery');
type ParsedQuery = Query & { [MALFORMED]?: string };

/** A query object: no prototype (`__proto__=x` is a parameter like any other), made as fast as `{}`. */
const NoPrototype = function (this: object) {} as unknown as new () => object;
NoPrototype.prototype = Object.create(null);

function decode(text: string): string | undefined {
  const plain = text.includes('+') ? text.replace(/\+/g, ' ') : text;
  if (!plain.includes('%')) return plain;
  try {
    return decodeURIComponent(plain);
  } catch {
    return undefined;
  }
}

/**
 * `a=1&b=2&a=3` as `{a: ['1', '3'], b: '2'}` (`+` is a space, a name without `=` has the value
 * ''), as Fastify's own parser gives it, except that malformed percent-encoding (`%ZZ`, `%C0%AF`,
 * `%FF`) is not passed through as text: the request is marked, and refused by checkQuery.
 */
export function parseQuery(text: string): ParsedQuery {
  const query = new NoPrototype() as ParsedQuery;
  for (let start = 0; start < text.length; ) {
    let end = text.indexOf('&', start);
    if (end === -1) end = text.length;
    const at = text.indexOf('=', start);
    const named = at !== -1 && at < end;
    const rawName = text.slice(start, named ? at : end);
    const rawValue = named ? text.slice(at + 1, end) : '';
    start = end + 1;
    if (rawName === '' && !named) continue;
    const name = decode(rawName);
    const value = decode(rawValue);
    if (name === undefined || value === undefined) {
      query[MALFORMED] ??= name ?? rawName;
      continue;
    }
    const before = query[name];
    if (before === undefined) query[name] = value;
    else if (Array.isArray(before)) before.push(value);
    else query[name] = [before, value];
  }
  return query;
}

/** Credentials may ride in the query on every API route (access-control.ts). */
const CREDENTIALS = ['access_token', 'key'];

/**
 * A route's parameters: `base` when none of its modes is asked for; a mode (a parameter such as
 * `watch`, given and not false) takes its own list instead, so `since` without `watch=true` is
 * misplaced. A mode's own name belongs to its list; `base` lists the modes too (`history=false`).
 */
interface QueryRule {
  base: readonly string[];
  modes?: Readonly<Record<string, readonly string[]>>;
  /** Said after `unknown query parameter X`, when the route has more to say. */
  note?: string;
}

const NONE: QueryRule = { base: [] };
const LISTING: QueryRule = {
  base: ['prefix', 'limit', 'skip', 'reverse', 'values', 'meta', 'format', 'cursor', 'rev', 'delimiter', 'export', 'watch', 'history'],
  // history first: with another mode beside it, the refusal names that mode as the misplaced one.
  modes: {
    history: ['history', 'prefix', 'actor', 'since', 'until', 'limit', 'cursor', 'values', 'format'],
    export: ['export', 'prefix', 'rev'],
    watch: ['watch', 'prefix', 'since', 'values', 'format'],
  },
};
const KEY_READ: QueryRule = { base: ['rev', 'history'], modes: { history: ['history', 'actor', 'limit', 'cursor', 'values'] } };
const KEY_WRITE: QueryRule = { base: ['ttl'] };
const IMPORT: QueryRule = { base: ['mode', 'prefix'] };
const ROLLBACK: QueryRule = { base: ['rollback', 'prefix', 'dry_run'] };
const TRANSACTION: QueryRule = { base: [], note: 'a POST with a body is a transaction (a rollback has no body)' };

/** Each API route's rule, by its pattern and method; a POST on the bucket is a transaction, an import or a rollback. */
const RULES = new Map<string, Record<string, QueryRule | ((request: FastifyRequest) => QueryRule)>>([
  ['/api/v1/', { POST: NONE }],
  ['/api/v1', { POST: NONE }],
  [
    '/api/v1/:bucket',
    {
      GET: NONE,
      HEAD: NONE,
      PATCH: NONE,
      DELETE: NONE,
      POST: (request) => (isImportRequest(request) ? IMPORT : isRollbackRequest(request) ? ROLLBACK : TRANSACTION),
    },
  ],
  ['/api/v1/:bucket/', { GET: LISTING, DELETE: NONE }],
  ['/api/v1/:bucket/tokens/', { POST: NONE }],
  ['/api/v1/:bucket/*', { GET: KEY_READ, HEAD: KEY_READ, POST: KEY_WRITE, PUT: KEY_WRITE, PATCH: KEY_WRITE, DELETE: NONE }],
]);

const isOff = (value: string | string[]) => value === 'false' || value === '0';

/** The parameters `query` may hold under `rule`: its mode's (the first mode given and not false), else its base. */
function allowedBy(rule: QueryRule, query: Query): readonly string[] {
  if (rule.modes) {
    for (const mode in rule.modes) {
      const value = query[mode];
      if (value !== undefined && !isOff(value)) return rule.modes[mode]!;
    }
  }
  return rule.base;
}

function refusal(rule: QueryRule, allowed: readonly string[], name: string) {
  const modes = Object.entries(rule.modes ?? {});
  if (allowed !== rule.base && rule.base.includes(name)) {
    const mode = modes.find(([, names]) => names === allowed)![0];
    return badRequest(`query parameter ${name} cannot be used with ${mode}=true`);
  }
  const homes = modes.filter(([mode, names]) => mode !== name && names.includes(name)).map(([mode]) => `${mode}=true`);
  if (homes.length > 0) return badRequest(`query parameter ${name} is used only with ${homes.join(' or ')}`);
  return badRequest(`unknown query parameter ${name}${rule.note ? `: ${rule.note}` : ''}`);
}

/**
 * Refuses (400) a query with malformed percent-encoding, on any route, and on an API route a
 * parameter the route does not take (in the mode asked for). Run once per request, first thing.
 */
export function checkQuery(request: FastifyRequest): void {
  const query = request.query as ParsedQuery;
  const malformed = query[MALFORMED];
  if (malformed !== undefined) throw badRequest(`malformed percent-encoding in query parameter ${JSON.stringify(malformed)}`);
  const routes = RULES.get(request.routeOptions.url ?? '');
  if (!routes) return;
  let rule = routes[request.method];
  if (rule === undefined) return;
  if (typeof rule === 'function') rule = rule(request);
  let allowed: readonly string[] | undefined;
  for (const name in query) {
    allowed ??= allowedBy(rule, query);
    if (!allowed.includes(name) && !CREDENTIALS.includes(name)) throw refusal(rule, allowed, name);
  }
}
