import { fstatSync } from 'node:fs';
import type { Command } from 'commander';
import type { KvbClient } from '../client/kvb-client.js';
import { type Connection, type GlobalFlags, resolveConnection } from './config.js';
import { setQuiet } from './output.js';

/** A mistake in how the CLI was called, or in its input: exit code 1. */
export class UsageError extends Error {
  readonly exitCode = 1;
}

const SOURCE_NAMES = { flag: '--url', env: 'KVB_URL', profile: 'the profile', default: 'the default' } as const;

/** The global flags as given to any (sub)command, with --quiet applied. */
export function globalFlags(command: Command): GlobalFlags & { quiet?: boolean } {
  const flags = command.optsWithGlobals<GlobalFlags & { quiet?: boolean }>();
  setQuiet(flags.quiet === true);
  return flags;
}

export interface Session {
  client: KvbClient;
  connection: Connection;
  /** The bucket to act on; a usage error when none is configured. */
  bucket(): string;
}

/** Resolves the connection, opens a client, runs `fn`, and always closes the client. */
export async function withClient<T>(
  command: Command,
  fn: (session: Session) => Promise<T>,
  options: { allowMissingProfile?: boolean; explicitTokenOnly?: boolean } = {},
): Promise<T> {
  const connection = resolveConnection(globalFlags(command), process.env, options);
  if (options.explicitTokenOnly && connection.sources.token === 'profile') connection.token = undefined;
  const { KvbClient } = await import('../client/kvb-client.js');
  const { KvbNetworkError } = await import('../client/client-errors.js');
  let client: KvbClient;
  try {
    client = new KvbClient({ url: connection.url, token: connection.token });
  } catch {
    throw new UsageError(`invalid server URL ${JSON.stringify(connection.url)} (from ${SOURCE_NAMES[connection.sources.url]})`);
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
    if (err instanceof KvbNetworkError) {
      err.message += `; the URL came from ${SOURCE_NAMES[connection.sources.url]}: point elsewhere with --url, KVB_URL or a profile`;
    }
    throw err;
  } finally {
    await client.close();
  }
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

/** Reads all of stdin as bytes (binary-safe). */
export async function readStdin(): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}
