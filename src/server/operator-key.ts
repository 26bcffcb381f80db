import { createHash, timingSafeEqual } from 'node:crypto';

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Whether the request carries `Authorization: Bearer <expected>`, compared in constant time. */
export function credentialMatches(request: { headers: { authorization?: string | undefined } }, expected: string): boolean {
  const match = /^Bearer[ \t]+(\S+)\s*$/i.exec(request.headers.authorization ?? '');
  return match !== null && timingSafeEqual(digest(match[1]!), digest(expected));
}
