import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { WebhookDeliverer } from '../../src/server/webhooks/webhook-deliverer.js';
import { deliveryOptions } from '../../src/server/webhooks/webhook-delivery.js';
import { StorageUnavailableError } from '../../src/store/storage-errors.js';
import type { Change, Store } from '../../src/store/store.js';
import { testWebhook } from '../helpers/webhook-fixture.js';

const settings = { webhookAllowPrivate: true, webhookTimeoutSeconds: 3, webhookRetrySeconds: 600, webhookLeaseMs: 6000 };
const LEASE_MS = 6000;

interface Options {
  claimTaken: boolean;
  readMs: number;
  /** How many times storing the acknowledged position first finds the database out of reach (nothing sent). */
  unreachable?: number;
}

/**
 * A delivery whose reads took most of its lease: the lease is renewed before the request, so
 * that the receiver's acknowledgement is stored while it is still held (another instance taking
 * it over in between would send the batch again). `steps` records what reached the store and the
 * receiver, in order; the store's clock moves by `readMs` while the change log is read.
 */
function setUp(options: Options) {
  let now = 1_000_000;
  let unreachable = options.unreachable ?? 0;
  const steps: string[] = [];
  let settled!: () => void;
  const done = new Promise<void>((resolve) => (settled = resolve));
  // Held by this server, renewed just now (as a delivery's outcome renews it).
  const hook = testWebhook({ prefix: '', holder: 'this-server', leaseUntil: now + LEASE_MS });
  const store = {
    flags: { shared: false },
    changes: {
      onCommit: () => {},
      bounds: async () => ({ floor: 0, watchFloor: 0, revision: 1 }),
      read: async () => {
        now += options.readMs;
        return [{ revision: 1, key: 'k', kind: 'delete' } as unknown as Change];
      },
    },
    webhooks: {
      all: async () => [{ ...hook, bucketRevision: 1 }],
      deliverable: async () => hook,
      claim: async () => {
        steps.push(`claim ${options.claimTaken ? 'taken' : 'refused'}`);
        if (!options.claimTaken) settled();
        return options.claimTaken;
      },
      settle: async (_id: string, _holder: string, outcome: { position?: number }) => {
        if (unreachable-- > 0) {
          steps.push('settle unreachable');
          throw new StorageUnavailableError(new Error('timeout exceeded when trying to connect'));
        }
        steps.push(`settle ${outcome.position}`);
        hook.position = outcome.position ?? hook.position;
        settled();
        return true;
      },
      onSubscribed: () => {},
      release: async () => {},
    },
  } as unknown as Store;
  return { store, steps, done, hook, clock: () => now };
}

describe('a webhook delivery under its lease', () => {
  let stop: (() => Promise<void>) | undefined;
  afterEach(async () => stop?.());

  async function deliver(options: Options) {
    const fake = setUp(options);
    const receiver = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        fake.steps.push('request');
        res.end('ok');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    (fake.hook as { url: string }).url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/`;
    const log = { warn() {}, info() {} } as unknown as FastifyBaseLogger;
    const deliverer = new WebhookDeliverer(fake.store, fake.clock, log, deliveryOptions(settings)).start();
    stop = async () => {
      await deliverer.stop();
      await new Promise((resolve) => receiver.close(resolve));
    };
    await fake.done;
    await deliverer.stop();
    return fake;
  }

  it('sends at once on a lease that covers the request and the storing of its outcome', async () => {
    const { steps, hook } = await deliver({ claimTaken: true, readMs: 0 });
    expect(steps).toEqual(['request', 'settle 1']);
    expect(hook.position).toBe(1);
  });

  it('renews a lease the reads left too short for the request before sending on it', async () => {
    const { steps, hook } = await deliver({ claimTaken: true, readMs: LEASE_MS / 2 });
    expect(steps).toEqual(['claim taken', 'request', 'settle 1']);
    expect(hook.position).toBe(1);
  });

  it('sends nothing when that renewal finds another holder', async () => {
    const { steps, hook } = await deliver({ claimTaken: false, readMs: LEASE_MS / 2 });
    expect(steps).toEqual(['claim refused']);
    expect(hook.position).toBe(0);
  });

  it('stores an acknowledged position the database could not take at first, without sending the batch again', async () => {
    const { steps, hook } = await deliver({ claimTaken: true, readMs: 0, unreachable: 2 });
    expect(steps).toEqual(['request', 'settle unreachable', 'settle unreachable', 'settle 1']);
    expect(hook.position).toBe(1);
  });
});
