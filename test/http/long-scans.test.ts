import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_BACKEND } from '../helpers/backend.js';
import { exportFile } from '../helpers/export-file.js';
import { call, createBucket } from '../helpers/http.js';
import { percentile } from '../helpers/latency.js';
import { type RunningServer, startServer } from '../helpers/server.js';

/**
 * Long reads share the server: a rollback dry run or a folder listing reads page after page, and
 * on SQLite each read is synchronous, so a scan that never gave the event loop a turn held
 * `/health` and every other bucket until it was done (seconds). `/health` is timed against the
 * same run's quiet median while the scans run: a ratio, with generous room for a busy machine.
 */

// PostgreSQL reads are asynchronous: they never held the event loop, and at these sizes the scans
// take minutes there (a query per page or folder). Skipped visibly on that backend.
const onSqlite = TEST_BACKEND === 'sqlite';

// Spawned: the property is the server process's event loop; in this process the test's own
// requests would share that loop (and could starve the scans they time).
let server: RunningServer;
beforeAll(async () => {
  if (onSqlite) server = await startServer();
});
afterAll(async () => {
  await server?.stop();
});

const importKeys = async (bucket: string, keys: string[]) => {
  const res = await call(`${server.api}/${bucket}`, {
    method: 'POST',
    body: exportFile(keys.map((key) => ({ key, type: 'text' as const, value: '"v"' }))),
    headers: { 'content-type': 'application/x-ndjson' },
  });
  expect(res.status, res.text).toBe(200);
  return Number(res.headers.get('kvb-revision'));
};

/** Sequential `/health` latencies (ms): `count` of them, or for as long as `until` is pending. */
async function healthLatencies(count: number, until?: Promise<unknown>): Promise<number[]> {
  let done = false;
  void until?.finally(() => (done = true));
  const result: number[] = [];
  while (until ? !done : result.length < count) {
    const started = performance.now();
    expect((await call(`${server.url}/health`)).status).toBe(200);
    result.push(performance.now() - started);
  }
  return result;
}

/** Runs the scans while timing `/health`; every scan must succeed, and `/health` stay near its quiet median. */
async function expectHealthAnswersDuring(scans: () => Promise<Array<{ status: number; text: string }>>): Promise<void> {
  const quiet = await healthLatencies(20);
  const running = scans();
  const during = await healthLatencies(0, running);
  for (const answer of await running) expect(answer.status, answer.text.slice(0, 300)).toBe(200);
  const figures = `quiet median ${percentile(quiet, 50).toFixed(1)} ms; during: ${during.map((ms) => ms.toFixed(0)).join(', ')} ms`;
  expect(during.length, figures).toBeGreaterThan(0);
  // Between chunks of about 10 ms: a stalled loop answers only once a whole scan is done.
  expect(Math.max(...during), figures).toBeLessThan(percentile(quiet, 50) * 20 + 300);
}

describe.skipIf(!onSqlite)('Long scans give other requests their turn (SQLite, whose reads block)', () => {
  it('four concurrent rollback dry runs over 50,000 keys leave /health answering', { timeout: 180_000 }, async () => {
    const bucket = await createBucket(server.api);
    const target = await importKeys(
      bucket,
      Array.from({ length: 50_000 }, (_, i) => `r/${String(i).padStart(6, '0')}`),
    );
    expect((await call(`${server.api}/${bucket}/r%2Fnew`, { method: 'PUT', body: 'x' })).status).toBe(200);
    await expectHealthAnswersDuring(() =>
      Promise.all(Array.from({ length: 4 }, () => call(`${server.api}/${bucket}?rollback=${target}&dry_run=true`, { method: 'POST' }))),
    );
  });

  it('a folder listing of 10,000 one-key folders leaves /health answering, and lists each folder once', { timeout: 180_000 }, async () => {
    const bucket = await createBucket(server.api);
    await importKeys(
      bucket,
      Array.from({ length: 10_000 }, (_, i) => `f/${String(i).padStart(5, '0')}/k`),
    );
    let listed: string[] = [];
    await expectHealthAnswersDuring(async () => {
      const answers = await Promise.all(
        Array.from({ length: 2 }, () => call(`${server.api}/${bucket}/?prefix=f/&delimiter=/&limit=10000&format=json`)),
      );
      listed = (JSON.parse(answers[0]!.text) as Array<{ prefix: string }>).map((item) => item.prefix);
      return answers;
    });
    expect(listed).toHaveLength(10_000);
    expect(listed.slice(0, 2)).toEqual(['f/00000/', 'f/00001/']);
    expect(new Set(listed).size).toBe(10_000);
  });
});
