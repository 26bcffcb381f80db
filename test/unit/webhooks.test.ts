import { lookup as dnsLookup } from 'node:dns';
import http from 'node:http';
import type { AddressInfo, LookupFunction, Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import type { Change } from '../../src/store/store.js';
import type { Webhook } from '../../src/store/webhook-types.js';
import { isPrivateAddress, publicOnlyLookup } from '../../src/server/webhooks/webhook-address.js';
import { MAX_BATCH_EVENTS, nextBatch } from '../../src/server/webhooks/webhook-batch.js';
import { lagDetail } from '../../src/server/webhooks/webhook-health.js';
import { WebhookConnections, postWebhook } from '../../src/server/webhooks/webhook-post.js';
import { BASE_DELAY_MS, MAX_DELAY_MS, afterFailure } from '../../src/server/webhooks/webhook-retry.js';
import { signDelivery, verifyDelivery } from '../../src/server/webhooks/webhook-signature.js';
import { webhookUrlProblem } from '../../src/server/webhooks/webhook-url.js';
import { testWebhook } from '../helpers/webhook-fixture.js';

const hook = (over: Partial<Webhook> = {}): Webhook => testWebhook(over);
const set = (revision: number, key: string): Change => ({
  revision,
  key,
  kind: 'set',
  value: { type: 'text', data: Buffer.from('v') },
  expiresAt: null,
});

describe('webhook signature', () => {
  it('verifies with the secret and time it was made with, and nothing else', () => {
    const header = signDelivery('s1', 1_800_000_000, '{"a":1}');
    expect(header).toMatch(/^t=1800000000,v1=[0-9a-f]{64}$/);
    expect(verifyDelivery('s1', header, '{"a":1}', 1_800_000_010)).toBe(true);
    expect(verifyDelivery('s2', header, '{"a":1}', 1_800_000_010)).toBe(false);
    expect(verifyDelivery('s1', header, '{"a":2}', 1_800_000_010)).toBe(false);
    expect(verifyDelivery('s1', header, '{"a":1}', 1_800_001_000)).toBe(false);
  });
});

describe('webhook backoff', () => {
  it('doubles its bound with each failure, jittered, capped, and pauses past the retry bound', () => {
    const now = 1_000_000;
    const first = afterFailure({ attempts: 0, failingSince: null }, now, 86_400_000, 'HTTP 500', () => 0.99);
    expect(first).toMatchObject({ attempts: 1, failingSince: now, pausedReason: null });
    expect(first.nextAttemptAt - now).toBeLessThanOrEqual(BASE_DELAY_MS);
    const tenth = afterFailure({ attempts: 9, failingSince: now }, now, 86_400_000, 'x', () => 0.99);
    expect(tenth.nextAttemptAt - now).toBeGreaterThan(256 * BASE_DELAY_MS);
    const late = afterFailure({ attempts: 40, failingSince: now }, now, 86_400_000, 'x', () => 1);
    expect(late.nextAttemptAt - now).toBeLessThanOrEqual(MAX_DELAY_MS);
    const low = afterFailure({ attempts: 3, failingSince: now }, now, 86_400_000, 'x', () => 0);
    expect(low.nextAttemptAt - now).toBe(BASE_DELAY_MS / 2);
    // The last try comes at the bound, not after it; failing then pauses.
    const near = afterFailure({ attempts: 20, failingSince: now }, now + 86_399_000, 86_400_000, 'x', () => 1);
    expect(near.nextAttemptAt).toBe(now + 86_400_000);
    const paused = afterFailure({ attempts: 21, failingSince: now }, now + 86_400_000, 86_400_000, 'HTTP 503', () => 0.5);
    expect(paused.pausedReason).toMatch(/failing for 86400 s: HTTP 503/);
  });
});

describe('webhook batches', () => {
  it('keeps the prefix and kinds, whole revisions, and moves past revisions with nothing to send', () => {
    const rows = [set(1, 'p/a'), set(2, 'q/a'), set(3, 'p/b'), { ...set(3, 'p/c'), kind: 'delete' as const }];
    const batch = nextBatch('b', hook({ kinds: ['set'] }), rows, 5, true);
    expect(batch.events.map((e) => JSON.parse(e).key)).toEqual(['p/a', 'p/b']);
    expect(JSON.parse(batch.events[0]!).id).toBe('b:1:p/a');
    expect(batch).toMatchObject({ firstRevision: 1, upTo: 5 });
    expect(nextBatch('b', hook(), [set(2, 'q/a')], 2, true)).toEqual({ events: [], firstRevision: 0, upTo: 2 });
    // Not all read up to there: stand at the last revision read.
    expect(nextBatch('b', hook(), [set(2, 'q/a')], 9, false).upTo).toBe(2);
  });

  it('stops at a revision boundary past the size bound', () => {
    const rows = Array.from({ length: MAX_BATCH_EVENTS + 10 }, (_, i) => set(i + 1, `p/${i}`));
    const batch = nextBatch('b', hook(), rows, MAX_BATCH_EVENTS + 10, true);
    expect(batch.events.length).toBe(MAX_BATCH_EVENTS);
    expect(batch.upTo).toBe(MAX_BATCH_EVENTS);
  });
});

describe('webhook addresses', () => {
  it('refuses private, loopback, link-local and metadata addresses, IPv4 inside IPv6 too', () => {
    for (const a of [
      '127.0.0.1',
      '10.0.0.1',
      '172.16.5.4',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '::1',
      '::',
      'fe80::1',
      'fd12::1',
      '::ffff:10.0.0.1',
    ]) {
      expect(isPrivateAddress(a), a).toBe(true);
    }
    for (const a of ['93.184.216.34', '8.8.8.8', '2606:4700::1111', '::ffff:8.8.8.8']) expect(isPrivateAddress(a), a).toBe(false);
    expect(webhookUrlProblem('https://hooks.example.com/x', false)).toBeUndefined();
    expect(webhookUrlProblem('https://user:pw@hooks.example.com/x', false)).toMatch(/user name/);
    expect(webhookUrlProblem('http://127.0.0.1:9/x', true)).toBeUndefined();
  });

  it('refuses a name that resolves to a private address when it connects (not only when added)', async () => {
    let reached = false;
    const server = http.createServer((_req, res) => {
      reached = true;
      res.end('ok');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const refused = await postWebhook(new URL(`http://localhost:${port}/`), '{}', { timeoutMs: 2000, allowPrivate: false, headers: {} });
      expect(refused).toMatchObject({ status: null, error: expect.stringMatching(/private address/) });
      expect(reached).toBe(false);
      const literal = await postWebhook(new URL(`http://127.0.0.1:${port}/`), '{}', { timeoutMs: 2000, allowPrivate: false, headers: {} });
      expect(literal).toMatchObject({ status: null, error: expect.stringMatching(/private address/) });
      const allowed = await postWebhook(new URL(`http://127.0.0.1:${port}/`), '{}', { timeoutMs: 2000, allowPrivate: true, headers: {} });
      expect(allowed).toEqual({ status: 200, excerpt: 'ok' });
    } finally {
      server.close();
    }
  });

  it('keeps a connection for the next delivery, and checks the address again on every new connection (DNS rebinding)', async () => {
    const sockets: Socket[] = [];
    const server = http.createServer((_req, res) => res.end('ok'));
    server.on('connection', (socket) => sockets.push(socket));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    // The name answers a "public" address the first time, then a private one: a rebinding name.
    let lookups = 0;
    const rebinding: LookupFunction = (_name, options, callback) => {
      lookups++;
      if (lookups === 1) dnsLookup('127.0.0.1', options, callback);
      else publicOnlyLookup('localhost', options, callback);
    };
    const connections = new WebhookConnections(rebinding);
    const url = new URL(`http://rebind.test:${port}/`);
    const post = () =>
      postWebhook(url, '{}', { timeoutMs: 2000, allowPrivate: false, headers: {}, agent: connections.agentFor('wh_1', url) });
    try {
      expect(await post()).toEqual({ status: 200, excerpt: 'ok' });
      expect(await post()).toEqual({ status: 200, excerpt: 'ok' });
      expect({ lookups, connections: sockets.length }).toEqual({ lookups: 1, connections: 1 });
      // The receiver closes the kept connection: the next delivery's new one resolves the name again, and is refused.
      server.closeIdleConnections();
      const refused = await post();
      expect(refused).toMatchObject({ status: null, error: expect.stringMatching(/private address/) });
      expect({ lookups, connections: sockets.length }).toEqual({ lookups: 2, connections: 1 });
    } finally {
      connections.close();
      server.close();
    }
  });

  it("closes a webhook's kept connection once it is no longer active (removed or paused)", async () => {
    const closed: boolean[] = [];
    const server = http.createServer((_req, res) => res.end('ok'));
    server.on('connection', (socket) => {
      closed.push(false);
      const n = closed.length - 1;
      socket.on('close', () => (closed[n] = true));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const connections = new WebhookConnections(undefined);
    const url = new URL(`http://127.0.0.1:${port}/`);
    try {
      const agent = connections.agentFor('wh_1', url);
      expect(await postWebhook(url, '{}', { timeoutMs: 2000, allowPrivate: true, headers: {}, agent })).toEqual({
        status: 200,
        excerpt: 'ok',
      });
      expect(closed).toEqual([false]);
      connections.keepOnly(new Set(['wh_2']));
      await expect.poll(() => closed).toEqual([true]);
      expect(connections.size).toBe(0);
    } finally {
      connections.close();
      server.close();
    }
  });

  it('follows no redirect: a 3xx is a failure, not the answer of another URL', async () => {
    const server = http.createServer((_req, res) => res.writeHead(302, { location: 'http://127.0.0.1:1/' }).end());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      expect(await postWebhook(new URL(`http://127.0.0.1:${port}/`), '{}', { timeoutMs: 2000, allowPrivate: true, headers: {} })).toEqual({
        status: 302,
        excerpt: '',
      });
    } finally {
      server.close();
    }
  });
});

describe('webhook lag in /health', () => {
  it('counts the webhooks waiting past the threshold, and the longest wait', () => {
    expect(lagDetail([null, 1000], 50_000, 60)).toBeUndefined();
    expect(lagDetail([null, 1000, 30_000], 100_000, 60)).toEqual({ lagging: 2, max_lag_seconds: 99 });
  });
});
