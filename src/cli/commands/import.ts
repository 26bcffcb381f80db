import { Option } from '@commander-js/extra-typings';
import { defineCommand, examples } from '../define-command.js';
import { counted, countingLines, data, info, progress } from '../output.js';
import { UsageError, withClient } from '../session.js';

const FILE_ERRORS: Record<string, string> = { ENOENT: 'no such file', EACCES: 'permission denied', EISDIR: 'is a directory' };

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
      .addOption(
        new Option('--format <format>', 'export: a kvb export file; jsonl: plain {"key","value"} or {"key","type","value"} lines')
          .choices(['export', 'jsonl'] as const)
          .default('export' as const),
      )
      .addHelpText(
        'after',
        `
The file is checked line by line and against its end line (count and SHA-256);
a file cut short, altered or holding a bad line changes nothing. Keys already
expired are skipped; expiry stays absolute. --mode replace needs delete permission.
The result ("imported N keys, skipped M …", and the one revision the import
committed as) is printed on stderr.
--format jsonl reads plain JSONL instead, one object a line: {"key","value"}
(a string is text, an integer int64, a fraction float64, anything else json)
or {"key","type","value"} (int64 a number or decimal string, bytes base64),
with optional "ttl" (seconds) or "expires_at"; all of it or nothing, as above.
${examples('kvb import backup.ndjson', 'kvb import --format jsonl from-redis.jsonl', 'kvb import users.ndjson --mode replace --prefix user/', 'kvb export --bucket "$OLD" | kvb import --bucket "$NEW" -')}`,
      ),
  async run(file, options, command) {
    const { createReadStream } = await import('node:fs');
    const { access } = await import('node:fs/promises');
    if (file !== '-') {
      const { constants } = await import('node:fs');
      await access(file, constants.R_OK).catch((err: NodeJS.ErrnoException) => {
        throw new UsageError(`cannot read ${file}: ${FILE_ERRORS[err.code ?? ''] ?? err.code ?? err.message}`);
      });
    }
    await withClient(command, async ({ client, bucket }) => {
      const id = bucket();
      const source = file === '-' ? process.stdin : createReadStream(file);
      const { Readable } = await import('node:stream');
      const shown = progress('sent');
      // A bad plain line stops the upload (the server, missing the end line, applies nothing);
      // its reason is what kvb reports, not the aborted request.
      let invalid: unknown;
      async function* body(): AsyncGenerator<Buffer> {
        if (options.format === 'export') return yield* countingLines(source, shown, 1);
        const { plainToExport } = await import('../plain-jsonl.js');
        try {
          yield* countingLines(plainToExport(source, id), shown, 2);
        } catch (err) {
          invalid = err;
          throw err;
        }
      }
      try {
        const result = await client
          .importBucket(id, Readable.from(body()), { mode: options.mode, prefix: options.prefix })
          .catch((err: unknown) => {
            throw invalid ?? err;
          });
        shown.done();
        info(`imported ${counted(result.imported, 'key')}, skipped ${result.skipped} already expired (revision ${result.rev})`);
        // Each webhook the file carried comes with a new signing secret: "ID SECRET" on stdout, shown only now.
        for (const w of result.webhooks ?? []) {
          info(`added webhook ${w.id} (${w.state}) for ${w.url}: its new signing secret, on stdout, is shown only now`);
          await data(`${w.id} ${w.secret}\n`);
        }
      } finally {
        shown.done();
      }
    });
  },
});
