import { type Connection, ApiError, canList, canWrite, checkCredential, getPolicy, listKeys } from './api.js';
import { tokenClaims } from './format.js';

/** What the connected credential may do; the UI hides or disables everything else. */
export interface Capabilities {
  admin: boolean;
  read: boolean;
  enumerate: boolean;
  write: boolean;
  delete: boolean;
  /** A token's prefix: it sees nothing outside it. '' for keys. */
  scope: string;
  /** How the credential was recognised, shown beside the bucket id. */
  role: string;
}

/** A key name no one uses, for the write probe (the probe never stores it). */
const PROBE_KEY = '\u0001kvb-console-probe';

/**
 * Works out what a credential may do with as few requests as possible: a token says it in its
 * claims; a key is admin when the policy answers, otherwise harmless probes ask for the rest.
 */
export async function detectCapabilities(c: Connection): Promise<Capabilities> {
  const claims = c.credential ? tokenClaims(c.credential) : undefined;
  if (claims) {
    const has = (p: string) => (claims.permissions as string[]).includes(p);
    const caps: Capabilities = {
      admin: false,
      read: has('read'),
      enumerate: has('read') || has('enumerate'),
      write: has('write'),
      delete: has('delete'),
      scope: claims.prefix,
      role: `token (${claims.permissions.join(', ')} under "${claims.prefix}")`,
    };
    // A listing is the cheapest way to learn that the token is still good for this bucket.
    if (caps.enumerate) await listKeys(c, claims.prefix, undefined, 0);
    return caps;
  }
  try {
    await getPolicy(c);
    return {
      admin: true,
      read: true,
      enumerate: true,
      write: true,
      delete: true,
      scope: '',
      role: c.credential ? 'admin (secret key)' : 'admin (anonymous)',
    };
  } catch (err) {
    if (!(err instanceof ApiError) || ![401, 403, 404].includes(err.status)) throw err;
  }
  // A wrong credential must be refused here, not pass as an anonymous caller's rights and fail at
  // the first save.
  if (c.credential) await checkCredential(c);
  const read = await canList(c, true);
  const enumerate = read || (await canList(c, false));
  const write = await canWrite(c, PROBE_KEY);
  if (!read && !enumerate && !write) {
    throw new ApiError(401, 'unauthorized', 'this credential may do nothing in this bucket, or the bucket does not exist');
  }
  const role = [read && 'read', write && 'write'].filter(Boolean).join(' and ') || 'enumerate';
  return { admin: false, read, enumerate, write, delete: write, scope: '', role: `${role} key` };
}
