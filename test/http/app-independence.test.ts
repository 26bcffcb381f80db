import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AppServer, startAppServer } from '../helpers/app-server.js';
import { TEST_BACKEND } from '../helpers/backend.js';
import { call, createBucket } from '../helpers/http.js';

/**
 * Two apps in one process share nothing a request changes: each has its own slow-hash queue (its
 * verification limits) and its own metrics. With no wait allowed, a verification that would have
 * to queue is refused at once: a flood on one app refuses some of its own, and none on the other.
 */
let flooded: AppServer;
let quiet: AppServer;
beforeAll(async () => {
  // No wait allowed on either: a verification that would have to queue is refused at once.
  [flooded, quiet] = await Promise.all([
    startAppServer({ config: { verificationWaitSeconds: 0 } }),
    startAppServer({ config: { verificationWaitSeconds: 0 } }),
  ]);
});
afterAll(async () => {
  await Promise.all([flooded?.stop(), quiet?.stop()]);
});

const sample = (metrics: string, name: string) => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(metrics)?.[1]);
const metricsOf = async (server: AppServer) => (await call(`${server.url}/metrics`)).text;

describe(`two apps in one process (${TEST_BACKEND})`, () => {
  it("a flood of unseen credentials on one app neither queues nor refuses the other's first contact", async () => {
    const [floodedBucket, quietBucket] = await Promise.all(
      [flooded, quiet].map((server) => createBucket(server.api, { secret_key: 'admin' })),
    );
    // More at once than the machine verifies at once: the rest would queue, and may not.
    const guesses = Array.from({ length: 16 }, (_, i) => call(`${flooded.api}/${floodedBucket}/k`, { token: `guess-${i}` }));
    const firstContact = call(`${quiet.api}/${quietBucket}/k`, { token: 'admin' });
    const statuses = (await Promise.all(guesses)).map((answer) => answer.status);
    expect(statuses.filter((status) => status === 429).length).toBeGreaterThan(0);
    expect(statuses.every((status) => status === 429 || status === 401)).toBe(true);
    expect((await firstContact).status).toBe(404); // verified (no such key yet), not refused

    const [floodedMetrics, quietMetrics] = await Promise.all([metricsOf(flooded), metricsOf(quiet)]);
    expect(sample(floodedMetrics, 'kvb_credential_verifications_refused_total')).toBe(statuses.filter((status) => status === 429).length);
    expect(sample(quietMetrics, 'kvb_credential_verifications_refused_total')).toBe(0);
    // Each app counts its own requests only: the guesses' answers are in one registry, not the other.
    expect(floodedMetrics).toMatch(/^kvb_http_requests_total\{[^}]*status="429"[^}]*\} [1-9]/m);
    expect(quietMetrics).not.toMatch(/status="4(01|29)"/);
  });
});
