import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_BACKEND } from '../helpers/backend.js';
import { type Answer, call, createBucket, expectError, json } from '../helpers/http.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';
import { testClock } from '../helpers/test-clock.js';

/** A key's value as the test's own model holds it: its type and its text. */
interface Value {
  type: string;
  text: string;
}
/** One acknowledged change: the revision it got and what it did to each key (null: absent). */
type Step = { revision: number; changes: Map<string, Value | null> };

/** A small seeded generator, so a failure can be replayed from its seed. */
function random(seed: number) {
  let s = seed >>> 0;
  const next = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { next, int: (n: number) => Math.floor(next() * n), pick: <T>(list: readonly T[]) => list[Math.floor(next() * list.length)]! };
}

const revisionOf = (a: Answer) => Number(a.headers.get('kvb-revision'));
const byteOrder = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));

/** The model's state after every step up to `revision`, key -> value, in byte order. */
function replay(steps: Step[], revision: number, prefix = ''): Array<[string, Value]> {
  const state = new Map<string, Value>();
  for (const step of [...steps].sort((x, y) => x.revision - y.revision)) {
    if (step.revision > revision) break;
    for (const [key, value] of step.changes) {
      if (value === null) state.delete(key);
      else state.set(key, value);
    }
  }
  return [...state].filter(([key]) => key.startsWith(prefix)).sort(([x], [y]) => byteOrder(x, y));
}

/** A listing (`meta=true&values=true&format=jsonl` plus `query`) followed page by page through its cursors. */
async function listAll(url: string, query: string): Promise<Array<[string, Value]>> {
  const rows: Array<[string, Value]> = [];
  let next: string | null = `${url}?meta=true&values=true&format=jsonl&${query}`;
  while (next) {
    const page = await call(next);
    expect(page.status, page.text).toBe(200);
    for (const line of page.text.split('\n').filter(Boolean)) {
      const item = JSON.parse(line) as { key: string; type: string; value: unknown };
      rows.push([item.key, { type: item.type, text: String(item.value) }]);
    }
    const cursor = page.headers.get('kvb-next-cursor');
    next = cursor ? `${url}?meta=true&values=true&format=jsonl&${query}&cursor=${encodeURIComponent(cursor)}` : null;
  }
  return rows;
}

const PREFIXES = ['a/', 'b/', 'c/'] as const;
const COUNTERS = ['n/0', 'n/1', 'n/2'];

/**
 * 2,000 random writes from 8 clients at once (sets, deletes, counters, transactions, sets with an
 * expiry), each recorded with the revision the server acknowledged it with. Concurrent writes are
 * ordered by their revisions, so the model replays them in that order.
 */
