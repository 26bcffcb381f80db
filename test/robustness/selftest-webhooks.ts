import { createHmac } from 'node:crypto';
import type { RecordedHistory, WatchEvent } from './history.js';
import { allWatchedEvents, history, set, watchedWrites, watcher } from './selftest-builders.js';
import type { ReceiverAnswer, WebhookDelivery, WebhookHistory, WebhookSubscription } from './webhook-history.js';

/**
 * The webhook checker's self-test histories (selftest.ts runs them): the committed changes are
 * watchedWrites() as the feed carried them (x=1 @1, y=2 @2, x=3 y=4 @3, z=5 @4, delete x @5); two
 * subscriptions, one on the prefix `x`, one on the whole bucket.
 */
interface Case {
  name: string;
  expected: 'ok' | 'anomaly';
  checker?: string;
  history: RecordedHistory;
}

const BUCKET = 'b0';
const X: WebhookSubscription = { id: 'wh_x', prefix: 'x', secret: 'whsec_x', position: 0 };
const ALL: WebhookSubscription = { id: 'wh_all', prefix: '', secret: 'whsec_all', position: 0 };

/** A request as kvb sends it: the events of these revisions under the subscription's prefix, signed. */
function request(
  s: WebhookSubscription,
  at: number,
  answer: ReceiverAnswer,
  revisions: number[],
  options: { events?: WatchEvent[]; secret?: string } = {},
): WebhookDelivery {
  const changes = options.events ?? allWatchedEvents().filter((e) => revisions.includes(e.revision) && e.key.startsWith(s.prefix));
  const events = changes.map((e) => ({
    id: `${BUCKET}:${e.revision}:${e.key}`,
    type: e.kind,
    key: e.key,
    rev: e.revision,
    ...(e.kind === 'set' && { value_type: 'text', expires_at: null, value: e.value }),
  }));
  return signed(s, at, answer, events, options.secret);
}

function signed(s: WebhookSubscription, at: number, answer: ReceiverAnswer, events: unknown[], secret = s.secret): WebhookDelivery {
  const body = JSON.stringify({ webhook: s.id, bucket: BUCKET, events });
  const t = 1_700_000_000;
  const v1 = createHmac('sha256', secret).update(`${t}.${body}`).digest('hex');
  return { subscription: s.id, at, body, signature: `t=${t},v1=${v1}`, answer };
}

/** The x subscription's clean deliveries (x@1, x@3, x@5), for cases about the other one. */
const xClean = () => [request(X, 1, 'ok', [1, 2]), request(X, 2, 'ok', [3, 4, 5])];

function hooks(name: string, deliveries: WebhookDelivery[], extra: Partial<WebhookHistory> = {}): RecordedHistory {
  const webhooks: WebhookHistory = { bucket: BUCKET, subscriptions: [X, ALL], deliveries, kills: [], finalRevision: 5, floor: 0, ...extra };
  return history(name, {
    ops: watchedWrites(),
    watches: [watcher(1, [{ instance: 'a', since: 0, events: allWatchedEvents() }], 5)],
    webhooks,
  });
}

export function webhookCases(): Case[] {
  const cases: Case[] = [];
  const ok = (name: string, deliveries: WebhookDelivery[], extra?: Partial<WebhookHistory>) =>
    cases.push({ name: `webhooks: ${name}`, expected: 'ok', history: hooks(name, deliveries, extra) });
  const bad = (name: string, deliveries: WebhookDelivery[], extra?: Partial<WebhookHistory>) =>
    cases.push({ name: `webhooks: ${name}`, expected: 'anomaly', checker: 'webhooks', history: hooks(name, deliveries, extra) });

  ok('every change in order, batched by whole revisions', [...xClean(), request(ALL, 3, 'ok', [1, 2, 3]), request(ALL, 4, 'ok', [4, 5])]);
  ok('a request failed (500, no answer, dropped) is sent again, grown', [
    ...xClean(),
    request(ALL, 3, 'error', [1]),
    request(ALL, 4, 'hang', [1, 2]),
    request(ALL, 5, 'drop', [1, 2, 3]),
    request(ALL, 6, 'ok', [1, 2, 3, 4]),
    request(ALL, 7, 'ok', [5]),
  ]);
  ok(
    'a request acknowledged just before a kill -9 is repeated',
    [...xClean(), request(ALL, 100, 'ok', [1, 2]), request(ALL, 900, 'ok', [1, 2, 3]), request(ALL, 950, 'ok', [4, 5])],
    {
      kills: [400],
    },
  );
  ok(
    'a reset where the history fell below the position, then the changes after the floor',
    [
      ...xClean(),
      signed(ALL, 3, 'ok', [{ id: `${BUCKET}:3:reset`, type: 'reset', rev: 5, oldest: 3, from: 0 }]),
      request(ALL, 4, 'ok', [4, 5]),
    ],
    { floor: 3 },
  );

  bad('a committed change never acknowledged', [...xClean(), request(ALL, 3, 'ok', [1, 2, 3, 4])]);
  bad('a change sent before the one before it was acknowledged', [
    ...xClean(),
    request(ALL, 3, 'error', [1, 2]),
    request(ALL, 4, 'ok', [3, 4, 5]),
    request(ALL, 5, 'ok', [1, 2]),
  ]);
  bad('a revision split across requests', [
    ...xClean(),
    request(ALL, 3, 'ok', [1, 2], { events: [set('x', 1, '1'), set('y', 2, '2'), set('x', 3, '3')] }),
    request(ALL, 4, 'ok', [3, 4, 5]),
  ]);
  bad('a change that was never committed', [
    ...xClean(),
    request(ALL, 3, 'ok', [1, 2], { events: [set('x', 1, '1'), set('y', 2, 'not-written')] }),
    request(ALL, 4, 'ok', [3, 4, 5]),
  ]);
  bad('a change outside the prefix', [
    request(X, 1, 'ok', [1], { events: [set('x', 1, '1'), set('y', 2, '2')] }),
    request(X, 2, 'ok', [3, 5]),
    request(ALL, 3, 'ok', [1, 2, 3, 4, 5]),
  ]);
  bad('a signature made with another secret', [...xClean(), request(ALL, 3, 'ok', [1, 2, 3, 4, 5], { secret: 'whsec_other' })]);
  bad(
    'a repeat of an acknowledged request with no fault around it',
    [...xClean(), request(ALL, 100, 'ok', [1, 2]), request(ALL, 900, 'ok', [1, 2, 3, 4, 5])],
    {
      kills: [2000],
    },
  );
  bad('a reset while the history still reached back to the position', [
    ...xClean(),
    signed(ALL, 3, 'ok', [{ id: `${BUCKET}:3:reset`, type: 'reset', rev: 5, oldest: 3, from: 0 }]),
    request(ALL, 4, 'ok', [4, 5]),
  ]);
  return cases;
}
