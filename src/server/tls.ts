import { readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';

/** A certificate chain and its private key, as read from `--tls-cert` and `--tls-key`. */
export interface TlsFiles {
  cert: Buffer;
  key: Buffer;
}

/** A TLS file that cannot be used; the message names the file and says why, in one line. */
export class TlsConfigError extends Error {}

function readPem(path: string, what: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOENT'
        ? 'no such file'
        : code === 'EACCES' || code === 'EPERM'
          ? 'permission denied'
          : code === 'EISDIR'
            ? 'it is a directory'
            : (err as Error).message;
    throw new TlsConfigError(`cannot read the TLS ${what} ${path}: ${why}`);
  }
}

/**
 * Reads the certificate and key and checks they belong together (Node's secure context refuses
 * a key that does not match the certificate), so a bad pair is refused at start-up or on
 * SIGHUP, not at a client's first handshake.
 */
export function loadTlsFiles(certPath: string, keyPath: string): TlsFiles {
  const cert = readPem(certPath, 'certificate');
  const key = readPem(keyPath, 'key');
  try {
    createSecureContext({ cert, key });
  } catch (err) {
    const message = (err as Error).message;
    if (
      /key values mismatch|KEY_VALUES_MISMATCH/i.test(message) ||
      (err as { code?: unknown }).code === 'ERR_OSSL_X509_KEY_VALUES_MISMATCH'
    ) {
      throw new TlsConfigError(`the TLS key ${keyPath} does not belong to the certificate ${certPath}`);
    }
    throw new TlsConfigError(`cannot use the TLS certificate ${certPath} with the key ${keyPath}: ${message}`);
  }
  return { cert, key };
}

/** Whether a listen address only accepts connections from this machine. */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h) || /^::ffff:127\./.test(h);
}
