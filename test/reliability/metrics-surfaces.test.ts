import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_BACKEND } from '../helpers/backend.js';
import { call, createBucket, expectError } from '../helpers/http.js';
import { type RunningServer, startServer } from '../helpers/server.js';
import { logged } from '../helpers/logged.js';

/**
 * /metrics kept off the API port (--metrics-listen) and/or behind a bearer token
 * (--metrics-token); the real scrape and the shipped alert rules checked by Prometheus's own
 * promtool (Debian package `prometheus`). Runs on SQLite and PostgreSQL.
 */
const RULES = new URL('../../contrib/prometheus/kvb-alerts.yml', import.meta.url).pathname;
const promtool = spawnSync('promtool', ['--version'], { stdio: 'pipe' }).status === 0;
const noPromtool = promtool ? '' : ': SKIPPED, promtool is not installed (apt-get install prometheus)';

describe('--metrics-listen and --metrics-token', () => {
  let server: RunningServer;
  let metricsUrl: string;
  beforeAll(async () => {
    server = await startServer({ args: ['--metrics-listen', '127.0.0.1:0'], env: { KVB_METRICS_TOKEN: 'scrape-secret' } });
    metricsUrl = (await logged(server, /metrics listening on (http:\/\/127\.0\.0\.1:\d+)/))[1]!;
  });
  afterAll(async () => {
    await server.stop();
  });

  it('the API port no longer serves /metrics; the metrics listener does, to the token only', async () => {
    expectError(await call(`${server.url}/metrics`), 404, 'not_found');
    expectError(await call(`${server.url}/metrics`, { token: 'scrape-secret' }), 404, 'not_found');
    const anonymous = await call(`${metricsUrl}/metrics`);
    expectError(anonymous, 401, 'unauthorized');
    expect(anonymous.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expectError(await call(`${metricsUrl}/metrics`, { token: 'wrong' }), 401, 'unauthorized');
    const scraped = await call(`${metricsUrl}/metrics`, { token: 'scrape-secret' });
    expect(scraped.status).toBe(200);
    expect(scraped.text).toContain('# TYPE kvb_http_requests_total counter');
    // Probes work there too, as on the API port; nothing else is served.
    expect((await call(`${metricsUrl}/health`)).json()).toMatchObject({ status: 'ok' });
    expect((await call(`${metricsUrl}/ready`)).status).toBe(200);
    expectError(await call(`${metricsUrl}/api/v1/`), 404, 'not_found');
    expect((await call(`${server.url}/ready`)).status).toBe(200);
  });

  it.skipIf(!promtool)(`a real scrape passes promtool check metrics (names, units, _total only on counters)${noPromtool}`, async () => {
    // Some traffic first, so every labelled series has samples.
    const bucket = await createBucket(server.api);
    await call(`${server.api}/${bucket}/k`, { method: 'PUT', body: 'v' });
    await call(`${server.api}/${bucket}/k`);
    await call(`${server.api}/${bucket}/absent`);
    const text = (await call(`${metricsUrl}/metrics`, { token: 'scrape-secret' })).text;
    const checked = spawnSync('promtool', ['check', 'metrics'], { input: text, stdio: 'pipe', encoding: 'utf8' });
    expect(`${checked.stdout}${checked.stderr}`.trim()).toBe('');
    expect(checked.status).toBe(0);
    if (TEST_BACKEND === 'postgres') expect(text).toContain('kvb_pg_pool_connections');
  });

  it.skipIf(!promtool)(`the shipped alert rules pass promtool check rules and name only metrics kvb exports${noPromtool}`, async () => {
    expect(execFileSync('promtool', ['check', 'rules', RULES], { encoding: 'utf8', stdio: 'pipe' })).toMatch(/SUCCESS: \d+ rules found/);
    const text = (await call(`${metricsUrl}/metrics`, { token: 'scrape-secret' })).text;
    const exported = new Set([...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!));
    const named = new Set(
      [...readFileSync(RULES, 'utf8').matchAll(/\b(kvb_[a-z_]+)/g)].map((m) => m[1]!.replace(/_(bucket|count|sum)$/, '')),
    );
    const unknown = [...named].filter((name) => !exported.has(name) && !(name.startsWith('kvb_pg_') && TEST_BACKEND !== 'postgres'));
    expect(unknown).toEqual([]);
  });
});

describe('--metrics-token alone keeps /metrics on the API port, behind the token', () => {
  it('401 without the token, 200 with it', async () => {
    const server = await startServer({ args: ['--metrics-token', 'tok'] });
    try {
      expectError(await call(`${server.url}/metrics`), 401, 'unauthorized');
      expect((await call(`${server.url}/metrics`, { token: 'tok' })).status).toBe(200);
    } finally {
      await server.stop();
    }
  });
});
