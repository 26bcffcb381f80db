import type { ValueType } from '../values/value-type.js';

// JavaScript values <-> kvb's five value types, both ways, never guessed: the server says the type
// (Kvb-Type, a listing's "type"), and a set sends the Content-Type (or body grammar) of exactly one.

export type { ValueType };

/** Any JSON value. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/**
 * A stored value as JavaScript holds it: text as `string`, int64 as `bigint` (exact over 2^53),
 * float64 as `number`, bytes as `Uint8Array`, json as its parsed value.
 */
export type Value = string | bigint | number | Uint8Array | JsonValue;

/**
 * T itself when it is a JSON document field by field, and `never` where a field is not (a function,
 * a Date, a bigint inside a document): the check behind `get<T>` and `set`. It maps the declared type
 * rather than asking for `{ [key: string]: JsonValue }`, because an interface has no index signature
 * and would be refused although every field is JSON. An optional field may be absent.
 */
export type JsonShaped<T> = T extends JsonValue
  ? T
  : T extends (...args: never[]) => unknown
    ? never
    : T extends object
      ? { [K in keyof T]: JsonShaped<T[K]> }
      : never;

/** A value `get<V>`, `set` and `update` accept: one of the five types, or a declared JSON document (interfaces included). */
export type Storable<V> = Value | { [K in keyof V]: JsonShaped<V[K]> };

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: false });
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/**
 * A value's type when none is given: string → text, bigint → int64, a number → int64 when it is a
 * safe integer and float64 otherwise (the rule the CLI and the server's inference follow for `90`
 * and `1.5`), bytes → bytes, anything else → json.
 */
export function typeOfValue(value: unknown): ValueType {
  if (typeof value === 'string') return 'text';
  if (typeof value === 'bigint') return 'int64';
  if (typeof value === 'number') return numberType(value);
  if (value instanceof Uint8Array || value instanceof ArrayBuffer) return 'bytes';
  return 'json';
}

/**
 * int64 for a safe integer, float64 for anything else: `-0` and integers past 2^53 are float64, as
 * they cannot be written as an int64 without changing the value.
 */
export function numberType(n: number): 'int64' | 'float64' {
  return Number.isSafeInteger(n) && !Object.is(n, -0) ? 'int64' : 'float64';
}

/** A float64 as the server's number grammar writes it: always with a fraction or exponent, so it is never read as int64. */
export function float64Text(n: number): string {
  if (!Number.isFinite(n)) throw new RangeError(`a float64 must be finite, not ${n}`);
  const text = Object.is(n, -0) ? '-0' : String(n);
  return /[.eE]/.test(text) ? text : `${text}.0`;
}

function int64Text(value: unknown): string {
  let n: bigint;
  if (typeof value === 'bigint') n = value;
  else if (typeof value === 'number' && Number.isSafeInteger(value)) n = BigInt(value);
  else if (typeof value === 'string' && /^-?(0|[1-9]\d*)$/.test(value)) n = BigInt(value);
  else throw new TypeError(`an int64 is a bigint (or a safe integer), not ${typeof value}`);
  if (n < INT64_MIN || n > INT64_MAX) throw new RangeError(`${n} is outside int64 (-2^63 to 2^63-1)`);
  return n.toString();
}

/**
 * The request body and Content-Type that store `value` as `type`. int64 and float64 go without a
 * Content-Type: the server types a body that matches its number grammar by that grammar.
 */
export function encodeValue(
  value: unknown,
  type: ValueType = typeOfValue(value),
): { body: Uint8Array; contentType: string | undefined; type: ValueType } {
  switch (type) {
    case 'text':
      if (typeof value !== 'string') throw new TypeError(`a text value is a string, not ${typeof value}`);
      return { body: encoder.encode(value), contentType: 'text/plain; charset=utf-8', type };
    case 'int64':
      return { body: encoder.encode(int64Text(value)), contentType: undefined, type };
    case 'float64':
      if (typeof value !== 'number') throw new TypeError(`a float64 value is a number, not ${typeof value}`);
      return { body: encoder.encode(float64Text(value)), contentType: undefined, type };
    case 'bytes':
      if (value instanceof ArrayBuffer) return { body: new Uint8Array(value), contentType: 'application/octet-stream', type };
      if (!(value instanceof Uint8Array)) throw new TypeError('a bytes value is a Uint8Array');
      return { body: value, contentType: 'application/octet-stream', type };
    case 'json': {
      const text = value === undefined ? undefined : JSON.stringify(value);
      if (text === undefined) throw new TypeError('undefined is not a JSON value');
      return { body: encoder.encode(text), contentType: 'application/json', type };
    }
  }
}

/**
 * A transaction set's `value` (and `type` when the server would not infer it from the JSON alone:
 * a string is text and any other JSON value json there), as an export line writes each type.
 */
export function txnValue(value: unknown, type: ValueType): { value: string | JsonValue; type?: ValueType } {
  switch (type) {
    case 'text':
      if (typeof value !== 'string') throw new TypeError(`a text value is a string, not ${typeof value}`);
      return { value };
    case 'int64':
      return { value: int64Text(value), type };
    case 'float64':
      if (typeof value !== 'number') throw new TypeError(`a float64 value is a number, not ${typeof value}`);
      return { value: Number(float64Text(value)), type };
    case 'bytes': {
      const bytes = value instanceof ArrayBuffer ? new Uint8Array(value) : value;
      if (!(bytes instanceof Uint8Array)) throw new TypeError('a bytes value is a Uint8Array');
      let binary = '';
      for (const b of bytes) binary += String.fromCharCode(b);
      return { value: btoa(binary), type };
    }
    case 'json':
      if (value === undefined || typeof value === 'bigint') throw new TypeError(`${typeof value} is not a JSON value`);
      return typeof value === 'string' ? { value: value as JsonValue, type } : { value: value as JsonValue };
  }
}

/** A value read (GET, a counter's answer) from its exact bytes and its Kvb-Type. */
export function decodeValue(type: ValueType, data: Uint8Array): Value {
  switch (type) {
    case 'bytes':
      return data;
    case 'text':
      return decoder.decode(data);
    case 'json':
      return JSON.parse(decoder.decode(data)) as JsonValue;
    case 'int64':
      return BigInt(decoder.decode(data));
    case 'float64':
      return Number(decoder.decode(data));
  }
}

/** Base64 (standard, padded) to bytes, without Buffer. */
export function fromBase64(text: string): Uint8Array {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/**
 * A value as the JSON listings, the export format and the watch feed write it: text a string, json
 * itself, float64 a number, bytes base64, int64 a number (listings) or a decimal string (export,
 * watch) — given here as its exact source text, so 2^63-1 stays exact.
 */
export function decodeJsonValue(type: ValueType, value: unknown, int64Source?: string): Value {
  switch (type) {
    case 'bytes':
      return fromBase64(String(value));
    case 'int64':
      return BigInt(int64Source ?? String(value));
    case 'float64':
      return Number(value);
    case 'text':
      return String(value);
    case 'json':
      return value as JsonValue;
  }
}

/** Splits a byte stream into its lines (UTF-8), as they arrive. */
export async function* linesOf(body: AsyncIterable<Uint8Array>): AsyncGenerator<string> {
  const lineDecoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of body) {
    buffer += lineDecoder.decode(chunk, { stream: true });
    let at: number;
    while ((at = buffer.indexOf('\n')) !== -1) {
      const line = buffer.slice(0, at);
      buffer = buffer.slice(at + 1);
      if (line !== '') yield line;
    }
  }
  buffer += lineDecoder.decode();
  if (buffer !== '') yield buffer;
}
