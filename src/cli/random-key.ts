/**
 * A strong random credential: 256 bits, base64url (43 characters, safe in shells and headers).
 * Never starting with `-`, so it cannot be mistaken for an option (`--token "$K"`).
 */
export function generateKey(): string {
  for (;;) {
    // Web Crypto's generator (the same CSPRNG as node:crypto), which start-up does not load.
    const key = Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64url');
    if (!key.startsWith('-')) return key;
  }
}
