/** Int64 and Float64: the strict number grammar and exact arithmetic. Pure. */

export const INT64_MIN = -(2n ** 63n);
export const INT64_MAX = 2n ** 63n - 1n;

const INTEGER = /^-?(?:0|[1-9][0-9]*)$/;
const NUMBER = /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$/;

export type ParsedNumber = { kind: 'int64'; value: bigint } | { kind: 'float64'; value: number };

/**
 * Parses text in JSON's number grammar. An integer in Int64 range is Int64; a literal with a
 * fraction or exponent that is finite is Float64. Anything else (including integers outside
 * Int64 and overflowing floats) is not a number: returns undefined.
 */
export function parseNumber(text: string): ParsedNumber | undefined {
  if (text.length === 0 || text.length > 400 || !NUMBER.test(text)) return undefined;
  if (INTEGER.test(text)) {
    const value = BigInt(text);
    return value >= INT64_MIN && value <= INT64_MAX ? { kind: 'int64', value } : undefined;
  }
  const value = Number(text);
  return Number.isFinite(value) ? { kind: 'float64', value } : undefined;
}

/** Float64 as text: shortest round-trip form that always reads back as a float (3 -> "3.0"). */
export function formatFloat(value: number): string {
  const s = String(value);
  return /[.eE]/.test(s) ? s : `${s}.0`;
}

export function formatNumber(n: ParsedNumber): string {
  return n.kind === 'int64' ? n.value.toString() : formatFloat(n.value);
}

export function toFloat(n: ParsedNumber): number {
  return n.kind === 'int64' ? Number(n.value) : n.value;
}

/**
 * Parses a counter delta: `+N` or `-N` where N is an unsigned JSON number. An integral N must
 * fit Int64 (as a magnitude, so `-9223372036854775808` is allowed). Returns undefined when malformed.
 */
export function parseDelta(text: string): ParsedNumber | undefined {
  const sign = text[0];
  if (sign !== '+' && sign !== '-') return undefined;
  const body = text.slice(1);
  if (body.startsWith('-')) return undefined;
  return parseNumber(sign === '-' ? text : body);
}

export type CounterResult = { ok: true; value: ParsedNumber } | { ok: false; reason: string };

/** current + delta: Int64 stays Int64 (overflow refused); any float operand gives Float64 (NaN/Inf refused). */
export function addNumbers(current: ParsedNumber, delta: ParsedNumber): CounterResult {
  if (current.kind === 'int64' && delta.kind === 'int64') {
    const sum = current.value + delta.value;
    if (sum < INT64_MIN || sum > INT64_MAX) return { ok: false, reason: 'counter overflows Int64' };
    return { ok: true, value: { kind: 'int64', value: sum } };
  }
  const sum = toFloat(current) + toFloat(delta);
  if (!Number.isFinite(sum)) return { ok: false, reason: 'counter result is not a finite number' };
  return { ok: true, value: { kind: 'float64', value: sum } };
}
