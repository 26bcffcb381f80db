/**
 * What a change did to its key: written (`set`), deleted (`delete`), or removed when its expiry
 * passed (`expire`, recorded by the server's sweeper). One list for the change log, history, the
 * watch feed, webhooks and the client: a kind added here must be handled everywhere it is matched.
 */
export const CHANGE_KINDS = ['set', 'delete', 'expire'] as const;
export type ChangeKind = (typeof CHANGE_KINDS)[number];

/** What made a key's change: a plain change, or one of the operations that write several keys or compute the value (history's `operation`). */
export const HISTORY_OPERATIONS = [...CHANGE_KINDS, 'counter', 'transaction', 'import', 'rollback'] as const;
export type HistoryOperation = (typeof HISTORY_OPERATIONS)[number];
