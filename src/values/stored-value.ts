import type { ValueType } from './value-type.js';

// Apart from value-type.ts so that the types the client library publishes never name Node's Buffer.

/** A value as stored: its type and its canonical bytes (UTF-8 text for every type but bytes). */
export interface StoredValue {
  type: ValueType;
  data: Buffer;
}
