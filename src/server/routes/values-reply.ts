import type { FastifyReply } from 'fastify';
import type { Entry } from '../../store/store.js';
import { CONTENT_TYPES } from '../../values/value-type.js';
import { etagOf } from '../conditions.js';

/** The header strings an entry needs beyond its type's: built once per entry object. */
interface EntryHeaders {
  etag: string;
  revision: string;
  expiresAt: string | undefined;
}

/**
 * Kept while the entry object lives: SQLite's entry cache hands out the same object for every hit,
 * so a hot key's Kvb-Expires-At (an ISO date, about 0.5 µs to format) and ETag are built once.
 */
const headersOf = new WeakMap<Entry, EntryHeaders>();

/** Sets the headers that describe a stored value: Content-Type, Kvb-Type, Kvb-Expires-At, and its revision (ETag, Kvb-Revision). */
export function describeValue(reply: FastifyReply, entry: Entry): FastifyReply {
  let headers = headersOf.get(entry);
  if (!headers) {
    headers = {
      etag: etagOf(entry.revision),
      revision: String(entry.revision),
      expiresAt: entry.expiresAt === null ? undefined : new Date(entry.expiresAt).toISOString(),
    };
    headersOf.set(entry, headers);
  }
  reply.header('content-type', CONTENT_TYPES[entry.type]).header('kvb-type', entry.type);
  reply.header('etag', headers.etag).header('kvb-revision', headers.revision);
  if (headers.expiresAt !== undefined) reply.header('kvb-expires-at', headers.expiresAt);
  return reply;
}
