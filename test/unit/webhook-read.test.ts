import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { WebhookDeliverer } from '../../src/server/webhooks/webhook-deliverer.js';
import { deliveryOptions } from '../../src/server/webhooks/webhook-delivery.js';
import { wholeRevisions } from '../../src/store/change-row.js';
import type { Change, Store } from '../../src/store/store.js';
import type { ScannedWebhook } from '../../src/store/webhook-types.js';
import { testWebhook } from '../helpers/webhook-fixture.js';

const log = { warn() {}, info() {} } as unknown as FastifyBaseLogger;
const LAST = 251;

/** A change log of one row per revision: `r/a` at 1, `r/b` at the last, keys outside the prefix between. */
const changeLog: Change[] = Array.from({ length: LAST }, (_, i) => {
  const revision = i + 1;
  const key = revision === 1 ? 'r/a' : revision === LAST ? 'r/b' : `x/${revision}`;
  return { revision, key, kind: 'delete' } as unknown as Change;
});

/** The parts of a store a delivery touches; its change log is read as the engines read it (whole revisions). */
function fakeStore(hook: ScannedWebhook) {
  return {
    flags: { shared: false },
    changes: {
      onCommit: () => {},
      bounds: async () => ({ floor: 0, watchFloor: 0, revision: LAST }),
      read: async (_bucket: string, after: number, upTo: number, limit: number) => {
        const rows = changeLog.filter((c) => c.revision > after && c.revision <= upTo).slice(0, limit);
        return wholeRevisions(rows, limit, async (revision) => changeLog.filter((c) => c.revision === revision));
      },
    },
    webhooks: {
      all: async () => [{ ...hook, bucketRevision: LAST }],
      deliverable: async () => hook,
      claim: async () => true,
      acknowledge: async (_id: string, _holder: string, position: number) => {
        hook.position = Math.max(hook.position, position);
        return true;
      },
      settle: async (_id: string, _holder: string, outcome: { position?: number }) => {
        if (outcome.position !== undefined) hook.position = Math.max(hook.position, outcome.position);
        return true;
      },
      onSubscribed: () => {},
      release: async () => {},
    },
  } as unknown as Store;
}

describe('a delivery reading a backlog of changes mostly outside its prefix', () => {
  let stop: (() => Promise<void>) | undefined;
  afterEach(async () => stop?.());

  it('sends every change under the prefix before its position passes them', async () => {
    const keys: string[] = [];
    const receiver = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c));
      req.on('end', () => {
        for (const e of (JSON.parse(body) as { events: Array<{ key: string }> }).events) keys.push(e.key);
        res.end('ok');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/`;
    const hook = testWebhook({ url, prefix: 'r/' });
    const settings = { webhookAllowPrivate: true, webhookTimeoutSeconds: 2, webhookRetrySeconds: 600 };
    const deliverer = new WebhookDeliverer(fakeStore(hook), () => Date.now(), log, deliveryOptions(settings)).start();
    stop = async () => {
      await deliverer.stop();
      await new Promise((resolve) => receiver.close(resolve));
    };
    for (let i = 0; i < 100 && hook.position < LAST; i++) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(hook.position).toBe(LAST);
    expect(keys).toEqual(['r/a', 'r/b']);
  });
});
