import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Whether the request carries `Authorization: Bearer <expected>`, compared in constant time. */
export function credentialMatches(request: FastifyRequest, expected: string): boolean {
  const match = /^Bearer[ \t]+(\S+)\s*$/i.exec(request.headers.authorization ?? '');
  return match !== null && timingSafeEqual(digest(match[1]!), digest(expected));
}
