import { fstatSync, readFileSync } from 'node:fs';
import type { KvbHttp } from '../client/kvb-http.js';
import { type Connection, resolveConnection } from './config.js';
import type { GlobalOptions, RunningCommand } from './define-command.js';
import { cliFetch } from './http-fetch.js';
import { setQuiet } from './output.js';
import { UsageError } from './usage-error.js';

// UsageError has its own module so define-command.ts can use it without importing this one.
export { UsageError };

const SOURCE_NAMES = { flag: '--url', env: 'KVB_URL', profile: 'the profile', default: 'the default' } as const;

/** The global flags as given to any (sub)command, with --quiet applied. */
export function globalFlags(command: RunningCommand): GlobalOptions {
  const flags = command.optsWithGlobals();
  setQuiet(flags.quiet === true);
  return flags;
}

export interface Session {
  /** The shared client (src/client), over the CLI's own fetch (http-fetch.ts); it never retries on its own. */
  client: KvbHttp;
  connection: Connection;
  /** The bucket to act on; a usage error when none is configured. */
  bucket(): string;
}

interface OpenedClient {
  client: KvbHttp;
  close(): Promise<void>;
}

/**
 * The shared client (KvbHttp, src/client/kvb-http.ts, the one class that knows the HTTP API) over the
 * CLI's own fetch (http-fetch.ts), which enforces the timeout (connect, headers, idle body), so the
 * CLI never retries on its own.
 */
export async function openClient(url: string, token: string | undefined, timeoutMs: number, caFile?: string): Promise<OpenedClient> {
  const { KvbHttp } = await import('../client/kvb-http.js');
  const ca = readCa(caFileOf(caFile));
  const transport = await cliFetch(new URL(url).origin, timeoutMs, ca);
  return { client: new KvbHttp({ url, token, fetch: transport.fetch, timeoutMs: 0, retries: 0 }), close: transport.close };
}

/** The CA file in use: --ca, else KVB_CA. */
const caFileOf = (flag: string | undefined) => flag || process.env.KVB_CA || undefined;

/** The `--ca` / KVB_CA file, read once; unreadable, or holding no certificate (a key file), is a usage error naming it. */
function readCa(file: string | undefined): Buffer | undefined {
  if (file === undefined) return undefined;
  let pem: Buffer;
  try {
    pem = readFileSync(file);
  } catch (err) {
    throw new UsageError(
      `cannot read the CA file ${file} (--ca or KVB_CA): ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
  if (!pem.includes('-----BEGIN CERTIFICATE-----')) {
    const what = pem.includes('PRIVATE KEY-----') ? 'a private key, not a certificate' : 'no PEM certificate (-----BEGIN CERTIFICATE-----)';
    throw new UsageError(`the CA file ${file} (--ca or KVB_CA) holds ${what}: give the certificate of the CA that signed the server's`);
  }
  return pem;
}

/** Resolves the connection, opens a client, runs `fn`, and always closes the client. */
export async function withClient<T>(
  command: RunningCommand,
  fn: (session: Session) => Promise<T>,
  options: { allowMissingProfile?: boolean; explicitTokenOnly?: boolean } = {},
): Promise<T> {
  const connection = resolveConnection(globalFlags(command), process.env, options);
  if (options.explicitTokenOnly && connection.sources.token === 'profile') connection.token = undefined;
  const timeoutSeconds = requestTimeout(globalFlags(command).timeout, process.env.KVB_TIMEOUT);
  const { KvbHttpError, KvbNetworkError, isTlsTrustFailure } = await import('../client/client-errors.js');
  let opened: OpenedClient;
  try {
    opened = await openClient(connection.url, connection.token, timeoutSeconds * 1000, globalFlags(command).ca);
  } catch (err) {
    if (err instanceof UsageError) throw err;
    throw new UsageError(`invalid server URL ${JSON.stringify(connection.url)} (from ${SOURCE_NAMES[connection.sources.url]})`);
  }
  const { client, close } = opened;
  if (/\/api\/v1\/?$/.test(new URL(connection.url).pathname)) {
    const base = connection.url.replace(/\/api\/v1\/?$/, '');
    await close();
    throw new UsageError(
      `the server URL is its address without /api/v1: use ${JSON.stringify(base)}, not ${JSON.stringify(connection.url)} (from ${SOURCE_NAMES[connection.sources.url]})`,
    );
  }
  const bucket = () => {
    if (!connection.bucket) {
      throw new UsageError('no bucket given: pass --bucket ID, set KVB_BUCKET, or save a profile (kvb init, kvb create-bucket --save)');
    }
    return connection.bucket;
  };
  try {
    return await fn({ client, connection, bucket });
  } catch (err) {
    // A 404 that is not kvb's answer about a key or bucket (a route kvb does not have, or a server
    // that sent no kvb error at all) means a wrong --url, not a missing key: `kvb get k || echo
    // missing` must not take one for the other, so it is a usage error (exit 1), not exit 2.
    if (err instanceof KvbHttpError && err.kind === 'not_found' && (err.detail === undefined || err.detail === 'no such route')) {
      throw new UsageError(
        `the server at ${connection.url} does not answer as kvb (404${err.detail ? ` ${err.detail}` : ', not a kvb error'}): check the URL from ${SOURCE_NAMES[connection.sources.url]}; it is the server's address, with only the path prefix a proxy adds`,
      );
    }
    if (err instanceof KvbNetworkError) {
      if (/timed out|timeout/.test(err.reason)) err.message += ` after ${timeoutSeconds} s (--timeout or KVB_TIMEOUT allows longer)`;
      const caFile = caFileOf(globalFlags(command).ca);
      if (isTlsTrustFailure(err))
        err.message +=
          caFile === undefined
            ? '; to trust a private CA or a self-signed server, pass its certificate with --ca FILE or KVB_CA'
            : `; the CA file ${caFile} (--ca or KVB_CA) does not verify it: give the certificate of the CA that signed the server's (its own, if self-signed)`;
      // A TLS server closes a plain-HTTP request without an answer: the one hint the error cannot give.
      if (connection.url.startsWith('http://') && /connection (closed|reset)/.test(err.reason))
        err.message += '; if the server serves TLS (--tls-cert), use an https:// URL';
      err.message += `; the URL came from ${SOURCE_NAMES[connection.sources.url]}: point elsewhere with --url, KVB_URL or a profile`;
    }
    throw err;
  } finally {
    await close();
  }
}

/** Seconds a request may take: --timeout, else KVB_TIMEOUT, else 30. */
export function requestTimeout(flag: number | undefined, env: string | undefined): number {
  if (flag !== undefined) return flag;
  if (env === undefined || env === '') return 30;
  const seconds = Number(env);
  if (!/^\d+(\.\d+)?$/.test(env) || !(seconds > 0) || seconds > 86400) {
    throw new UsageError(`KVB_TIMEOUT must be a number of seconds above 0, at most 86400, not ${JSON.stringify(env)}`);
  }
  return seconds;
}

/**
 * Whether stdin carries data for us: a pipe, a socket or a redirected file. Not a terminal, and
 * not /dev/null (cron, `< /dev/null`), where an absent VALUE is a mistake rather than empty input.
 */
export function stdinIsPiped(): boolean {
  try {
    const stat = fstatSync(0);
    return stat.isFIFO() || stat.isFile() || stat.isSocket();
  } catch {
    return false;
  }
}

/** Bytes the shared client read, as a Buffer (no copy). */
export const asBuffer = (bytes: Uint8Array): Buffer => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);

/** Reads all of stdin as bytes (binary-safe). */
export async function readStdin(): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}
