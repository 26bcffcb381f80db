import type { CredentialHistory, MintedToken, Rotation, TokenUse } from '../history-credentials.js';
import type { Verdict } from '../history.js';
import { CLOCK_SLACK_MS } from './expiry.js';

/**
 * Temporary tokens under expiry and rotation: no request with a valid token is refused, none with
 * an expired or revoked one is served. A token is valid from its mint until the first of its `exp`
 * (the server compares its own clock, which the history's shares) and the rotation of the signing
 * key past its generation. Each use is judged only where the clocks settle it:
 * - surely valid: answered before `exp` (less the clock's margin), no rotation past the token's
 *   generation sent before the answer, and the rotation that made its generation known to the
 *   instance (answered there, or `propagationMs` before on another: a token signed with the new key
 *   is new to an instance that still holds the old one); then a 401 or 403 is an anomaly (every use
 *   stays inside the token's prefix and permissions);
 * - surely invalid: sent after `exp` (plus the margin), or after a rotation past its generation was
 *   answered (on the instance that rotated), or answered more than `propagationMs` before (on
 *   another: each instance caches checked tokens for at most 1 s); then any answer other than 401,
 *   403 or a 5xx (a request that was served) is an anomaly.
 * A use with no answer says nothing; one in neither case may go either way.
 */
const CHECKER = 'credentials';
const MAX_DETAILS = 10;

const REFUSED = (status: number) => status === 401 || status === 403;

/** When an instance surely knows a rotation: at once where it was made, `propagationMs` later elsewhere. */
function knownAt(rotation: Rotation | undefined, instance: string, propagationMs: number): number {
  if (rotation === undefined) return Number.NEGATIVE_INFINITY;
  return rotation.ret + (rotation.instance === instance ? 0 : propagationMs);
}

/** The first rotation past `generation`: the one that revokes a token minted under it. */
function revocation(rotations: readonly Rotation[], generation: number): Rotation | undefined {
  let first: Rotation | undefined;
  for (const r of rotations) if (r.generation > generation && (first === undefined || r.generation < first.generation)) first = r;
  return first;
}

function describeUse(use: TokenUse, token: MintedToken, revoked: Rotation | undefined): string {
  const ret = Number.isFinite(use.ret) ? use.ret.toFixed(1) : '∞';
  const rotation = revoked
    ? `, revoked by the rotation to generation ${revoked.generation} @${revoked.instance} [${revoked.call.toFixed(1)}, ${revoked.ret.toFixed(1)}]`
    : '';
  return `c${use.client}@${use.instance} [${use.call.toFixed(1)}, ${ret}] -> ${use.status} with token ${use.token} (generation ${token.generation}, expires ${token.expiresAt.toFixed(1)}${rotation})`;
}

export function checkCredentials(credentials: CredentialHistory): Verdict {
  const details: string[] = [];
  const note = (line: string): void => {
    if (details.length < MAX_DETAILS) details.push(line);
    else if (details.length === MAX_DETAILS) details.push('… more');
  };
  let examined = 0;
  for (const use of credentials.uses) {
    const token = credentials.tokens[use.token];
    if (use.status === undefined || token === undefined || use.status >= 500) continue;
    examined++;
    const revoked = revocation(credentials.rotations, token.generation);
    const made = credentials.rotations.find((r) => r.generation === token.generation);
    const validThrough =
      use.ret < token.expiresAt - CLOCK_SLACK_MS &&
      (revoked === undefined || revoked.call > use.ret) &&
      use.call > knownAt(made, use.instance, credentials.propagationMs) + CLOCK_SLACK_MS;
    const revokedBy = revoked === undefined ? Number.POSITIVE_INFINITY : knownAt(revoked, use.instance, credentials.propagationMs);
    const invalidAt = Math.min(token.expiresAt, revokedBy) + CLOCK_SLACK_MS;
    if (validThrough && REFUSED(use.status)) note(`a valid token refused: ${describeUse(use, token, revoked)}`);
    if (use.call > invalidAt && !REFUSED(use.status)) {
      const why = use.call > token.expiresAt + CLOCK_SLACK_MS ? 'an expired token served' : 'a revoked token served';
      note(`${why}: ${describeUse(use, token, revoked)}`);
    }
  }
  return { checker: CHECKER, result: details.length > 0 ? 'anomaly' : 'ok', details, examined };
}
