import { Option } from '@commander-js/extra-typings';
import { defineCommand, examples } from '../define-command.js';
import { countingLines, info, progress } from '../output.js';
import { UsageError, withClient } from '../session.js';

/** `kvb import FILE|-`: sends an export to the bucket, streamed; the server applies all of it or nothing. */
export const importCommand = defineCommand({
  define: (parent) =>
    parent
      .command('import')
      .description('import an export file into the bucket (all or nothing)')
      .argument('<file>', 'the export file, or - for stdin')
      .addOption(
        new Option('--mode <mode>', 'merge: set every key in the file; replace: also delete keys the file does not hold')
          .choices(['merge', 'replace'] as const)
          .default('merge' as const),
      )
      .option('--prefix <prefix>', 'with --mode replace, replace only keys under this prefix')
      .addHelpText(
        'after',
        `
The file is checked line by line and against its end line (count and SHA-256);
a file cut short, altered or holding a bad line changes nothing. Keys already
expired are skipped; expiry stays absolute. --mode replace needs delete permission.
The result ("imported N keys, skipped M …", and the one revision the import
committed as) is printed on stderr.
${examples('kvb import backup.ndjson', 'kvb import users.ndjson --mode replace --prefix user/', 'kvb export --bucket "$OLD" | kvb import --bucket "$NEW" -')}`,
      ),
  async run(file, options, command) {
    const { createReadStream } = await import('node:fs');
    const { access } = await import('node:fs/promises');
    if (file !== '-') {
      await access(file).catch(() => {
        throw new UsageError(`cannot read ${file}`);
      });
    }
    await withClient(command, async ({ client, bucket }) => {
      const source = file === '-' ? process.stdin : createReadStream(file);
      const { Readable } = await import('node:stream');
      const shown = progress('sent');
      const counted = () => countingLines(source, shown, 1);
      try {
        const result = await client.importBucket(bucket(), Readable.from(counted()), { mode: options.mode, prefix: options.prefix });
        shown.done();
        info(`imported ${result.imported} keys, skipped ${result.skipped} already expired (revision ${result.rev})`);
      } finally {
        shown.done();
      }
    });
  },
});
