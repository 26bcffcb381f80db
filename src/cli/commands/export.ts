import { defineCommand, examples } from '../define-command.js';
import { countingLines, data, progress } from '../output.js';
import { UsageError, withClient } from '../session.js';

/** `kvb export [PREFIX] [-o FILE]`: the bucket (or a prefix) as the NDJSON export format, streamed. */
export const exportCommand = defineCommand({
  define: (parent) =>
    parent
      .command('export')
      .description('export every key with its type, value and expiry (NDJSON, from one consistent snapshot)')
      .argument('[prefix]', 'only keys starting with this')
      .option('-o, --output <file>', 'write to this file (created 0600) instead of stdout')
      .addHelpText(
        'after',
        `
The first line is a header, then one line per key, then an end line with the
count and SHA-256 of everything before it; kvb import refuses a file that is cut
short or altered. A progress line is shown on stderr at a terminal.
${examples('kvb export > backup.ndjson', 'kvb export user/ -o users.ndjson', 'kvb export --bucket "$OLD" | kvb import --bucket "$NEW" -')}`,
      ),
  async run(prefix, options, command) {
    await withClient(command, async ({ client, bucket }) => {
      const body = await client.exportBucket(bucket(), prefix);
      const { createWriteStream } = await import('node:fs');
      const { rm } = await import('node:fs/promises');
      const { pipeline } = await import('node:stream/promises');
      const { networkErrorFor } = await import('../../client/client-errors.js');
      const shown = progress('exported');
      // The header line is not a key.
      const counted = () => countingLines(body, shown, 1);
      try {
        if (options.output === undefined) {
          for await (const chunk of counted()) await data(chunk);
          return;
        }
        const file = createWriteStream(options.output, { mode: 0o600, flags: 'w' });
        try {
          await pipeline(counted(), file);
        } catch (err) {
          // A partial file is worse than none: it would be refused by import anyway.
          await rm(options.output, { force: true });
          if ((err as NodeJS.ErrnoException).syscall !== undefined && (err as NodeJS.ErrnoException).path === options.output) {
            throw new UsageError(`cannot write ${options.output}: ${(err as Error).message}`);
          }
          throw networkErrorFor(client.url, err);
        }
      } finally {
        shown.done();
      }
    });
  },
});
