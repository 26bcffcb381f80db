import { defineCommand, examples, keyArgument } from '../define-command.js';
import { line } from '../output.js';
import { withClient } from '../session.js';

/** `kvb ttl KEY`: the seconds left before the key expires, or `none`. */
export const ttl = defineCommand({
  define: (parent) =>
    parent
      .command('ttl')
      .description('print the seconds left before a key expires, or "none" when it never expires')
      .addArgument(keyArgument('the key'))
      .option('--json', 'print {"key","ttl","expires_at"} (ttl null when it never expires)')
      .addHelpText(
        'after',
        `
Seconds are rounded up, so a live key never shows 0. Exits 2 when the key does
not exist (or has expired). Change the expiry with kvb expire KEY SECONDS.
${examples('kvb ttl session/42', 'kvb ttl session/42 --json | jq .expires_at')}`,
      ),
  async run(key, options, command) {
    await withClient(command, async ({ client, bucket }) => {
      const read = await client.get(bucket(), key);
      const expiresAt = read.expiresAt ?? null;
      const left = expiresAt === null ? null : Math.max(1, Math.ceil((Date.parse(expiresAt) - Date.now()) / 1000));
      if (options.json)
        await line(`{"key":${JSON.stringify(key)},"ttl":${left === null ? 'null' : left},"expires_at":${JSON.stringify(expiresAt)}}`);
      else await line(left === null ? 'none' : String(left));
    });
  },
});
