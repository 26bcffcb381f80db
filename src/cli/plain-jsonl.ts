import { createHash } from 'node:crypto';
import { KvbError } from '../errors.js';
import { endLine, entryLine, headerLine, typedValue } from '../values/export-format.js';
import { type JsonNode, JsonSyntaxError, parseJsonSource } from '../values/json-source.js';
import { checkKey } from '../values/keys.js';
import { parseNumber } from '../values/numbers.js';
import type { StoredValue } from '../values/stored-value.js';
import { isValueType } from '../values/value-type.js';
import { UsageError } from './session.js';

/*
 * `kvb import --format jsonl`: plain JSONL, one `{"key","value"}` or `{"key","type","value"}`
 * object a line (data converted from Redis or etcd), turned into kvb's export format as it streams,
 * so the server checks and applies it all or nothing exactly as it does an export.
 */

/** A value without "type": a string is text, an integer int64 (json beyond int64), a fraction float64, anything else json. */
function untypedValue(node: JsonNode): StoredValue {
  if (node.kind === 'string') return { type: 'text', data: typedValue('text', node) };
  if (node.kind === 'number') {
    const number = parseNumber(node.source);
    if (number) return { type: number.kind, data: Buffer.from(number.kind === 'int64' ? number.value.toString() : node.source) };
  }
  return { type: 'json', data: Buffer.from(node.source, 'utf8') };
}

/** One plain line as an export entry line; a UsageError naming the line when it is not one. */
export function plainLine(text: string, lineNumber: number, now: number): string {
  const fail = (reason: string) =>
    new UsageError(`line ${lineNumber}: ${reason} (each line is {"key":…,"value":…}, optionally with "type", "ttl" or "expires_at")`);
  let root: JsonNode;
  try {
    root = parseJsonSource(text);
  } catch (err) {
    throw err instanceof JsonSyntaxError ? fail(err.message) : err;
  }
  if (root.kind !== 'object') throw fail('not a JSON object');
  const fields = new Map(root.entries);
  const unknown = [...fields.keys()].find((name) => !['key', 'type', 'value', 'ttl', 'expires_at'].includes(name));
  if (unknown !== undefined) throw fail(`unknown field ${JSON.stringify(unknown)}`);
  const keyNode = fields.get('key');
  const valueNode = fields.get('value');
  const typeNode = fields.get('type');
  try {
    const key = checkKey(keyNode?.kind === 'string' ? keyNode.value : undefined);
    if (valueNode === undefined || valueNode.kind === 'null') throw fail('"value" is missing or null');
    let value: StoredValue;
    if (typeNode === undefined) value = untypedValue(valueNode);
    else {
      if (typeNode.kind !== 'string' || !isValueType(typeNode.value)) throw fail('"type" must be text, json, int64, float64 or bytes');
      // int64 may be a JSON number here (converters write 42), or a decimal string as in an export.
      const node: JsonNode =
        typeNode.value === 'int64' && valueNode.kind === 'number'
          ? { kind: 'string', value: valueNode.source, source: valueNode.source }
          : valueNode;
      value = { type: typeNode.value, data: typedValue(typeNode.value, node) };
    }
    // Neither "ttl" nor "expires_at": left out of the export line, so the bucket's default TTL
    // applies, as for every other write without a TTL. "ttl": 0 and "expires_at": null say never.
    let expiresAt: number | null | undefined;
    const ttl = fields.get('ttl');
    const expires = fields.get('expires_at');
    if (ttl !== undefined && expires !== undefined) throw fail('give "ttl" or "expires_at", not both');
    if (ttl !== undefined) {
      if (ttl.kind !== 'number' || !/^\d+$/.test(ttl.source)) throw fail('"ttl" must be a whole number of seconds');
      expiresAt = Number(ttl.source) === 0 ? null : now + Number(ttl.source) * 1000;
    } else if (expires !== undefined && expires.kind === 'null') {
      expiresAt = null;
    } else if (expires !== undefined) {
      const ms = expires.kind === 'string' ? Date.parse(expires.value) : Number.NaN;
      if (!Number.isFinite(ms)) throw fail('"expires_at" must be an RFC 3339 time or null');
      expiresAt = ms;
    }
    return entryLine(key, value, expiresAt);
  } catch (err) {
    throw err instanceof KvbError ? fail(err.detail) : err;
  }
}

/** The plain lines of `source` as a whole export (header, entries, end line with count and SHA-256). */
export async function* plainToExport(source: AsyncIterable<unknown>, bucket: string, now = Date.now()): AsyncGenerator<Buffer> {
  const hash = createHash('sha256');
  let count = 0;
  const out = (text: string) => {
    hash.update(text);
    return Buffer.from(text);
  };
  yield out(headerLine(bucket, now));
  let pending = '';
  let lineNumber = 0;
  const convert = (text: string): Buffer | undefined => {
    lineNumber++;
    if (text.trim() === '') return undefined;
    count++;
    return out(plainLine(text.replace(/\r$/, ''), lineNumber, now));
  };
  for await (const chunk of source) {
    const lines = (pending + (chunk as Buffer).toString('utf8')).split('\n');
    pending = lines.pop()!;
    for (const text of lines) {
      const converted = convert(text);
      if (converted) yield converted;
    }
  }
  const last = convert(pending);
  if (last) yield last;
  yield Buffer.from(endLine(count, hash.digest('hex')));
}
