/** The API's value types and token permissions, as the console names them (the server's Kvb-Type values). */
export const VALUE_TYPES = ['json', 'text', 'int64', 'float64', 'bytes'] as const;
export type ValueType = (typeof VALUE_TYPES)[number];
export const PERMISSIONS = ['read', 'write', 'enumerate', 'delete'] as const;
export type Permission = (typeof PERMISSIONS)[number];
