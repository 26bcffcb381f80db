import type { ValueType } from '../values/value-type.js';
import type { Actor, ActorKind } from './history-types.js';
import type { Change } from './store.js';

/** A change row's actor columns (all null when the write carried no actor). */
export function actorFields(actor: Actor | undefined): {
  actorKind: string | null;
  actorToken: string | null;
  actorAddress: string | null;
} {
  return { actorKind: actor?.kind ?? null, actorToken: actor?.tokenId ?? null, actorAddress: actor?.address ?? null };
}

/** The actor a change row records; null for rows written before kvb recorded one. */
export function actorFromRow(row: Record<string, unknown>): Actor | null {
  if (row.actor_kind === null || row.actor_kind === undefined) return null;
  return {
    kind: String(row.actor_kind) as ActorKind,
    ...(typeof row.actor_token === 'string' && { tokenId: row.actor_token }),
    ...(typeof row.actor_address === 'string' && { address: row.actor_address }),
  };
}

/** A change-log row as both drivers return it. */
export interface ChangeRow {
  revision: number | string;
  key: Buffer;
  kind: Change['kind'];
  type: string | null;
  value: Buffer | null;
  expires_at: number | string | null;
}

export function toChange(row: ChangeRow): Change {
  return {
    revision: Number(row.revision),
    key: row.key.toString('utf8'),
    kind: row.kind,
    ...(row.kind === 'set' && row.type !== null && row.value !== null && { value: { type: row.type as ValueType, data: row.value } }),
    expiresAt: row.expires_at === null ? null : Number(row.expires_at),
  };
}

/**
 * Whole revisions only: when a read hit its row limit, the last revision may be cut, so it is
 * dropped (or, when it is the only one, read on its own by `readWhole`).
 */
export async function wholeRevisions(rows: Change[], limit: number, readWhole: (revision: number) => Promise<Change[]>): Promise<Change[]> {
  if (rows.length < limit || rows.length === 0) return rows;
  const last = rows[rows.length - 1]!.revision;
  if (rows[0]!.revision === last) return readWhole(last);
  return rows.filter((r) => r.revision !== last);
}
