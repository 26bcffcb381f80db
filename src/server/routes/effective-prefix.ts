import type { Principal } from '../../auth/access.js';
import { KvbError } from '../../errors.js';

/** The prefix a listing really uses: a token sees only its own prefix (403 when disjoint). */
export function effectivePrefix(principal: Principal, requested: string): string {
  if (principal.kind !== 'token' || requested.startsWith(principal.prefix)) return requested;
  if (principal.prefix.startsWith(requested)) return principal.prefix;
  throw new KvbError('forbidden', `prefix ${JSON.stringify(requested)} is outside the token's prefix ${JSON.stringify(principal.prefix)}`);
}
