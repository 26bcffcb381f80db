import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_BACKEND } from '../helpers/backend.js';
import { type Answer, call, createBucket, json } from '../helpers/http.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';
import { recountUsage } from '../helpers/usage.js';

/**
 * Usage and change-log rows are written once per batch (SQLite's group commit,
 * PostgreSQL's per-bucket batches, on by default), not once per write. After 3,000 mixed writes
 * from 32 clients at once (on PostgreSQL split across two instances) the counters must still
 * equal a recount of what is stored, and the revisions must be exactly 1..n, each acknowledged once.
 * Batches form from the 32 writes in flight at any moment, so the total only sets how many
 * batches there are: 3,000 writes are about a hundred rounds of them.
 */
const bearer = (credential: string) => ({ authorization: `Bearer ${credential}` });
const WRITES = 3_000;
const CLIENTS = 32;

describe(`usage counters under batched concurrent writes (${TEST_BACKEND})`, () => {
  let a: AppServer;
  let b: AppServer;

  beforeAll(async () => {
    a = await startAppServer();
    b = TEST_BACKEND === 'postgres' ? await startAppServer({ db: a.db }) : a;
  });
  afterAll(async () => {
    if (b !== a) await b?.stop();
    await a?.stop();
  });

  it(`${WRITES.toLocaleString('en-US')} mixed concurrent writes: usage equals a recount, every acknowledged revision is distinct`, {
    timeout: 600_000,
  }, async () => {
    const bucket = await createBucket(a.api, { secret_key: 'admin', write_key: 'w' });
    let seed = 23;
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const keys = Array.from({ length: 40 }, (_, i) => `u/${'k'.repeat(i % 5)}${i}`);
    const statuses = new Map<number, number>();
    const revisions: number[] = [];
    let issued = 0;
    const one = async (server: AppServer) => {
      const key = keys[random(keys.length)]!;
      const kind = random(12);
      const url = `${server.api}/${bucket}/${key}`;
      let answer: Answer;
      if (kind < 5)
        answer = await call(url, {
          method: 'PUT',
          body: 'v'.repeat(random(80)),
          headers: { ...bearer('w'), 'content-type': 'text/plain' },
        });
      else if (kind < 7) answer = await call(url, { method: 'DELETE', headers: bearer('w') });
      else if (kind < 8)
        answer = await call(`${server.api}/${bucket}/n${random(5)}`, {
          method: 'PATCH',
          body: '+7',
          headers: { ...bearer('w'), 'content-type': 'text/plain' },
        });
      else if (kind < 9)
        answer = await call(url, {
          method: 'PUT',
          body: 'new',
          headers: { ...bearer('w'), 'content-type': 'text/plain', 'if-none-match': '*' },
        });
      else {
        const ops = [
          { set: keys[random(keys.length)], value: 'x'.repeat(random(50)) },
          { delete: keys[random(keys.length)] },
          { set: keys[random(keys.length)], value: 'y'.repeat(random(5)) },
        ];
        answer = await call(`${server.api}/${bucket}`, { method: 'POST', ...json({ txn: ops }, bearer('w')) });
      }
      statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
      const revision = answer.headers.get('kvb-revision');
      if (answer.status < 300 && revision !== null) revisions.push(Number(revision));
    };
    await Promise.all(
      Array.from({ length: CLIENTS }, async (_, client) => {
        while (issued < WRITES) {
          issued++;
          await one(client % 2 === 0 ? a : b);
        }
      }),
    );
    // Refused conditions (412) and deletes of absent keys (404) are expected; nothing else.
    expect(
      [...statuses.keys()].every((s) => [200, 204, 404, 412].includes(s)),
      JSON.stringify([...statuses]),
    ).toBe(true);
    expect(statuses.get(200)).toBeGreaterThan(WRITES / 2);

    const counted = await recountUsage(a.db, bucket);
    expect(counted.usage).toEqual({ keys: counted.keys, bytes: counted.bytes });
    const shown = await call(`${b.api}/${bucket}`, { headers: bearer('admin') });
    expect({ keys: Number(shown.headers.get('kvb-usage-keys')), bytes: Number(shown.headers.get('kvb-usage-bytes')) }).toEqual({
      keys: counted.keys,
      bytes: counted.bytes,
    });
    // No two acknowledged writes share a revision.
    expect(new Set(revisions).size).toBe(revisions.length);
  });
});
