/**
 * How a SQLite commit is made durable: `normal` (WAL, synchronous=NORMAL) survives the process
 * crashing; `full` fsyncs every group commit and survives a power cut too. PostgreSQL commits as
 * durably as its own `synchronous_commit` makes them, so the setting does not apply there.
 */
export const DURABILITY_MODES = ['normal', 'full'] as const;
export type Durability = (typeof DURABILITY_MODES)[number];
/** What a SQLite store commits with when nobody chose (docs/operations.md, "Durability", has the measured cost of `full`). */
export const DEFAULT_DURABILITY: Durability = 'normal';
