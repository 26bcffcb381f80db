import type { Command } from 'commander';
import { json, line } from '../output.js';
import { withClient } from '../session.js';

/** `kvb mint-token`: a temporary token limited to a prefix and permissions; prints it alone. */
export async function mintToken(options: { prefix: string; permissions: string[]; ttl: number; json?: boolean }, command: Command): Promise<void> {
  await withClient(command, async ({ client, bucket }) => {
    const answer = await client.mintToken(bucket(), { prefix: options.prefix, permissions: options.permissions, ttl: options.ttl });
    if (options.json) await json(answer);
    else await line(answer.access_token);
  });
}
