import { randomBytes } from 'node:crypto';

/** A strong random credential: 256 bits, base64url (43 characters, safe in shells and headers). */
export const generateKey = (): string => randomBytes(32).toString('base64url');
