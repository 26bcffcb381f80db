import { readFile } from 'node:fs/promises';
import { Option } from '@commander-js/extra-typings';
import { isValidJson } from '../../values/infer-value.js';
import { parseNumber } from '../../values/numbers.js';
import { CONTENT_TYPES } from '../../values/value-type.js';
import { MAX_TTL, defineCommand, examples, integer, keyArgument, withConditionOptions, writeCondition } from '../define-command.js';
import { UsageError, readStdin, stdinIsPiped, withClient } from '../session.js';

const TYPES = ['json', 'text', 'int', 'float', 'bytes'] as const;
type SetType = (typeof TYPES)[number];

/** --type json, text and bytes travel as the Content-Type the server reads them back with. */
const SENT_AS: Partial<Record<SetType, string>> = { json: CONTENT_TYPES.json, text: CONTENT_TYPES.text, bytes: CONTENT_TYPES.bytes };

interface SetOptions {
  ttl?: number;
  type?: SetType;
  file?: string;
}

/**
 * The value's bytes: from the argument, --file, or stdin (`-`, or no VALUE with stdin piped), and
 * whether it came from the argument (text typed in a shell, typed by `argumentType`).
 */
async function valueBytes(value: string | undefined, options: SetOptions): Promise<{ data: Buffer; fromArgument: boolean }> {
  if (options.file !== undefined) {
    if (value !== undefined) throw new UsageError('give the value as an argument or with --file, not both');
    try {
      return { data: await readFile(options.file), fromArgument: false };
    } catch (err) {
      throw new UsageError(`cannot read ${options.file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  }
  if (value === '-' || (value === undefined && stdinIsPiped())) return { data: await readStdin(), fromArgument: false };
  if (value === undefined) throw new UsageError('no value: give VALUE, --file F, or pipe it on stdin');
  return { data: Buffer.from(value, 'utf8'), fromArgument: true };
}

/**
 * The type of a value given as an argument: a shell argument is text, so the server's fallback to
 * bytes never applies. A number (the strict grammar) is int or float, a JSON object or array is
 * json, anything else (including `true`, `null` and `"quoted"`) is text.
 */
export function argumentType(value: string): SetType {
  const number = parseNumber(value);
  if (number) return number.kind === 'int64' ? 'int' : 'float';
  if (/^\s*[[{]/.test(value) && isValidJson(value)) return 'json';
  return 'text';
}

/** The body and Content-Type that make the server store `type`; numbers are checked and sent in its grammar. */
export async function typedBody(data: Buffer, type: SetType | undefined): Promise<{ body: Buffer; contentType?: string }> {
  if (type === undefined) return { body: data };
  if (type === 'int' || type === 'float') {
    const { formatFloat, toFloat } = await import('../../values/numbers.js');
    const text = data.toString('utf8').trim();
    const number = parseNumber(text);
    if (type === 'int') {
      if (number?.kind !== 'int64') throw new UsageError(`${JSON.stringify(text)} is not a 64-bit integer`);
      return { body: Buffer.from(number.value.toString()) };
    }
    // A float may be written as an integer (3 -> 3.0), even one beyond Int64 (then `N.0` parses as a float).
    const asFloat = number ?? (/^-?\d+$/.test(text) ? parseNumber(`${text}.0`) : undefined);
    if (asFloat === undefined) throw new UsageError(`${JSON.stringify(text)} is not a finite number`);
    return { body: Buffer.from(formatFloat(toFloat(asFloat))) };
  }
  return { body: data, contentType: SENT_AS[type] };
}

/** `kvb set KEY [VALUE]`. */
export const set = defineCommand({
  define: (parent) =>
    withConditionOptions(
    parent
      .command('set')
      .description('set a key to a value (from the argument, --file, or stdin)')
      .addArgument(keyArgument('the key (1 to 128 bytes)'))
      .argument('[value]', "the value; '-', or none with stdin piped, reads stdin (binary-safe)")
      .addOption(
        new Option('--ttl <seconds>', 'expire after this many seconds (0 = never; default: the bucket default)').argParser(integer('--ttl', 0, MAX_TTL)),
      )
      .addOption(new Option('--type <type>', 'store as this type (default: inferred, see below)').choices(TYPES))
      .option('--file <path>', 'read the value from a file'),
  )
      .addHelpText(
        'after',
        `
A VALUE given as an argument is typed by kvb: a number is int64 or float64, a
JSON object or array is json, anything else is text. A value from stdin or
--file is typed by the server as it is for curl: a number is int64 or float64,
other valid JSON is json, other bytes are bytes. --type always wins: json, text
and bytes send the matching Content-Type; int and float check the value and
send it in the server's number grammar (3 with --type float is 3.0).
${examples(
  'kvb set greeting hello                   # text',
  'kvb set visits 41                        # int64',
  `kvb set config '{"a":1}' --ttl 3600`,
  'kvb set ratio 3 --type float',
  'kvb set photo --file photo.jpg --type bytes',
  'tar c dir | kvb set backup -',
  'kvb set lock/leader me --if-absent       # exit 6 if someone holds it',
  'kvb set config v2 --if-rev 41            # exit 6 if it changed since revision 41',
)}`,
      ),
  async run(key, value, options, command) {
    await withClient(command, async ({ client, bucket }) => {
      const id = bucket();
      const { data, fromArgument } = await valueBytes(value, options);
      const type = options.type ?? (fromArgument ? argumentType(data.toString('utf8')) : undefined);
      const { body, contentType } = await typedBody(data, type);
      await client.set(id, key, body, { contentType, ttl: options.ttl, condition: writeCondition(options) });
    });
  },
});
