import type { FastifyReply } from 'fastify';
import type { Entry } from '../../store/store.js';
import { CONTENT_TYPES } from '../../values/value-type.js';

/** Sets the headers that describe a stored value: Content-Type, Kvb-Type, Kvb-Expires-At. */
export function describeValue(reply: FastifyReply, entry: Entry): FastifyReply {
  reply.header('content-type', CONTENT_TYPES[entry.type]).header('kvb-type', entry.type);
  if (entry.expiresAt !== null) reply.header('kvb-expires-at', new Date(entry.expiresAt).toISOString());
  return reply;
}
