import type { Command } from 'commander';
import { saveProfile } from '../config.js';
import { info, line } from '../output.js';
import { withClient } from '../session.js';

interface CreateOptions {
  email: string;
  secretKey?: string;
  readKey?: string;
  writeKey?: string;
  signingKey?: string;
  defaultTtl?: number;
  save?: string | true;
}

/** `kvb create-bucket`: creates a bucket and prints its id alone, for `B=$(kvb create-bucket …)`. */
export async function createBucket(options: CreateOptions, command: Command): Promise<void> {
  await withClient(
    command,
    async ({ client, connection }) => {
      const id = await client.createBucket({
        email: options.email,
        secret_key: options.secretKey,
        read_key: options.readKey,
        write_key: options.writeKey,
        signing_key: options.signingKey,
        default_ttl: options.defaultTtl,
      });
      await line(id);
      if (options.save !== undefined) {
        const name = typeof options.save === 'string' ? options.save : connection.profileName;
        saveProfile(name, { url: connection.url, bucket: id, ...(options.secretKey ? { secret_key: options.secretKey } : {}) });
        info(`saved profile ${JSON.stringify(name)}`);
      }
    },
    // A profile's secret key belongs to another bucket: only an explicit token is a creation key.
    { allowMissingProfile: true, explicitTokenOnly: true },
  );
}
