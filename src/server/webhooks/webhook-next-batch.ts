import type { ChangeFeed } from '../../store/store.js';
import type { Webhook } from '../../store/webhook-types.js';
import { type Batch, MAX_BATCH_EVENTS, nextBatch } from './webhook-batch.js';
import type { CarriedTails } from './webhook-tail.js';

/** Rows of the change log read per delivery at most (whole revisions), and first. */
const READ_LIMIT = 1000;
const FIRST_READ_LIMIT = 2 * MAX_BATCH_EVENTS;

/**
 * The next batch after the webhook's position, up to the bucket's revision `upTo`: from the
 * changes its bucket's commits carried when they hold every one (SQLite), else from the change log.
 */
export function batchAfter(changes: ChangeFeed, tails: CarriedTails | undefined, w: Webhook, upTo: number): Promise<Batch> {
  const carried = tails?.between(w.bucket, w.position, upTo);
  return carried ? Promise.resolve(nextBatch(w.bucket, w, carried, upTo, true)) : readBatch(changes, w, upTo);
}

/**
 * From the log: first about what one request holds, and only when that does not fill one (a
 * prefix or kinds that leave most changes out), READ_LIMIT rows. Under load a backlog of
 * thousands of changes waits; reading READ_LIMIT rows with their values for every request of
 * MAX_BATCH_EVENTS was most of what a delivery cost.
 */
async function readBatch(changes: ChangeFeed, w: Webhook, upTo: number): Promise<Batch> {
  let batch: Batch | undefined;
  for (const limit of [FIRST_READ_LIMIT, READ_LIMIT]) {
    const rows = await changes.read(w.bucket, w.position, upTo, limit);
    // Only an empty read says nothing is left up to `upTo`: fewer rows than the limit do not, as
    // a read that stopped inside a revision leaves that revision out (whole revisions). Taking
    // them for the end moved the position past changes never sent.
    const last = rows.at(-1)?.revision;
    batch = nextBatch(w.bucket, w, rows, upTo, last === undefined);
    const full = batch.events.length >= MAX_BATCH_EVENTS || batch.upTo < (last ?? 0);
    if (last === undefined || last >= upTo || full) break;
  }
  return batch!;
}
