import { isUtf8 } from 'node:buffer';
import { Argument, Option } from '@commander-js/extra-typings';
import { defineCommand, examples, integer, withOptionHints } from '../define-command.js';
import { data, line, stdoutIsTty } from '../output.js';
import { UsageError, asBuffer, withClient } from '../session.js';
import { MAX_TXN_OPS } from '../../limits.js';

/** `kvb get KEY`: the value's exact bytes, or `--json` for `{key, type, value, expires_at}`; `kvb get A B …`: several keys at one revision. */
export const get = defineCommand({
  define: (parent) =>
    withOptionHints(
      parent
        .command('get')
        .description(
          "print a key's value (exact bytes), or with --json its type, expiry and revision too; several keys: read at one revision",
        )
        .addArgument(
          new Argument('<keys...>', 'the key (several: read together, at one bucket revision)').argParser(
            (value: string, previous: string[] | undefined) => {
              if (value === '') throw new UsageError('a key must not be empty');
              return [...(previous ?? []), value];
            },
          ),
        )
        .option('--json', 'print {"key","type","value","expires_at","revision"} (int64 as a decimal string, bytes as base64)')
        .addOption(new Option('-o, --output <file>', 'write the exact bytes to FILE instead of stdout').conflicts('json'))
        .addOption(
          new Option('--rev <n>', "the value the key had at revision N (history; exits 7 below the bucket's history floor)").argParser(
            integer('--rev', 0, Number.MAX_SAFE_INTEGER),
          ),
        )
        .addHelpText(
          'after',
          `
Exits 2 when the key does not exist (or has expired), so scripts can write
  kvb get k || echo missing
Binary data (type bytes) is not printed to a terminal, as with curl: redirect
stdout or use -o FILE. Text at a terminal is followed by a newline.

With several keys, they are read in one request at one bucket revision and
printed as JSONL, one {"key","type","value","expires_at","revision"} per key in
the order given (type and value null for a key that does not exist; exits 2
then, after printing all); with --json, one {"revision","entries":[…]} object.
int64 values are decimal strings there, bytes base64.
${examples('kvb get greeting', 'kvb get icon -o icon.png', 'kvb get icon > icon.png', 'kvb get config --json | jq .value', 'kvb get from to --json', 'kvb get config --rev 41')}`,
        ),
      {
        '--prefix':
          'kvb get reads keys by name; for every key under a prefix with its value, use kvb ls PREFIX --values (kvb ls user/ --values)',
      },
    ),
  async run(keys, options, command) {
    if (keys.length > 1 && options.rev !== undefined)
      throw new UsageError('--rev reads one key (several keys are read at the present revision)');
    if (keys.length > 1) return getMany(keys, options, command);
    const key = keys[0]!;
    await withClient(command, async ({ client, bucket }) => {
      const read = await client.get(bucket(), key, { revision: options.rev });
      const value = { ...read, data: asBuffer(read.data) };
      if (options.json) {
        const { valueAsJson } = await import('../../values/list-format.js');
        // The listing's own rendering: JSON and floats keep their exact text, bytes become base64,
        // and int64 is a decimal string, as in export and watch (jq 1.6 rounds 2^63-1 as a number).
        // A server that names no type gets its value as a string.
        const rendered =
          value.type === 'int64' || !value.type
            ? JSON.stringify(value.data.toString('utf8'))
            : valueAsJson({ type: value.type, data: value.data });
        await line(
          `{"key":${JSON.stringify(key)},"type":${JSON.stringify(value.type ?? null)},"value":${rendered},"expires_at":${JSON.stringify(value.expiresAt ?? null)},"revision":${value.revision ?? null}}`,
        );
        return;
      }
      if (options.output !== undefined) {
        try {
          const { writeFile } = await import('node:fs/promises');
          await writeFile(options.output, value.data);
        } catch (err) {
          throw new UsageError(`cannot write ${options.output}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
        }
        return;
      }
      const binary = value.type === 'bytes' || (value.type === undefined && !isUtf8(value.data));
      if (binary && stdoutIsTty()) {
        throw new UsageError(
          `${JSON.stringify(key)} holds ${value.data.length} bytes of binary data, not printed to a terminal: use -o FILE, or redirect stdout to a file`,
        );
      }
      await data(value.data);
      // People at a terminal get their prompt back on its own line; pipes get the exact bytes.
      if (stdoutIsTty() && value.type !== 'bytes' && !value.data.toString('utf8').endsWith('\n')) await data('\n');
    });
  },
});

/** Several keys read at one revision, printed as JSONL (or one JSON object with --json); exit 2 when any is absent. */
async function getMany(
  keys: string[],
  options: { json?: true; output?: string },
  command: Parameters<typeof withClient>[0],
): Promise<void> {
  if (options.output !== undefined) throw new UsageError('-o FILE takes one key');
  if (keys.length > MAX_TXN_OPS) throw new UsageError(`at most ${MAX_TXN_OPS} keys at once`);
  const { MissingKeysError, getManyRows } = await import('../get-many.js');
  await withClient(command, async ({ client, bucket }) => {
    const { revision, rows, missing } = await getManyRows(client, bucket(), keys);
    await line(options.json ? `{"revision":${revision},"entries":[${rows.join(',')}]}` : rows.join('\n'));
    if (missing.length > 0) throw new MissingKeysError(missing);
  });
}
