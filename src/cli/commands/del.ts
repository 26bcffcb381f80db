import type { Command } from 'commander';
import { withClient } from '../session.js';

/** `kvb del KEY`: exit 2 when the key does not exist. */
export async function del(key: string, _options: unknown, command: Command): Promise<void> {
  await withClient(command, async ({ client, bucket }) => {
    await client.del(bucket(), key);
  });
}
