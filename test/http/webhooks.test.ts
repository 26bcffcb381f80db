import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '../../src/client/index.js';
import { startWebhookDelivery } from '../../src/server/webhooks/webhook-delivery.js';
import type { WebhookDeliverer } from '../../src/server/webhooks/webhook-deliverer.js';
import { verifyDelivery } from '../../src/server/webhooks/webhook-signature.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';
import { call, createBucket, expectError, json } from '../helpers/http.js';
import { testClock } from '../helpers/test-clock.js';
import { startReceiver } from '../helpers/webhook-receiver.js';

const ADMIN = 'webhook-admin';
const auth = { authorization: `Bearer ${ADMIN}` };
const RETRY_SECONDS = 600;

/**
 * Webhooks over the HTTP contract, delivered by the delivery loop to a real receiving server on
 * 127.0.0.1 (`webhookAllowPrivate`). The server decides by a test clock, so a retry is due only
 * when the test moves it (no waiting out a backoff).
 */
describe('webhooks', () => {
  const clock = testClock();
  let server: AppServer;
  let deliverer: WebhookDeliverer;
  let bucket: string;
  beforeAll(async () => {
    server = await startAppServer({
      clock: clock.now,
      config: { webhookAllowPrivate: true, webhookTimeoutSeconds: 1, webhookRetrySeconds: RETRY_SECONDS, maxWebhooksPerBucket: 3 },
    });
    const settings = { webhookAllowPrivate: true, webhookTimeoutSeconds: 1, webhookRetrySeconds: RETRY_SECONDS };
    deliverer = startWebhookDelivery(server.store, settings, server.app.log, clock.now, server.app.metricsRegistry, {
      pollMs: 20,
      random: () => 0.5,
    });
    server.app.webhookHealth.lag = () => deliverer.lagging();
    bucket = await createBucket(server.api, { secret_key: ADMIN });
  });
  afterAll(async () => {
    await deliverer?.stop();
    await server?.stop();
  });

  const hooks = () => `${server.api}/webhooks/${bucket}`;
  const add = async (body: Record<string, unknown>) => {
    const res = await call(hooks(), { method: 'POST', ...json(body, auth) });
    expect(res.status, res.text).toBe(201);
    return res.json() as { id: string; secret: string; position: number };
  };
  const set = async (key: string, value: string) => {
    const res = await call(`${server.api}/${bucket}/${encodeURIComponent(key)}`, { method: 'PUT', body: value, headers: auth });
    expect(res.status, res.text).toBe(200);
    return Number(res.headers.get('kvb-revision'));
  };
  const hook = async (id: string) => (await call(`${hooks()}/${id}`, { headers: auth })).json() as Record<string, unknown>;
  const remove = (id: string) => call(`${hooks()}/${id}`, { method: 'DELETE', headers: auth });

  it('is for the secret-key holder: no credential, a wrong one, and a bucket without a secret_key are refused', async () => {
    expectError(await call(hooks()), 401, 'unauthorized');
    expectError(await call(hooks(), { headers: { authorization: 'Bearer nope' } }), 401, 'unauthorized');
    const open = await createBucket(server.api);
    expectError(
      await call(`${server.api}/webhooks/${open}`, { method: 'POST', ...json({ url: 'https://example.com/' }) }),
      403,
      'forbidden',
    );
    expectError(await call(`${server.api}/webhooks/no-such-bucket`, { headers: auth }), 404, 'not_found');
    expectError(await call(`${hooks()}?verbose=1`, { headers: auth }), 400, 'bad_request');
    expectError(await call(hooks(), { method: 'POST', ...json({ url: 'ftp://example.com/' }, auth) }), 400, 'bad_request');
    expectError(await call(hooks(), { method: 'POST', ...json({ url: 'https://example.com/', extra: 1 }, auth) }), 400, 'bad_request');
    expect((await call(hooks(), { headers: auth })).json()).toEqual([]);
  });

  it('shows the secret once, counts toward the per-bucket limit, and lists without secrets', async () => {
    const made = await Promise.all([1, 2, 3].map(() => add({ url: 'https://example.com/h' })));
    expect(made[0]!.secret).toMatch(/^whsec_/);
    expectError(await call(hooks(), { method: 'POST', ...json({ url: 'https://example.com/h' }, auth) }), 409, 'conflict');
    const listed = await call(hooks(), { headers: auth });
    expect((listed.json() as unknown[]).length).toBe(3);
    for (const m of made) expect(listed.text).not.toContain(m.secret);
    for (const m of made) expect((await remove(m.id)).status).toBe(204);
    expectError(await remove(made[0]!.id), 404, 'not_found');
  });

  it('delivers every change under the prefix, in revision order, signed with the secret shown', async () => {
    const receiver = await startReceiver();
    try {
      const { id, secret } = await add({ url: receiver.url, prefix: 'user/' });
      const revisions: number[] = [];
      for (let i = 0; i < 12; i++) {
        revisions.push(await set(`user/${i}`, `v${i}`));
        await set(`other/${i}`, 'x');
      }
      await expect.poll(() => receiver.acknowledged().length).toBe(12);
      const events = receiver.acknowledged();
      expect(events.map((e) => e.rev)).toEqual(revisions);
      expect(events.map((e) => e.key)).toEqual(revisions.map((_, i) => `user/${i}`));
      expect(events[0]).toMatchObject({ id: `${bucket}:${revisions[0]}:user/0`, type: 'set', value: 'v0' });
      for (const r of receiver.received) {
        expect(verifyDelivery(secret, String(r.headers['kvb-signature']), r.body, Math.floor(clock.now() / 1000))).toBe(true);
        expect(verifyDelivery('whsec_wrong', String(r.headers['kvb-signature']), r.body, Math.floor(clock.now() / 1000))).toBe(false);
      }
      await expect.poll(async () => (await hook(id)).position).toBe(revisions.at(-1)! + 1);
      const metrics = (await call(`${server.url}/metrics`)).text;
      expect(metrics).toMatch(/^kvb_webhooks\{state="active"\} [1-9]/m);
      expect(metrics).toMatch(/^kvb_webhook_events_delivered_total [1-9]/m);
      expect(metrics).toContain('kvb_webhook_lag_revisions_max');
      expect(await remove(id)).toMatchObject({ status: 204 });
    } finally {
      await receiver.close();
    }
  });

  it('delivers changes written while deliveries are under way, every one once and in order, over one kept connection', async () => {
    const receiver = await startReceiver();
    try {
      const { id } = await add({ url: receiver.url, prefix: 'burst/' });
      const revisions: number[] = [];
      for (let round = 0; round < 6; round++) {
        revisions.push(...(await Promise.all(Array.from({ length: 15 }, (_, i) => set(`burst/${round}-${i}`, 'v')))));
      }
      await expect.poll(() => receiver.acknowledged().length).toBe(revisions.length);
      expect(receiver.acknowledged().map((e) => e.rev)).toEqual([...revisions].sort((a, b) => a - b));
      await expect.poll(async () => (await hook(id)).position).toBe(Math.max(...revisions));
      expect(receiver.received.length).toBeGreaterThan(1);
      expect(receiver.connections()).toBe(1);
      expect(await remove(id)).toMatchObject({ status: 204 });
    } finally {
      await receiver.close();
    }
  });

  it("takes its changes from those the bucket's commits carried (SQLite), reading the change log only on a store whose commits do not", async () => {
    const receiver = await startReceiver();
    const changes = server.store.changes;
    const read = changes.read;
    let reads = 0;
    changes.read = (...args) => {
      reads++;
      return read.apply(changes, args);
    };
    try {
      const { id } = await add({ url: receiver.url, prefix: 'carried/' });
      // The first delivery follows the look that started watching the bucket: from then on its commits carry their changes.
      const first = await set('carried/0', 'v');
      await expect.poll(async () => (await hook(id)).position).toBe(first);
      const before = reads;
      const revisions = [first];
      for (let round = 0; round < 4; round++) {
        revisions.push(...(await Promise.all(Array.from({ length: 10 }, (_, i) => set(`carried/${round}-${i}`, `value ${i}`)))));
        await expect.poll(async () => (await hook(id)).position).toBe(Math.max(...revisions));
      }
      expect(receiver.acknowledged().map((e) => e.rev)).toEqual([...revisions].sort((a, b) => a - b));
      expect(receiver.acknowledged().at(-1)).toMatchObject({ key: 'carried/3-9', value: 'value 9' });
      expect(reads > before).toBe(changes.watch === undefined);
      expect(await remove(id)).toMatchObject({ status: 204 });
    } finally {
      changes.read = read;
      await receiver.close();
    }
  });

  it('retries after 500s and timeouts with backoff, then delivers and logs each attempt', async () => {
    const receiver = await startReceiver((n) => (n === 0 ? 500 : n === 1 ? 'hang' : 200));
    try {
      const { id } = await add({ url: receiver.url, prefix: 'retry/' });
      const rev = await set('retry/a', '1');
      await expect.poll(() => receiver.received.length).toBe(1);
      await expect.poll(async () => (await hook(id)).attempts).toBe(1);
      // Not again until the backoff has passed (the clock stands still).
      expect(receiver.received.length).toBe(1);
      expect((await call(`${server.url}/health`)).json()).not.toHaveProperty('webhooks');
      // A minute and more with a change waiting: /health names it (still ok: liveness).
      // The loop sleeps until a retry is due by its clock; this clock moves only when told, so tell the loop too.
      clock.advance(61_000);
      deliverer.kick();
      expect((await call(`${server.url}/health`)).json()).toMatchObject({ status: 'ok', webhooks: { lagging: 1 } });
      await expect.poll(() => receiver.received.length).toBe(2);
      await expect.poll(async () => (await hook(id)).attempts, { timeout: 5000 }).toBe(2);
      clock.advance(2000);
      deliverer.kick();
      await expect.poll(() => receiver.acknowledged().map((e) => e.rev)).toEqual([rev]);
      await expect.poll(async () => (await hook(id)).attempts).toBe(0);
      await expect.poll(async () => (await call(`${server.url}/health`)).json()).not.toHaveProperty('webhooks');
      // The attempt is logged just after the position is stored.
      const deliveries = async () =>
        (await call(`${hooks()}/${id}/deliveries`, { headers: auth })).json() as Array<Record<string, unknown>>;
      await expect.poll(async () => (await deliveries()).map((a) => a.status)).toEqual([200, null, 500]);
      const log = await deliveries();
      expect(log[1]!.error).toMatch(/no answer within 1000 ms/);
      expect(log[2]!.error).toBe('HTTP 500: receiver said 500');
      await remove(id);
    } finally {
      await receiver.close();
    }
  });

  it('pauses a webhook failing past the bound, says why, and replays from its position on resume', async () => {
    const receiver = await startReceiver(() => 503);
    try {
      const { id } = await add({ url: receiver.url, prefix: 'pause/' });
      const first = await set('pause/a', '1');
      await expect.poll(async () => (await hook(id)).attempts).toBe(1);
      clock.advance(RETRY_SECONDS * 1000);
      deliverer.kick();
      await expect.poll(async () => (await hook(id)).state).toBe('paused');
      expect((await hook(id)).paused_reason).toMatch(/HTTP 503/);
      const second = await set('pause/b', '2');
      receiver.answerWith(() => 200);
      const before = receiver.received.length;
      expect((await call(`${hooks()}/${id}`, { method: 'PATCH', ...json({ state: 'active' }, auth) })).status).toBe(200);
      await expect.poll(() => receiver.acknowledged().map((e) => e.rev)).toEqual([first, second]);
      expect(receiver.received.length).toBe(before + 1);
      await remove(id);
    } finally {
      await receiver.close();
    }
  });

  it('sends `reset` when the history no longer reaches back to its position, then goes on', async () => {
    const receiver = await startReceiver();
    try {
      const { id } = await add({ url: receiver.url, prefix: 'floor/' });
      expect((await call(`${hooks()}/${id}`, { method: 'PATCH', ...json({ state: 'paused' }, auth) })).json()).toMatchObject({
        state: 'paused',
        paused_reason: 'paused by request',
      });
      const from = (await hook(id)).position as number;
      await set('floor/a', '1');
      const last = await set('floor/b', '2');
      // The retention passes for everything written so far: the bucket's history floor rises to its newest change.
      await server.store.changes.prune(Date.now() + 60_000, 1_000_000);
      await call(`${hooks()}/${id}`, { method: 'PATCH', ...json({ state: 'active' }, auth) });
      await expect.poll(() => receiver.acknowledged().map((e) => e.type)).toEqual(['reset']);
      expect(receiver.acknowledged()[0]).toMatchObject({ type: 'reset', oldest: last, from });
      const next = await set('floor/c', '3');
      await expect.poll(() => receiver.acknowledged().map((e) => e.type)).toEqual(['reset', 'set']);
      expect(receiver.acknowledged()[1]).toMatchObject({ key: 'floor/c', rev: next });
      await remove(id);
    } finally {
      await receiver.close();
    }
  });

  it('signs with a rotated secret from then on, and sends a test event on request', async () => {
    const receiver = await startReceiver();
    try {
      const { id, secret: old } = await add({ url: receiver.url, prefix: 'rot/' });
      const rotated = await call(`${hooks()}/${id}/secret`, { method: 'POST', headers: auth });
      const { secret } = rotated.json() as { secret: string };
      expect(secret).not.toBe(old);
      await set('rot/a', '1');
      await expect.poll(() => receiver.received.length).toBe(1);
      const [r] = receiver.received;
      const now = Math.floor(clock.now() / 1000);
      expect(verifyDelivery(secret, String(r!.headers['kvb-signature']), r!.body, now)).toBe(true);
      expect(verifyDelivery(old, String(r!.headers['kvb-signature']), r!.body, now)).toBe(false);
      const test = await call(`${hooks()}/${id}/test`, { method: 'POST', headers: auth });
      expect(test.json()).toMatchObject({ status: 200, ok: true });
      expect(receiver.received.at(-1)!.events[0]!.type).toBe('test');
      await remove(id);
    } finally {
      await receiver.close();
    }
  });

  it('is managed the same through kvb-client (KvbHttp)', async () => {
    const receiver = await startReceiver();
    try {
      const http = connect({ url: server.url, bucket, token: ADMIN }).http;
      const made = await http.addWebhook(bucket, { url: receiver.url, prefix: 'client/' });
      expect(made).toMatchObject({ prefix: 'client/', state: 'active', kinds: ['set', 'delete', 'expire'] });
      expect((await http.listWebhooks(bucket)).map((w) => w.id)).toContain(made.id);
      expect((await http.setWebhookState(bucket, made.id, 'paused')).state).toBe('paused');
      expect((await http.setWebhookState(bucket, made.id, 'active')).state).toBe('active');
      expect((await http.rotateWebhookSecret(bucket, made.id)).secret).not.toBe(made.secret);
      expect(await http.testWebhook(bucket, made.id)).toMatchObject({ ok: true, status: 200 });
      expect((await http.webhookDeliveries(bucket, made.id, { limit: 1 })).length).toBe(1);
      await http.deleteWebhook(bucket, made.id);
      await expect(http.getWebhook(bucket, made.id)).rejects.toMatchObject({ status: 404 });
    } finally {
      await receiver.close();
    }
  });

  it('delivers only the change kinds asked for, and nothing after the bucket is deleted', async () => {
    const receiver = await startReceiver();
    try {
      const { id } = await add({ url: receiver.url, prefix: 'k/', kinds: ['delete'] });
      await set('k/a', '1');
      const deleted = await call(`${server.api}/${bucket}/k%2Fa`, { method: 'DELETE', headers: auth });
      expect(deleted.status).toBe(204);
      await expect.poll(() => receiver.acknowledged().map((e) => e.type)).toEqual(['delete']);
      expect((await call(`${server.api}/${bucket}`, { method: 'DELETE', headers: auth })).status).toBe(204);
      expect(await server.store.webhooks.get(bucket, id)).toBeUndefined();
    } finally {
      await receiver.close();
    }
  });
});

describe('webhooks without --webhook-allow-private', () => {
  let server: AppServer;
  beforeAll(async () => {
    server = await startAppServer();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('refuses http://, loopback, private, link-local and metadata addresses', async () => {
    const bucket = await createBucket(server.api, { secret_key: ADMIN });
    for (const url of [
      'http://example.com/h',
      'https://127.0.0.1/h',
      'https://localhost/h',
      'https://10.1.2.3/h',
      'https://192.168.0.1/h',
      'https://169.254.169.254/latest/meta-data',
      'https://[::1]/h',
      'https://[fd00::1]/h',
      'https://[::ffff:127.0.0.1]/h',
    ]) {
      const res = await call(`${server.api}/webhooks/${bucket}`, { method: 'POST', ...json({ url }, auth) });
      expectError(res, 400, 'bad_request');
    }
    expect(
      (await call(`${server.api}/webhooks/${bucket}`, { method: 'POST', ...json({ url: 'https://example.com/h' }, auth) })).status,
    ).toBe(201);
  });
});
