import type { Change, ChangeLogBounds } from '../../store/store.js';
import type { Webhook } from '../../store/webhook-types.js';
import { exportedValue } from '../../values/export-format.js';

/** Most changes in one delivery, and about the most bytes of its events (a single revision bigger than that still goes whole). */
export const MAX_BATCH_EVENTS = 250;
export const MAX_BATCH_BYTES = 256 * 1024;

/** What to do next for a subscription: send these events and then stand at `upTo`, or (no events) just stand there. */
export interface Batch {
  /** Each event as its JSON text, in revision order. */
  events: string[];
  firstRevision: number;
  /** The position once the batch is acknowledged. */
  upTo: number;
}

/** A change whose event is made already (the changes commits carried: made once, for every webhook of the bucket). */
export interface CarriedEvent {
  revision: number;
  key: string;
  kind: Change['kind'];
  event: string;
}

/** One change as delivered: the watch feed's event with values, and an idempotency id. */
export function changeEvent(bucket: string, c: Change): string {
  const id = JSON.stringify(`${bucket}:${c.revision}:${c.key}`);
  const base = `{"id":${id},"type":"${c.kind}","key":${JSON.stringify(c.key)},"rev":${c.revision}`;
  if (c.kind !== 'set' || !c.value) return `${base}}`;
  const expires = c.expiresAt === null ? 'null' : JSON.stringify(new Date(c.expiresAt).toISOString());
  return `${base},"value_type":"${c.value.type}","expires_at":${expires},"value":${exportedValue(c.value)}}`;
}

/**
 * The `reset` a subscription gets when the change log no longer reaches back to its position (the
 * history was pruned or an import replaced keys): the changes up to `oldest` cannot be delivered;
 * the receiver re-reads the bucket. Delivery goes on after it.
 */
export function resetBatch(bucket: string, w: Webhook, bounds: ChangeLogBounds): Batch {
  const id = JSON.stringify(`${bucket}:${bounds.watchFloor}:reset`);
  return {
    events: [`{"id":${id},"type":"reset","rev":${bounds.revision},"oldest":${bounds.watchFloor},"from":${w.position}}`],
    firstRevision: w.position + 1,
    upTo: bounds.watchFloor,
  };
}

/**
 * The next batch from `rows` (whole revisions after the position, read up to `readUpTo`; `complete`:
 * nothing more up to there): the changes under the prefix and of the kinds asked for, whole
 * revisions at a time, up to the bounds.
 */
export function nextBatch(
  bucket: string,
  w: Webhook,
  rows: ReadonlyArray<Change | CarriedEvent>,
  readUpTo: number,
  complete: boolean,
): Batch {
  const kinds = new Set<string>(w.kinds);
  const events: string[] = [];
  let bytes = 0;
  let firstRevision = 0;
  let upTo = w.position;
  for (let i = 0; i < rows.length; ) {
    const revision = rows[i]!.revision;
    const own: string[] = [];
    for (; i < rows.length && rows[i]!.revision === revision; i++) {
      const c = rows[i]!;
      if (c.key.startsWith(w.prefix) && kinds.has(c.kind)) own.push('event' in c ? c.event : changeEvent(bucket, c));
    }
    const size = own.reduce((n, e) => n + e.length, 0);
    if (events.length > 0 && own.length > 0 && (events.length + own.length > MAX_BATCH_EVENTS || bytes + size > MAX_BATCH_BYTES)) {
      return { events, firstRevision, upTo };
    }
    if (own.length > 0 && events.length === 0) firstRevision = revision;
    events.push(...own);
    bytes += size;
    upTo = revision;
  }
  return { events, firstRevision, upTo: complete ? Math.max(upTo, readUpTo) : upTo };
}
