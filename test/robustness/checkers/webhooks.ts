import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Verdict, WatchLog } from '../history.js';
import type { WebhookDelivery, WebhookHistory, WebhookSubscription } from '../webhook-history.js';

/**
 * Webhook delivery under faults, per subscription, against the committed changes (the complete
 * watch feed, itself checked against the clients' operations by the watch and linearizability
 * checkers):
 * - every request's signature verifies with the secret shown when the subscription was added;
 * - every event is a committed change under the prefix, after the subscription's start, with its
 *   idempotency id `bucket:rev:key`; a request holds whole revisions, in order, without gaps;
 * - order: a request starts only after every change before it was acknowledged (a 2xx);
 * - at least once: every committed change under the prefix up to the final revision was acknowledged;
 * - repeats only around faults: a change arrives again only when its last arrival failed (500,
 *   hang, drop) or was acknowledged just before a kill -9 (the sender died before storing it);
 * - a `reset` only for a position below the change log's floor.
 */
const CHECKER = 'webhooks';
const MAX_DETAILS = 12;
/** A request's arrival is seen by the runner's event loop a little after the sender wrote it; a kill up to this much before still caught it in flight. */
export const KILL_SLACK_MS = 1000;

interface Committed {
  revision: number;
  key: string;
  kind: string;
  value?: string;
}

interface DeliveredEvent {
  id?: string;
  type: string;
  key?: string;
  rev: number;
  value?: unknown;
  oldest?: number;
  from?: number;
}

const changeId = (revision: number, key: string) => `${revision}\u0000${key}`;
const normalized = (value: unknown) => (value === undefined ? undefined : typeof value === 'string' ? value : JSON.stringify(value));

/** The committed changes, from every watcher's feed (one entry per revision and key). */
function committedChanges(watches: WatchLog[]): Map<string, Committed> {
  const changes = new Map<string, Committed>();
  for (const log of watches)
    for (const segment of log.segments)
      for (const e of segment.events)
        changes.set(changeId(e.revision, e.key), {
          revision: e.revision,
          key: e.key,
          kind: e.kind,
          ...(e.value !== undefined && { value: e.value }),
        });
  return changes;
}