async function randomWrites(api: string, seed: number, count = 2000): Promise<Step[]> {
  const rng = random(seed);
  const steps: Step[] = [];
  const key = () => `${rng.pick(PREFIXES)}k${rng.int(25)}`;
  let issued = 0;
  const worker = async () => {
    while (issued < count) {
      issued++;
      const roll = rng.int(100);
      if (roll < 45) {
        const k = key();
        const text = `v${rng.int(1e9)}`;
        const ttl = rng.int(4) === 0 ? '?ttl=86400' : '';
        const r = await call(`${api}${k}${ttl}`, { method: 'PUT', body: text, headers: { 'content-type': 'text/plain' } });
        expect(r.status, r.text).toBe(200);
        steps.push({ revision: revisionOf(r), changes: new Map([[k, { type: 'text', text }]]) });
      } else if (roll < 65) {
        const k = key();
        const r = await call(`${api}${k}`, { method: 'DELETE' });
        if (r.status === 204) steps.push({ revision: revisionOf(r), changes: new Map([[k, null]]) });
        else expect(r.status, r.text).toBe(404);
      } else if (roll < 80) {
        const k = rng.pick(COUNTERS);
        const r = await call(`${api}${k}`, { method: 'PATCH', body: `+${rng.int(100)}` });
        expect(r.status, r.text).toBe(200);
        steps.push({ revision: revisionOf(r), changes: new Map([[k, { type: 'int64', text: r.text }]]) });
      } else {
        // A transaction of distinct keys: its sets and deletes are one revision.
        const keys = [...new Set(Array.from({ length: 2 + rng.int(4) }, key))];
        const changes = new Map<string, Value | null>();
        const txn = keys.map((k) => {
          if (rng.int(3) === 0) {
            changes.set(k, null);
            return { delete: k };
          }
          const text = `t${rng.int(1e9)}`;
          changes.set(k, { type: 'text', text });
          return rng.int(2) === 0 ? { set: k, value: text } : { set: k, value: text, ttl: 86400 };
        });
        const r = await call(api.replace(/\/$/, ''), { method: 'POST', ...json({ txn }) });
        expect(r.status, r.text).toBe(204);
        steps.push({ revision: revisionOf(r), changes });
      }
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  expect(new Set(steps.map((s) => s.revision)).size).toBe(steps.length);
  return steps;
}

describe(`history: reads at a revision, key history, rollback (${TEST_BACKEND})`, () => {
  let server: AppServer;
  const clock = testClock();
  beforeAll(async () => {
    // Expired keys are swept every second (the expiry test moves the clock, then waits for the sweep).
    server = await startAppServer({ config: { sweepIntervalSeconds: 1 }, clock: clock.now });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('after 2,000 random writes, the state at 20 random revisions (keys and listings) equals the replay; a rollback makes the listing equal to the replay as one revision', {
    timeout: 300_000,
  }, async () => {
    const bucket = await createBucket(server.api, { default_ttl: '0' });
    const url = `${server.api}/${bucket}/`;
    const seed = Date.now() % 100000;
    const steps = await randomWrites(url, seed);
    const last = Math.max(...steps.map((s) => s.revision));
    const rng = random(seed + 1);

    for (let i = 0; i < 20; i++) {
      const revision = 1 + rng.int(last);
      const expected = replay(steps, revision);
      const listed = await listAll(url, `rev=${revision}`);
      expect(listed, `seed ${seed}, revision ${revision}`).toEqual(expected);
      // Single keys, present and absent at that revision.
      const state = new Map(expected);
      for (const k of [...PREFIXES.map((p) => `${p}k${rng.int(25)}`), rng.pick(COUNTERS)]) {
        const r = await call(`${url}${k}?rev=${revision}`);
        const want = state.get(k);
        if (want) {
          expect(r.status, `${k} at ${revision}: ${r.text}`).toBe(200);
          expect({ type: r.headers.get('kvb-type'), text: r.text }).toEqual(want);
          const head = await call(`${url}${k}?rev=${revision}`, { method: 'HEAD' });
          expect(head.status).toBe(200);
          expect(head.headers.get('kvb-type')).toBe(want.type);
        } else {
          expectError(r, 404, 'not_found');
          expect((await call(`${url}${k}?rev=${revision}`, { method: 'HEAD' })).status).toBe(404);
        }
      }
    }

    // Reverse, prefix and small pages with cursors, as of one revision.
    const revision = 1 + rng.int(last);
    const reversed = await listAll(url, `rev=${revision}&prefix=b/&reverse=true&limit=1000000`);
    expect(reversed).toEqual(replay(steps, revision, 'b/').reverse());
    const paged: string[] = [];
    let page = await call(`${url}?rev=${revision}&prefix=a/&limit=4&format=json`);
    for (;;) {
      expect(page.status).toBe(200);
      expect(page.headers.get('kvb-revision')).toBe(String(revision));
      paged.push(...(page.json() as string[]));
      const cursor = page.headers.get('kvb-next-cursor');
      if (!cursor) break;
      page = await call(`${url}?rev=${revision}&prefix=a/&limit=4&format=json&cursor=${encodeURIComponent(cursor)}`);
    }
    expect(paged).toEqual(replay(steps, revision, 'a/').map(([k]) => k));

    // An export as of that revision.
    const exported = await call(`${url}?export=true&rev=${revision}`);
    expect(exported.status, exported.text).toBe(200);
    const lines = exported.text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { key?: string; value?: unknown; rev?: number });
    expect(lines[0]!.rev).toBe(revision);
    expect(lines.slice(1, -1).map((l) => [l.key, String(l.value)])).toEqual(replay(steps, revision).map(([k, v]) => [k, v.text]));

    // Rollback of the whole bucket: one new revision, the listing equal to the replay.
    const target = 1 + rng.int(last);
    const before = revisionOf(await call(`${url}?format=json`));
    const dry = await call(`${server.api}/${bucket}?rollback=${target}&dry_run=true`, { method: 'POST' });
    expect(dry.status, dry.text).toBe(200);
    expect(revisionOf(await call(`${url}?format=json`))).toBe(before);
    const rolled = await call(`${server.api}/${bucket}?rollback=${target}`, { method: 'POST' });
    expect(rolled.status, rolled.text).toBe(200);
    const outcome = rolled.json() as { revision: number; changed: number };
    expect(outcome.changed).toBe((dry.json() as { changed: number }).changed);
    expect(outcome.changed).toBeGreaterThan(0);
    expect(outcome.revision).toBe(before + 1);
    expect(revisionOf(rolled)).toBe(before + 1);
    expect(await listAll(url, '')).toEqual(replay(steps, target));

    // The rollback is history too: rolling it back restores the state before it.
    const undo = await call(`${server.api}/${bucket}?rollback=${before}`, { method: 'POST' });
    expect(undo.status, undo.text).toBe(200);
    expect((undo.json() as { revision: number }).revision).toBe(before + 2);
    expect(await listAll(url, '')).toEqual(replay(steps, last));

    // A rollback of one prefix leaves the other prefixes as they were.
    const prefixTarget = 1 + rng.int(last);
    const prefixRolled = await call(`${server.api}/${bucket}?rollback=${prefixTarget}&prefix=a/`, { method: 'POST' });
    expect(prefixRolled.status, prefixRolled.text).toBe(200);
    const after = await listAll(url, '');
    expect(after.filter(([k]) => k.startsWith('a/'))).toEqual(replay(steps, prefixTarget, 'a/'));
    expect(after.filter(([k]) => !k.startsWith('a/'))).toEqual(replay(steps, last).filter(([k]) => !k.startsWith('a/')));
  });

  it("a key's history: newest first, with the operation that made each change, paged by cursor; values with values=true", {
    timeout: 60_000,
  }, async () => {
    const bucket = await createBucket(server.api, { default_ttl: '0' });
    const url = `${server.api}/${bucket}/`;
    const set = (body: string) => call(`${url}h`, { method: 'PUT', body, headers: { 'content-type': 'text/plain' } });
    const r1 = revisionOf(await set('one'));
    const r2 = revisionOf(
      await call(`${server.api}/${bucket}`, {
        method: 'POST',
        ...json({
          txn: [
            { set: 'h', value: 'two' },
            { set: 'other', value: 1 },
          ],
        }),
      }),
    );
    const r3 = revisionOf(await call(`${url}h`, { method: 'DELETE' }));
    const r4 = revisionOf(await call(`${url}h`, { method: 'PATCH', body: '+5' }));
    const r5 = revisionOf(await call(`${server.api}/${bucket}?rollback=${r2}`, { method: 'POST' }));
    const lines = (a: Answer) =>
      a.text
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>);

    const all = await call(`${url}h?history=true&values=true`);
    expect(all.status, all.text).toBe(200);
    expect(all.headers.get('content-type')).toMatch(/^application\/x-ndjson/);
    expect(lines(all).map((l) => [l.rev, l.operation, l.type, l.size, l.value])).toEqual([
      [r5, 'rollback', 'text', 3, 'two'],
      [r4, 'counter', 'int64', 1, 5],
      [r3, 'delete', null, null, null],
      [r2, 'transaction', 'text', 3, 'two'],
      [r1, 'set', 'text', 3, 'one'],
    ]);
    for (const l of lines(all)) expect(Date.parse(String(l.time))).toBeGreaterThan(0);
    // Without values=true no value; pages of 2 follow the cursor to the end.
    const first = await call(`${url}h?history=true&limit=2`);
    expect(lines(first).map((l) => l.rev)).toEqual([r5, r4]);
    expect(lines(first)[0]).not.toHaveProperty('value');
    const cursor = first.headers.get('kvb-next-cursor')!;
    const second = await call(`${url}h?history=true&limit=2&cursor=${cursor}`);
    expect(lines(second).map((l) => l.rev)).toEqual([r3, r2]);
    const third = await call(`${url}h?history=true&limit=2&cursor=${second.headers.get('kvb-next-cursor')}`);
    expect(lines(third).map((l) => l.rev)).toEqual([r1]);
    expect(third.headers.get('kvb-next-cursor')).toBeNull();
    expectError(await call(`${url}h?history=true&cursor=abc`), 400, 'bad_request');
    // A revision not made yet is a 400; a negative or malformed one too.
    expectError(await call(`${url}h?rev=${r5 + 10}`), 400, 'bad_request');
    expectError(await call(`${url}h?rev=-1`), 400, 'bad_request');
    expectError(await call(`${url}?rev=x`), 400, 'bad_request');
  });

  it('an expired key: history shows the expiry; the revision before it still reads the value', async () => {
    const bucket = await createBucket(server.api, { default_ttl: '0' });
    const url = `${server.api}/${bucket}/`;
    // The write's revision is stamped with the real time: the key must still be live then (a
    // minute's TTL leaves a slow machine room between this line and the write's commit).
    clock.set(Date.now());
    const set = await call(`${url}e?ttl=60`, { method: 'PUT', body: 'soon', headers: { 'content-type': 'text/plain' } });
    const rev = revisionOf(set);
    clock.advance(60_000);
    // The event: the next sweep (every second here) has removed the expired key, an `expire` change.
    const expiry = async () =>
      (await call(`${url}e?history=true`)).text
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .find((l) => l.operation === 'expire');
    await expect.poll(expiry, { timeout: 15_000, interval: 100 }).toBeDefined();
    const expired = await expiry();
    expect(expired).toMatchObject({ type: null, size: null });
    expectError(await call(`${url}e?rev=${Number(expired!.rev)}`), 404, 'not_found');
    const then = await call(`${url}e?rev=${rev}`);
    expect(then.status, then.text).toBe(200);
    expect(then.text).toBe('soon');
    expect(then.headers.get('kvb-expires-at')).not.toBeNull();
  });

  it('a POST with a transaction body is never a rollback: its query is refused, not ignored', {
    timeout: 60_000,
  }, async () => {
    const bucket = await createBucket(server.api, { default_ttl: '0' });
    const r = await call(`${server.api}/${bucket}?rollback=0`, { method: 'POST', ...json({ txn: [{ set: 'x', value: 'y' }] }) });
    expectError(r, 400, 'bad_request');
    expect(r.headers.get('kvb-error-detail')).toMatch(/^unknown query parameter rollback: a POST with a body is a transaction/);
    expect((await call(`${server.api}/${bucket}/x`)).status).toBe(404);
    expect((await call(`${server.api}/${bucket}`, { method: 'POST', ...json({ txn: [{ set: 'x', value: 'y' }] }) })).status).toBe(204);
    expect((await call(`${server.api}/${bucket}/x`)).text).toBe('y');
    // A GET of a key with a parameter it does not know is refused, naming it.
    const unknown = await call(`${server.api}/${bucket}/x?unknown=1`);
    expectError(unknown, 400, 'bad_request');
    expect(unknown.headers.get('kvb-error-detail')).toBe('unknown query parameter unknown');
  });

  it('a prefix token reads the past and rolls back only inside its prefix', { timeout: 60_000 }, async () => {
    const bucket = await createBucket(server.api, { default_ttl: '0', secret_key: 's', signing_key: 'k'.repeat(32) });
    const url = `${server.api}/${bucket}/`;
    const admin = { authorization: 'Bearer s' };
    for (const k of ['a/x', 'b/x']) expect((await call(`${url}${k}`, { method: 'PUT', body: '1', headers: admin })).status).toBe(200);
    const minted = await call(`${server.api}/${bucket}/tokens/`, {
      method: 'POST',
      headers: admin,
      body: new URLSearchParams({ prefix: 'a/', permissions: 'read,enumerate,write,delete', ttl: '600' }),
    });
    expect(minted.status, minted.text).toBe(200);
    const token = (minted.json() as { access_token: string }).access_token;
    expect((await call(`${url}a/x?history=true`, { token })).status).toBe(200);
    expect((await call(`${url}a/x?rev=1`, { token })).status).toBe(200);
    expectError(await call(`${url}b/x?history=true`, { token }), 403, 'forbidden');
    expectError(await call(`${url}b/x?rev=2`, { token }), 403, 'forbidden');
    // A listing at a revision stays inside the token's prefix, like a listing of the present.
    expect((await call(`${url}?rev=2&format=json`, { token })).json()).toEqual(['a/x']);
    expectError(await call(`${server.api}/${bucket}?rollback=0&prefix=b/`, { method: 'POST', token }), 403, 'forbidden');
    expectError(await call(`${server.api}/${bucket}?rollback=0`, { method: 'POST', token }), 403, 'forbidden');
    const ok = await call(`${server.api}/${bucket}?rollback=0&prefix=a/`, { method: 'POST', token });
    expect(ok.status, ok.text).toBe(200);
    expect((await call(`${url}a/x`, { headers: admin })).status).toBe(404);
    expect((await call(`${url}b/x`, { headers: admin })).status).toBe(200);
    // A token without delete cannot roll back even its own prefix.
    const readWrite = await call(`${server.api}/${bucket}/tokens/`, {
      method: 'POST',
      headers: admin,
      body: new URLSearchParams({ prefix: 'a/', permissions: 'read,write', ttl: '600' }),
    });
    const weak = (readWrite.json() as { access_token: string }).access_token;
    expectError(await call(`${server.api}/${bucket}?rollback=1&prefix=a/`, { method: 'POST', token: weak }), 403, 'forbidden');
  });
});

describe(`history retention: pruning keeps the state at the floor (${TEST_BACKEND})`, () => {
  let server: AppServer;
  const clock = testClock();
  beforeAll(async () => {
    // A one-second window pruned every second: the floor rises once the test moves the clock past it.
    server = await startAppServer({ config: { watchRetentionSeconds: 1, sweepIntervalSeconds: 1 }, clock: clock.now });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('below the floor a read is 410 gone naming the floor; at and above it the state equals the replay', { timeout: 120_000 }, async () => {
    const bucket = await createBucket(server.api, { default_ttl: '0' });
    const url = `${server.api}/${bucket}/`;
    const steps = await randomWrites(url, 7, 300);
    const last = Math.max(...steps.map((s) => s.revision));
    // Every write is now more than the retention old: changes are stamped with the real time, and
    // the server's is two seconds past it (the test clock stands still, and a change made in the very
    // millisecond of a one-second shift would sit exactly at the cutoff, never below it). The event:
    // the next prune (every second) has raised the floor.
    clock.set(Date.now() + 2000);
    const floorOf = async () => Number((await call(`${server.api}/${bucket}`)).headers.get('kvb-history-floor'));
    await expect.poll(floorOf, { timeout: 15_000, interval: 100 }).toBe(last);
    const floor = await floorOf();
    for (const revision of [floor, Math.floor((floor + last) / 2)])
      expect(await listAll(url, `rev=${revision}`)).toEqual(replay(steps, revision));
    const below = await call(`${url}a/k1?rev=${floor - 1}`);
    expectError(below, 410, 'gone');
    expect(below.headers.get('kvb-history-floor')).toBe(String(floor));
    expect(below.text).toContain(`revision ${floor}`);
    expectError(await call(`${url}?rev=${floor - 1}`), 410, 'gone');
    expectError(await call(`${server.api}/${bucket}?rollback=${floor - 1}`, { method: 'POST' }), 410, 'gone');
    // New writes after compaction: the compacted state is still the base they build on.
    const put = await call(`${url}a/new`, { method: 'PUT', body: 'n', headers: { 'content-type': 'text/plain' } });
    const rev = revisionOf(put);
    steps.push({ revision: rev, changes: new Map([['a/new', { type: 'text', text: 'n' }]]) });
    expect(await listAll(url, `rev=${rev}`)).toEqual(replay(steps, rev));
    expect(await listAll(url, `rev=${floor}`)).toEqual(replay(steps, floor));
    // Rolling back to the floor brings back exactly the state there.
    const rolled = await call(`${server.api}/${bucket}?rollback=${floor}`, { method: 'POST' });
    expect(rolled.status, rolled.text).toBe(200);
    expect(await listAll(url, '')).toEqual(replay(steps, floor));
  });
});

describe(`rollback is counted against quotas (${TEST_BACKEND})`, () => {
  let server: AppServer;
  beforeAll(async () => {
    server = await startAppServer({ config: { maxKeysPerBucket: 3 } });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('a rollback that would take the bucket over its key quota is refused whole (507), nothing written', { timeout: 60_000 }, async () => {
    const bucket = await createBucket(server.api, { default_ttl: '0' });
    const url = `${server.api}/${bucket}/`;
    const put = async (key: string) => expect((await call(`${url}${key}`, { method: 'PUT', body: 'v' })).status).toBe(200);
    await put('a/1');
    await put('a/2');
    await put('b/1');
    const full = revisionOf(await call(`${url}?format=json`));
    expect((await call(`${url}a/1`, { method: 'DELETE' })).status).toBe(204);
    await put('c/1');
    const before = revisionOf(await call(`${url}?format=json`));
    // Bringing a/1 back beside c/1 makes 4 keys.
    expectError(await call(`${server.api}/${bucket}?rollback=${full}&prefix=a/`, { method: 'POST' }), 507, 'insufficient_storage');
    expect(revisionOf(await call(`${url}?format=json`))).toBe(before);
    expect((await call(`${url}?format=json`)).json()).toEqual(['a/2', 'b/1', 'c/1']);
    // The whole bucket back to that revision deletes c/1 in the same revision: within the quota.
    const whole = await call(`${server.api}/${bucket}?rollback=${full}`, { method: 'POST' });
    expect(whole.status, whole.text).toBe(200);
    expect((await call(`${url}?format=json`)).json()).toEqual(['a/1', 'a/2', 'b/1']);
  });
});
