import { Option } from '@commander-js/extra-typings';
import { type CliValueType, typeOfStream, typeOfText } from '../../values/cli-value.js';
import { valueTooLarge } from '../../values/keys.js';
import type { KvbHttp } from '../../client/kvb-http.js';
import { parseNumber } from '../../values/numbers.js';
import { CONTENT_TYPES } from '../../values/value-type.js';
import { defineCommand, examples, integer, keyArgument, withConditionOptions, writeCondition } from '../define-command.js';
import { UsageError, readStdin, stdinIsPiped, withClient } from '../session.js';
import { MAX_TTL_SECONDS, MAX_VALUE_BYTES } from '../../limits.js';

const TYPES = ['json', 'text', 'int', 'float', 'bytes'] as const;
type SetType = (typeof TYPES)[number];

/** --type json, text and bytes travel as the Content-Type the server reads them back with. */
const SENT_AS: Partial<Record<SetType, string>> = { json: CONTENT_TYPES.json, text: CONTENT_TYPES.text, bytes: CONTENT_TYPES.bytes };

interface SetOptions {
  ttl?: number;
  type?: SetType;
  file?: string;
  raw?: true;
}

/**
 * The value's bytes: from the argument, --file, or stdin (`-`, or no VALUE with stdin piped), and
 * whether it came from the argument (text typed in a shell, typed by `argumentType`).
 */
async function valueBytes(value: string | undefined, options: SetOptions): Promise<{ data: Buffer; fromArgument: boolean }> {
  if (options.file !== undefined) {
    if (value !== undefined) throw new UsageError('give the value as an argument or with --file, not both');
    try {
      const { readFile } = await import('node:fs/promises');
      return { data: await readFile(options.file), fromArgument: false };
    } catch (err) {
      throw new UsageError(`cannot read ${options.file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  }
  if (value === '-' || (value === undefined && stdinIsPiped())) return { data: await readStdin(), fromArgument: false };
  if (value === undefined) throw new UsageError('no value: give VALUE, --file F, or pipe it on stdin');
  return { data: Buffer.from(value, 'utf8'), fromArgument: true };
}

/** The --type a value would get from the one typing rule (src/values/cli-value.ts) for text typed as an argument. */
export function argumentType(value: string): SetType {
  return TYPE_FLAG[typeOfText(value)];
}

const TYPE_FLAG: Record<CliValueType, SetType> = { json: 'json', text: 'text', int64: 'int', float64: 'float', bytes: 'bytes' };

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

/**
 * Refuses, before sending, a value larger than the server stores. Only a value past the spec's
 * 16 KiB costs a request: the server's /health says whether its operator raised the limit.
 */
export async function checkValueSize(client: KvbHttp, size: number): Promise<void> {
  if (size <= MAX_VALUE_BYTES) return;
  const limit = (await client.health().catch(() => undefined))?.max_value_bytes ?? MAX_VALUE_BYTES;
  if (size > limit) throw new UsageError(valueTooLarge(size, limit));
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
          new Option('--ttl <seconds>', 'expire after this many seconds (0 = never; default: the bucket default)').argParser(
            integer('--ttl', 0, MAX_TTL_SECONDS),
          ),
        )
        .addOption(new Option('--type <type>', 'store as this type (default: inferred, see below)').choices(TYPES))
        .option('--file <path>', 'read the value from a file')
        .option('--raw', "send stdin's or the file's bytes untouched (no newline dropped) and let the server type them, as curl does"),
    ).addHelpText(
      'after',
      `
How kvb types a value (the same rule for an argument, stdin, --file and
kvb txn --set):
  - stdin or --file: bytes that are not UTF-8 or hold a NUL byte are bytes,
    exactly; otherwise the one trailing newline echo adds is dropped (as
    kvb edit does) and the text is typed as below
  - a number is int64 (an integer within int64) or float64 (with a fraction
    or exponent); an integer beyond int64 is json, as the server types it
  - a JSON object or array is json
  - anything else is text, including true, null and "quoted"
--type always wins: json, text and bytes send the matching Content-Type; int
and float check the value and send it in the server's number grammar (3 with
--type float is 3.0). --raw sends stdin's or the file's bytes untouched and
lets the server type them, as curl does. A value is at most the server's
--max-value-bytes (16 KiB unless its operator raised it); kvb checks before
sending.
${examples(
  'kvb set greeting hello                   # text',
  'kvb set visits 41                        # int64',
  `kvb set config '{"a":1}' --ttl 3600`,
  'kvb set ratio 3 --type float',
  'kvb set icon --file icon.png --type bytes    # a value is at most 16 KiB',
  'echo hello | kvb set greeting -          # text "hello"',
  'gzip -c notes.txt | kvb set notes.gz -   # bytes (at most 16 KiB)',
  'kvb set lock/leader me --if-absent       # exit 6 if someone holds it',
  'kvb set config v2 --if-rev 41            # exit 6 if it changed since revision 41',
)}`,
    ),
  async run(key, value, options, command) {
    await withClient(command, async ({ client, bucket }) => {
      const id = bucket();
      const { data, fromArgument } = await valueBytes(value, options);
      let typed: { data: Buffer; type: SetType | undefined };
      if (fromArgument) typed = { data, type: argumentType(data.toString('utf8')) };
      else if (options.raw) typed = { data, type: undefined };
      else {
        const fromStream = typeOfStream(data);
        typed = { data: fromStream.data, type: TYPE_FLAG[fromStream.type] };
      }
      const { body, contentType } = await typedBody(typed.data, options.type ?? typed.type);
      await checkValueSize(client, body.length);
      await client.set(id, key, body, { contentType, ttl: options.ttl, condition: writeCondition(options) });
    });
  },
});