export function signatureVerifies(secret: string, header: string | undefined, body: string): boolean {
  if (header === undefined) return false;
  const parts = Object.fromEntries(header.split(',').map((p) => p.split('=', 2) as [string, string]));
  if (!/^\d+$/.test(parts.t ?? '')) return false;
  const expected = createHmac('sha256', secret).update(`${parts.t}.${body}`).digest();
  const given = Buffer.from(parts.v1 ?? '', 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

export function checkWebhooks(history: WebhookHistory, watches: WatchLog[]): Verdict {
  const details: string[] = [];
  const note = (line: string): void => {
    if (details.length < MAX_DETAILS) details.push(line);
    else if (details.length === MAX_DETAILS) details.push('… more');
  };
  const final = history.finalRevision;
  if (final === null || !watches.some((w) => (w.caughtUpTo ?? -1) >= final))
    return {
      checker: CHECKER,
      result: 'unchecked',
      details: [`no watcher is known to have reached the final revision (${final ?? 'unknown'}): the committed changes are not known`],
      examined: 0,
    };
  const committed = committedChanges(watches);
  for (const s of history.subscriptions) checkSubscription({ ...history, finalRevision: final }, s, committed, note);
  const known = new Set(history.subscriptions.map((s) => s.id));
  for (const d of history.deliveries)
    if (!known.has(d.subscription)) note(`a request to ${d.subscription}, which is no subscription of the run`);
  return { checker: CHECKER, result: details.length > 0 ? 'anomaly' : 'ok', details, examined: history.deliveries.length };
}

function checkSubscription(
  history: WebhookHistory & { finalRevision: number },
  s: WebhookSubscription,
  committed: Map<string, Committed>,
  note: (line: string) => void,
): void {
  const wanted = [...committed.values()]
    .filter((c) => c.key.startsWith(s.prefix) && c.revision > s.position && c.revision <= history.finalRevision)
    .sort((a, b) => a.revision - b.revision || (a.key < b.key ? -1 : 1));
  const acked = new Set<string>();
  /** Each change's latest arrival. */
  const lastArrival = new Map<string, WebhookDelivery>();
  /** Changes at or below this were reset (acknowledged `reset`): not owed. */
  let resetUpTo = s.position;
  let frontier = 0;
  const label = `webhook ${s.id} (prefix '${s.prefix}')`;
  for (const d of history.deliveries) {
    if (d.subscription !== s.id) continue;
    const at = `${label}, request at ${d.at.toFixed(0)} ms (${d.answer})`;
    if (!signatureVerifies(s.secret, d.signature, d.body)) note(`${at}: the signature does not verify with the secret shown at creation`);
    let body: { webhook?: string; bucket?: string; events?: DeliveredEvent[] };
    try {
      body = JSON.parse(d.body) as typeof body;
    } catch {
      note(`${at}: the body is not JSON`);
      continue;
    }
    if (body.webhook !== s.id || body.bucket !== history.bucket) note(`${at}: names webhook ${body.webhook} of bucket ${body.bucket}`);
    const events = body.events ?? [];
    if (events.length === 0) note(`${at}: no events`);
    const reset = events.find((e) => e.type === 'reset');
    if (reset) {
      const from = reset.from ?? -1;
      const oldest = reset.oldest ?? -1;
      if (events.length > 1) note(`${at}: a reset together with other events`);
      if (!(from < oldest && oldest <= history.floor))
        note(
          `${at}: a reset from ${from} to ${oldest}, but the change log's floor is ${history.floor}: history had not fallen below the position`,
        );
      if (d.answer === 'ok') resetUpTo = Math.max(resetUpTo, oldest);
      continue;
    }
    const changes = events.flatMap((e) => deliveredChange(e, s, history, committed, at, note));
    // Order: nothing owed before this request's first revision may still be unacknowledged.
    while (
      frontier < wanted.length &&
      (acked.has(changeId(wanted[frontier]!.revision, wanted[frontier]!.key)) || wanted[frontier]!.revision <= resetUpTo)
    )
      frontier++;
    const first = changes[0];
    const owed = wanted[frontier];
    if (first && owed && owed.revision < first.revision)
      note(`${at}: sent revision ${first.revision} while ${owed.key}@${owed.revision} was not acknowledged`);
    for (let i = 1; i < changes.length; i++)
      if (changes[i]!.revision < changes[i - 1]!.revision)
        note(`${at}: revision ${changes[i]!.revision} after ${changes[i - 1]!.revision} in one request`);
    if (first) checkWhole(wanted, changes, at, note);
    for (const c of changes) {
      const id = changeId(c.revision, c.key);
      const before = lastArrival.get(id);
      if (before?.answer === 'ok' && !history.kills.some((k) => k >= before.at - KILL_SLACK_MS && k <= d.at))
        note(
          `${at}: ${c.key}@${c.revision} again, acknowledged at ${before.at.toFixed(0)} ms with no kill in between (a repeat without a fault)`,
        );
      lastArrival.set(id, d);
      if (d.answer === 'ok') acked.add(id);
    }
  }
  let missing = 0;
  for (const c of wanted) {
    if (c.revision <= resetUpTo || acked.has(changeId(c.revision, c.key))) continue;
    if (missing++ < 3) note(`${label}: ${c.kind} of ${c.key}@${c.revision} committed but never acknowledged`);
  }
  if (missing > 3) note(`${label}: ${missing} committed changes never acknowledged in all`);
}

/** One delivered change event checked against what was committed; returns it when it is one. */
function deliveredChange(
  e: DeliveredEvent,
  s: WebhookSubscription,
  history: Pick<WebhookHistory, 'bucket'>,
  committed: Map<string, Committed>,
  at: string,
  note: (line: string) => void,
): Committed[] {
  if (e.type !== 'set' && e.type !== 'delete' && e.type !== 'expire') {
    note(`${at}: an event of type ${e.type}`);
    return [];
  }
  const key = e.key ?? '';
  if (e.id !== `${history.bucket}:${e.rev}:${key}`) note(`${at}: event id ${e.id} for ${key}@${e.rev}`);
  if (!key.startsWith(s.prefix)) note(`${at}: ${key}@${e.rev} is outside the prefix '${s.prefix}'`);
  if (e.rev <= s.position) note(`${at}: ${key}@${e.rev} is from before the subscription (it starts after ${s.position})`);
  const c = committed.get(changeId(e.rev, key));
  if (!c || c.kind !== e.type || (c.value !== undefined && normalized(e.value) !== c.value)) {
    note(
      `${at}: ${e.type} of ${key}@${e.rev}${e.value !== undefined ? ` = ${normalized(e.value)}` : ''} was never committed (the feed has ${c ? `${c.kind} = ${c.value}` : 'nothing'})`,
    );
    return [];
  }
  return [c];
}

/** A request holds whole revisions without gaps: every change owed between its first and last revision. */
function checkWhole(wanted: Committed[], changes: Committed[], at: string, note: (line: string) => void): void {
  const first = changes[0]!.revision;
  const last = changes[changes.length - 1]!.revision;
  const sent = new Set(changes.map((c) => changeId(c.revision, c.key)));
  let lo = 0;
  let hi = wanted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (wanted[mid]!.revision < first) lo = mid + 1;
    else hi = mid;
  }
  for (let i = lo; i < wanted.length && wanted[i]!.revision <= last; i++) {
    const c = wanted[i]!;
    if (!sent.has(changeId(c.revision, c.key))) note(`${at}: holds revisions ${first}..${last} but not ${c.key}@${c.revision}`);
  }
}
