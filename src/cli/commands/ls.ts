import { type Command, Option } from 'commander';
import { pipe, stdoutIsTty, table } from '../output.js';
import { integerOption, withClient } from '../session.js';

interface LsOptions {
  limit?: number;
  skip?: number;
  reverse?: boolean;
  values?: boolean;
  format?: 'table' | 'text' | 'json' | 'jsonl';
}

/** Splits one jsonl line `["key",value]` into the key and the value's exact JSON text. */
function splitPair(lineText: string): [string, string] {
  const [key] = JSON.parse(lineText) as [string];
  const raw = lineText.slice(1 + JSON.stringify(key).length + 1, -1);
  const value = raw.startsWith('"') ? (JSON.parse(raw) as string) : raw;
  return [key, value];
}

/** `kvb ls [PREFIX]`: a table for people, the server's own formats (streamed) for scripts. */
export function registerLs(program: Command): void {
  program
    .command('ls')
    .description('list keys (and values) in byte order')
    .argument('[prefix]', 'only keys starting with this')
    .addOption(new Option('--limit <n>', 'at most this many keys (server default 10000)').argParser(integerOption('--limit', 0, 1_000_000)))
    .addOption(new Option('--skip <n>', 'skip this many keys first').argParser(integerOption('--skip', 0, Number.MAX_SAFE_INTEGER)))
    .option('--reverse', 'reverse byte order')
    .option('--values', 'include the values')
    .addOption(
      new Option('--format <format>', 'table (default on a terminal), text (default when piped), json or jsonl').choices([
        'table',
        'text',
        'json',
        'jsonl',
      ]),
    )
    .addHelpText(
      'after',
      `
text, json and jsonl are the server's own list formats, passed through as they
stream in, so large buckets are never held in memory.

Examples:
  kvb ls user/
  kvb ls --values --limit 20
  kvb ls --format jsonl --values | jq -r '.[0]'
  kvb ls --format json | jq length`,
    )
    .action(async (prefix: string | undefined, options: LsOptions, command: Command) => {
      await withClient(command, async ({ client, bucket }) => {
        const format = options.format ?? (stdoutIsTty() ? 'table' : 'text');
        const query = { prefix, limit: options.limit, skip: options.skip, reverse: options.reverse, values: options.values };
        const id = bucket();
        if (format !== 'table') {
          await pipe(await client.list(id, { ...query, format }));
          return;
        }
        const body = await client.list(id, { ...query, format: 'jsonl' });
        const { createInterface } = await import('node:readline');
        const rows: string[][] = [];
        for await (const lineText of createInterface({ input: body, crlfDelay: Infinity })) {
          if (lineText === '') continue;
          rows.push(options.values ? splitPair(lineText) : [JSON.parse(lineText) as string]);
        }
        await table(options.values ? ['key', 'value'] : ['key'], rows);
      });
    });
}
