import { randomBytes } from 'node:crypto';

/**
 * A strong random credential: 256 bits, base64url (43 characters, safe in shells and headers).
 * Never starting with `-`, so it cannot be mistaken for an option (`--token "$K"`).
 */
export function generateKey(): string {
  for (;;) {
    const key = randomBytes(32).toString('base64url');
    if (!key.startsWith('-')) return key;
  }
}
