import { readFile } from 'node:fs/promises';
import { type Command, Option } from 'commander';
import { stdinIsTty } from '../output.js';
import { UsageError, integerOption, readStdin, withClient } from '../session.js';

const TYPES = ['json', 'text', 'int', 'float', 'bytes'] as const;
type SetType = (typeof TYPES)[number];

const CONTENT_TYPES: Partial<Record<SetType, string>> = {
  json: 'application/json',
  text: 'text/plain; charset=utf-8',
  bytes: 'application/octet-stream',
};

interface SetOptions {
  ttl?: number;
  type?: SetType;
  file?: string;
}

/** The value's bytes: from the argument, --file, or stdin (`-`, or no VALUE with stdin piped). */
async function valueBytes(value: string | undefined, options: SetOptions): Promise<Buffer> {
  if (options.file !== undefined) {
    if (value !== undefined) throw new UsageError('give the value as an argument or with --file, not both');
    try {
      return await readFile(options.file);
    } catch (err) {
      throw new UsageError(`cannot read ${options.file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  }
  if (value === '-' || (value === undefined && !stdinIsTty())) return readStdin();
  if (value === undefined) throw new UsageError('no value: give VALUE, --file F, or pipe it on stdin (VALUE -)');
  return Buffer.from(value, 'utf8');
}

/** The body and Content-Type that make the server store `type`; numbers are checked and sent in its grammar. */
export async function typedBody(data: Buffer, type: SetType | undefined): Promise<{ body: Buffer; contentType?: string }> {
  if (type === undefined) return { body: data };
  if (type === 'int' || type === 'float') {
    const { parseNumber, formatFloat } = await import('../../values/numbers.js');
    const text = data.toString('utf8').trim();
    const number = parseNumber(text);
    if (type === 'int') {
      if (number?.kind !== 'int64') throw new UsageError(`${JSON.stringify(text)} is not a 64-bit integer`);
      return { body: Buffer.from(number.value.toString()) };
    }
    // A float may be written as an integer (3 -> 3.0), even one beyond Int64.
    const asFloat = /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$/.test(text) ? Number(text) : Number.NaN;
    if (!Number.isFinite(asFloat)) throw new UsageError(`${JSON.stringify(text)} is not a finite number`);
    return { body: Buffer.from(formatFloat(asFloat)) };
  }
  return { body: data, contentType: CONTENT_TYPES[type] };
}

/** `kvb set KEY [VALUE]`. */
export function registerSet(program: Command): void {
  program
    .command('set')
    .description('set a key to a value (from the argument, --file, or stdin)')
    .argument('<key>', 'the key (1 to 128 bytes)')
    .argument('[value]', "the value; '-' or absent with stdin piped reads stdin (binary-safe)")
    .addOption(new Option('--ttl <seconds>', 'expire after this many seconds (0 = never; default: the bucket default)').argParser(integerOption('--ttl', 0, 2147483647)))
    .addOption(new Option('--type <type>', 'store as this type (default: the server infers it)').choices(TYPES))
    .option('--file <path>', 'read the value from a file')
    .addHelpText(
      'after',
      `
Without --type the server infers the type as it does for curl: a number is
int64 or float64, other valid JSON is json, anything else is bytes. --type json,
text and bytes send the matching Content-Type; --type int and float check the
value and send it in the server's number grammar (3 with --type float is 3.0).

Examples:
  kvb set greeting hello --type text
  kvb set config '{"a":1}' --ttl 3600
  kvb set ratio 3 --type float
  kvb set photo --file photo.jpg --type bytes
  tar c dir | kvb set backup -`,
    )
    .action(async (key: string, value: string | undefined, options: SetOptions, command: Command) => {
      await withClient(command, async ({ client, bucket }) => {
        const id = bucket();
        const { body, contentType } = await typedBody(await valueBytes(value, options), options.type);
        await client.set(id, key, body, { contentType, ttl: options.ttl });
      });
    });
}
