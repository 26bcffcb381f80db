/** The five stored value types, as named in the Kvb-Type header and the database. */
export const VALUE_TYPES = ['json', 'text', 'int64', 'float64', 'bytes'] as const;
export type ValueType = (typeof VALUE_TYPES)[number];

export const CONTENT_TYPES: Record<ValueType, string> = {
  json: 'application/json',
  text: 'text/plain; charset=utf-8',
  int64: 'text/plain; charset=utf-8',
  float64: 'text/plain; charset=utf-8',
  bytes: 'application/octet-stream',
};

export function isValueType(s: string): s is ValueType {
  return (VALUE_TYPES as readonly string[]).includes(s);
}
