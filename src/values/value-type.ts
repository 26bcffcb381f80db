import { VALUE_TYPES, type ValueType } from '../limits.js';

export type { ValueType };

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
