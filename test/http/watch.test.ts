import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_BACKEND } from '../helpers/backend.js';
import { exportFile, manyKeys } from '../helpers/export-file.js';
import { call, createBucket, json } from '../helpers/http.js';
import { type AppServer, startAppServer } from '../helpers/app-server.js';
import { startServer } from '../helpers/server.js';

/** One message of a watch stream: an SSE message (one transaction), or one JSONL line. */
interface Message {
  id?: number;
  event: string;
  data: Array<Record<string, unknown>>;
}

interface Watch {
  messages: Message[];
  /** Resolves when the server ends the stream (or it is aborted). */
  ended: Promise<void>;
  status: number;
  abort(): void;
  waitFor(predicate: (m: Message[]) => boolean, ms?: number): Promise<void>;
}

/** Opens a watch stream and parses it as it arrives. */
async function openWatch(url: string, headers: Record<string, string> = {}): Promise<Watch> {
  const controller = new AbortController();
  const res = await fetch(url, { headers, signal: controller.signal });
  const messages: Message[] = [];
  /** Called after each chunk is parsed (and once more when the stream ends). */
  const listeners = new Set<() => void>();
  const sse = (res.headers.get('content-type') ?? '').startsWith('text/event-stream');
  let buffer = '';
  const parse = () => {
    const separator = sse ? '\n\n' : '\n';
    let at: number;
    while ((at = buffer.indexOf(separator)) !== -1) {
      const block = buffer.slice(0, at);
      buffer = buffer.slice(at + separator.length);
      if (!sse) {
        const obj = JSON.parse(block) as Record<string, unknown>;
        messages.push({ event: String(obj.type), data: [obj] });
        continue;
      }
      const m: Message = { event: 'message', data: [] };
      for (const line of block.split('\n')) {
        if (line.startsWith('id: ')) m.id = Number(line.slice(4));
        else if (line.startsWith('event: ')) m.event = line.slice(7);
        else if (line.startsWith('data: ')) m.data.push(JSON.parse(line.slice(6)) as Record<string, unknown>);
      }
      messages.push(m);
    }
  };
  const ended = (async () => {
    if (!res.body) return;
    const decoder = new TextDecoder();
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        parse();
        for (const listener of listeners) listener();
      }
    } catch {
      // aborted
    }
  })().finally(() => {
    for (const listener of listeners) listener();
  });
  return {
    messages,
    ended,
    status: res.status,
    abort: () => controller.abort(),
    // Checked as each chunk arrives, not on a timer; `ms` only bounds a stream that stalls.
    waitFor(predicate, ms = 15_000) {
      return new Promise<void>((resolve, reject) => {
        const check = () => {
          if (!predicate(messages)) return;
          done();
          resolve();
        };
        const timer = setTimeout(() => {
          done();
          reject(new Error(`timed out; last messages: ${JSON.stringify(messages.slice(-3))}`));
        }, ms);
        const done = () => {
          clearTimeout(timer);
          listeners.delete(check);
        };
        listeners.add(check);
        check();
      });
    },
  };
}

const events = (messages: Message[]) => messages.flatMap((m) => m.data);
const changes = (messages: Message[]) => events(messages).filter((e) => ['set', 'delete', 'expire'].includes(String(e.type)));
/** The highest revision a watcher is known to be caught up to (events, sync and progress). */
const caughtUp = (messages: Message[]) => Math.max(-1, ...events(messages).map((e) => Number(e.rev ?? -1)));
const revisionOf = (headers: Headers) => Number(headers.get('kvb-revision') ?? headers.get('etag')?.replace(/"/g, ''));

describe(`watch: the change feed (${TEST_BACKEND}${TEST_BACKEND === 'postgres' ? ', writers on A, watchers on A and B' : ''})`, () => {
  let a: AppServer;
  /** On PostgreSQL a second instance on the same schema; on SQLite the same server. */
  let b: AppServer;
  const config = { watchProgressMs: 300, sweepIntervalSeconds: 1, watchRetentionSeconds: 3 };

  beforeAll(async () => {
    a = await startAppServer({ config });
    b = TEST_BACKEND === 'postgres' ? await startAppServer({ db: a.db, config }) : a;
  });
  afterAll(async () => {
    if (b !== a) await b?.stop();
    await a?.stop();
  });

  it('2,000 mixed operations from 32 clients: each watcher gets exactly the committed changes under its prefix, in order, transactions grouped', {
    timeout: 300_000,
  }, async () => {
    const bucket = await createBucket(a.api);
    const api = (s: AppServer) => `${s.api}/${bucket}/`;
    const w1 = await openWatch(`${api(a)}?watch=true&prefix=a/&format=jsonl`);
    const w2 = await openWatch(`${api(b)}?watch=true&prefix=b/&values=true`, { accept: 'application/x-ndjson' });
    const w3 = await openWatch(`${api(b)}?watch=true&values=true`, { accept: 'text/event-stream' });
    for (const w of [w1, w2, w3]) await w.waitFor((m) => m.some((x) => x.event === 'sync'));
    expect(w3.messages[0]).toMatchObject({ event: 'sync', id: 0, data: [{ type: 'sync', rev: 0 }] });

    /** Acknowledged revision -> the changes it made (key -> expected event). */
    const expected = new Map<number, Map<string, Record<string, unknown>>>();
    const ttlKeys = new Set<string>();
    const ack = (rev: number, list: Array<Record<string, unknown>>) => {
      if (expected.has(rev)) throw new Error(`revision ${rev} acknowledged twice`);
      expected.set(rev, new Map(list.map((e) => [String(e.key), { ...e, rev }])));
    };
    // What is checked comes from the 32 clients writing at once, not from the total: 2,000 is about
    // 60 writes a client, 200 transactions and 200 keys that expire.
    const OPERATIONS = 2000;
    let next = 0;
    const prefixes = ['a/', 'b/', 'c/'];
    const worker = async (client: number) => {
      for (;;) {
        const i = next++;
        if (i >= OPERATIONS) return;
        const p = prefixes[i % 3]!;
        const kind = i % 10;
        if (kind < 4) {
          const key = `${p}k${i % 97}`;
          const r = await call(`${api(a)}${key}`, { method: 'PUT', body: `v${i}`, headers: { 'content-type': 'text/plain' } });
          expect(r.status).toBe(200);
          ack(revisionOf(r.headers), [{ type: 'set', key, value: `v${i}`, value_type: 'text' }]);
        } else if (kind < 6) {
          const key = `${p}k${(i * 7) % 97}`;
          const r = await call(`${api(a)}${key}`, { method: 'DELETE' });
          if (r.status === 204) ack(revisionOf(r.headers), [{ type: 'delete', key }]);
          else expect(r.status).toBe(404);
        } else if (kind < 8) {
          const key = `${p}counter${client % 4}`;
          const r = await call(`${api(a)}${key}`, { method: 'PATCH', body: '+1' });
          expect(r.status).toBe(200);
          ack(revisionOf(r.headers), [{ type: 'set', key, value: r.text, value_type: 'int64' }]);
        } else if (kind === 8) {
          const k1 = `${p}t${i % 13}`;
          const k2 = `${prefixes[(i + 1) % 3]}t${i % 13}`;
          const r = await call(api(a).slice(0, -1), {
            method: 'POST',
            ...json({
              txn: [
                { set: k1, value: `x${i}` },
                { set: k2, value: i },
              ],
            }),
          });
          expect([200, 204], r.text).toContain(r.status);
          ack(revisionOf(r.headers), [
            { type: 'set', key: k1, value: `x${i}`, value_type: 'text' },
            { type: 'set', key: k2, value: i, value_type: 'json' },
          ]);
        } else {
          const key = `${p}ttl${i}`;
          ttlKeys.add(key);
          const r = await call(`${api(a)}${key}?ttl=1`, { method: 'PUT', body: 'soon', headers: { 'content-type': 'text/plain' } });
          expect(r.status).toBe(200);
          ack(revisionOf(r.headers), [{ type: 'set', key, value: 'soon', value_type: 'text' }]);
        }
      }
    };
    const t0 = Date.now();
    await Promise.all(Array.from({ length: 32 }, (_, c) => worker(c)));
    console.log(`watch test: ${OPERATIONS} operations in ${Date.now() - t0} ms`);
    // The sweeper removes TTL keys (1 s TTL, 1 s sweeps): once it has reported one after the last
    // write, the final revision is read (what it reported is checked below, whatever the count).
    const lastWrite = Math.max(...expected.keys());
    await w3.waitFor((m) => changes(m).some((e) => e.type === 'expire' && Number(e.rev) > lastWrite), 30_000);
    const final = revisionOf((await call(`${api(a)}?limit=0`)).headers);

    for (const [w, prefix] of [
      [w1, 'a/'],
      [w2, 'b/'],
      [w3, ''],
    ] as const) {
      await w.waitFor((m) => caughtUp(m) >= final, 30_000);
      const got = changes(w.messages);
      // In revision order, never going back.
      expect(got.filter((e, i) => i > 0 && Number(e.rev) < Number(got[i - 1]!.rev))).toEqual([]);
      expect(got.filter((e) => !String(e.key).startsWith(prefix))).toEqual([]);
      // Every acknowledged change under the prefix, exactly once, with its value when asked for
      // (compared as one list: thousands of separate assertions would cost seconds).
      const norm = (e: Record<string, unknown>) =>
        `${String(e.rev)} ${String(e.type)} ${String(e.key)}${w === w1 || e.type !== 'set' ? '' : ` ${String(e.value_type)}=${JSON.stringify(e.value)}`}`;
      const want = [...expected]
        .flatMap(([, keys]) => [...keys.values()].filter((e) => String(e.key).startsWith(prefix)))
        .map(norm)
        .sort();
      const mine = got.filter((e) => expected.has(Number(e.rev)));
      expect(mine.map(norm).sort()).toEqual(want);
      if (w === w1) expect(mine.every((e) => e.value === undefined)).toBe(true);
      const count = want.length;
      // Everything else is the sweeper's: expiries of TTL keys, each reported once.
      const others = got.filter((e) => !expected.has(Number(e.rev)));
      expect(others.filter((e) => e.type !== 'expire' || !ttlKeys.has(String(e.key)))).toEqual([]);
      expect(new Set(others.map((e) => e.key)).size).toBe(others.length);
      expect(others.length).toBeGreaterThan(0);
      expect(got.length).toBe(count + others.length);
    }
    // SSE: one message per transaction (its id is the revision).
    for (const m of w3.messages.filter((x) => x.data.length > 1)) {
      expect(new Set(m.data.map((e) => e.rev))).toEqual(new Set([m.id]));
    }
    expect(w3.messages.some((m) => m.data.length === 2 && expected.get(m.id!)?.size === 2)).toBe(true);
    for (const w of [w1, w2, w3]) w.abort();
  });

  it('a cut connection resumes with Last-Event-ID: nothing missed, nothing twice', { timeout: 60_000 }, async () => {
    const bucket = await createBucket(a.api);
    const url = `${b.api}/${bucket}/?watch=true`;
    const sse = { accept: 'text/event-stream' };
    const first = await openWatch(url, sse);
    await first.waitFor((m) => m.length > 0);
    const writes = (async () => {
      const revs: number[] = [];
      for (let i = 0; i < 300; i += 10) {
        const batch = await Promise.all(
          Array.from({ length: 10 }, (_, j) => call(`${a.api}/${bucket}/k${i + j}`, { method: 'PUT', body: String(i + j) })),
        );
        revs.push(...batch.map((r) => revisionOf(r.headers)));
      }
      return revs;
    })();
    await first.waitFor((m) => changes(m).length >= 50);
    first.abort();
    const lastId = Math.max(...first.messages.map((m) => m.id ?? -1));
    const second = await openWatch(url, { ...sse, 'last-event-id': String(lastId) });
    const revs = await writes;
    await second.waitFor((m) => caughtUp(m) >= Math.max(...revs));
    const seen = [...changes(first.messages.filter((m) => m.id! <= lastId)), ...changes(second.messages)].map((e) => Number(e.rev));
    expect(seen).toEqual([...revs].sort((x, y) => x - y));
    // The resumed stream starts with the change after Last-Event-ID, not with a sync.
    expect(second.messages[0]!.event).not.toBe('sync');
    second.abort();
  });

  it('since older than the retained log answers reset and ends; since ahead of the bucket is a 400; other formats 406', {
    timeout: 30_000,
  }, async () => {
    const bucket = await createBucket(a.api);
    await call(`${a.api}/${bucket}/x`, { method: 'PUT', body: '1' });
    await call(`${a.api}/${bucket}/x`, { method: 'PUT', body: '2' });
    // Retention is 3 s and sweeps run every second: the floor rises past the first write.
    await expect
      .poll(async () => (await call(`${a.api}/${bucket}`)).headers.get('kvb-history-floor'), { timeout: 20_000, interval: 200 })
      .toBe('2');
    const w = await openWatch(`${b.api}/${bucket}/?watch=true&since=0&format=jsonl`);
    await w.ended;
    expect(events(w.messages)).toEqual([{ type: 'reset', rev: 2, oldest: 2 }]);
    // From the floor on, nothing is missing: resuming there is allowed.
    const ok = await openWatch(`${b.api}/${bucket}/?watch=true&since=2&format=jsonl`);
    expect(ok.status).toBe(200);
    ok.abort();
    const ahead = await call(`${b.api}/${bucket}/?watch=true&since=99&format=jsonl`);
    expect(ahead.status).toBe(400);
    for (const format of ['text', 'json']) expect((await call(`${b.api}/${bucket}/?watch=true&format=${format}`)).status).toBe(406);
    expect((await call(`${b.api}/${bucket}/?watch=true`, { headers: { accept: 'text/plain' } })).status).toBe(406);
  });

  it('an import (one revision, never replayed as events) resets live watchers and later resumes from before it; values are the export encoding', {
    timeout: 30_000,
  }, async () => {
    const bucket = await createBucket(a.api);
    const live = await openWatch(`${b.api}/${bucket}/?watch=true&values=true&format=jsonl`);
    await live.waitFor((m) => m.some((x) => x.event === 'sync'));
    const put = await call(`${a.api}/${bucket}/n`, { method: 'PUT', body: '9007199254740993' });
    const before = revisionOf(put.headers);
    await live.waitFor((m) => changes(m).length === 1);
    // int64 as the export writes it: a decimal string, exact beyond 2^53.
    expect(changes(live.messages)[0]).toMatchObject({ type: 'set', key: 'n', value: '9007199254740993' });
    const imported = await call(`${a.api}/${bucket}?mode=replace`, {
      method: 'POST',
      body: exportFile(manyKeys(50)),
      headers: { 'content-type': 'application/x-ndjson' },
    });
    expect(imported.status).toBe(200);
    const revision = revisionOf(imported.headers);
    await live.waitFor((m) => m.some((x) => x.event === 'reset'));
    await live.ended;
    expect(events(live.messages).at(-1)).toMatchObject({ type: 'reset', rev: revision, oldest: revision });
    // Resuming from before the import: reset too; from the import on, the feed goes on.
    const old = await openWatch(`${b.api}/${bucket}/?watch=true&format=jsonl&since=${before}`);
    await old.waitFor((m) => m.length > 0);
    await old.ended;
    expect(events(old.messages)).toEqual([{ type: 'reset', rev: revision, oldest: revision }]);
    const next = await openWatch(`${b.api}/${bucket}/?watch=true&format=jsonl&since=${revision}`);
    await call(`${a.api}/${bucket}/after`, { method: 'PUT', body: 'x' });
    await next.waitFor((m) => changes(m).length === 1);
    expect(changes(next.messages)[0]).toMatchObject({ type: 'set', key: 'after', rev: revision + 1 });
    next.abort();
  });

  it('token expiry and signing-key rotation end the stream with closed; a token sees only its prefix', { timeout: 30_000 }, async () => {
    const bucket = await createBucket(a.api, { secret_key: 'S', signing_key: 'K1' });
    const admin = { authorization: 'Bearer S' };
    const mint = async (ttl: number) =>
      (
        (
          await call(`${a.api}/${bucket}/tokens/`, {
            method: 'POST',
            headers: admin,
            body: new URLSearchParams({ prefix: 'p/', permissions: 'read,enumerate', ttl: String(ttl) }),
          })
        ).json() as { access_token: string }
      ).access_token;
    const short = await mint(2);
    const long = await mint(600);
    const expiring = await openWatch(`${b.api}/${bucket}/?watch=true&format=jsonl&access_token=${short}`);
    const rotated = await openWatch(`${b.api}/${bucket}/?watch=true&values=true&format=jsonl`, { authorization: `Bearer ${long}` });
    expect([expiring.status, rotated.status]).toEqual([200, 200]);
    await rotated.waitFor((m) => m.length > 0);
    await call(`${a.api}/${bucket}/q/secret`, { method: 'PUT', body: 'no', headers: admin });
    await call(`${a.api}/${bucket}/p/mine`, { method: 'PUT', body: 'yes', headers: admin });
    await rotated.waitFor((m) => changes(m).length === 1);
    expect(changes(rotated.messages)).toMatchObject([{ type: 'set', key: 'p/mine', value: 'yes' }]);
    await expiring.ended;
    expect(events(expiring.messages).at(-1)).toEqual({ type: 'closed', reason: 'the credential is no longer valid' });
    expect((await call(`${a.api}/${bucket}`, { method: 'PATCH', ...json({ signing_key: 'K2' }, admin) })).status).toBeLessThan(300);
    // The other instance sees the rotation within about a second (its bucket cache's age): the
    // stream ends, where one that never noticed would hold the test to its timeout.
    await rotated.ended;
    expect(events(rotated.messages).at(-1)).toMatchObject({ type: 'closed' });
  });

  it('1,000 concurrent watchers on one instance with bounded memory; all get the change; metrics count them', {
    timeout: 60_000,
  }, async () => {
    // Spawned: the bound is on the server process's own memory, apart from the 1,000 clients'.
    const spawned = await startServer();
    try {
      await thousandWatchers(spawned);
    } finally {
      await spawned.stop();
    }
  });

  async function thousandWatchers(a: { api: string; url: string; process: { pid?: number } }): Promise<void> {
    const bucket = await createBucket(a.api);
    const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${a.process.pid}/status`, 'utf8'))![1]) * 1024;
    const before = rss();
    const watchers: Watch[] = [];
    for (let i = 0; i < 1000; i += 100) {
      watchers.push(...(await Promise.all(Array.from({ length: 100 }, () => openWatch(`${a.api}/${bucket}/?watch=true&format=jsonl`)))));
    }
    expect(watchers.every((w) => w.status === 200)).toBe(true);
    const metrics = (await call(`${a.url}/metrics`)).text;
    expect(Number(/kvb_watchers_open (\d+)/.exec(metrics)![1])).toBeGreaterThanOrEqual(1000);
    await call(`${a.api}/${bucket}/hello`, { method: 'PUT', body: 'all' });
    for (const w of watchers) await w.waitFor((m) => changes(m).length === 1);
    const grew = rss() - before;
    expect(grew).toBeLessThan(200 * 1024 * 1024);
    for (const w of watchers) w.abort();
  }

  it('a consumer that stops reading is sent reset and closed', { timeout: 180_000 }, async () => {
    const bucket = await createBucket(a.api);
    const http = await import('node:http');
    const resets = async () => Number(/^kvb_watch_resets_total (\d+)/m.exec((await call(`${a.url}/metrics`)).text)?.[1] ?? 0);
    const resetsBefore = await resets();
    // The server registers the watcher before it sends the headers: from here every change is sent.
    const res = await new Promise<import('node:http').IncomingMessage>((resolve, reject) => {
      http.get(`${a.api}/${bucket}/?watch=true&values=true&format=jsonl`, resolve).on('error', reject);
    });
    // Reads nothing (no listener, paused) until the server has given up on it.
    res.pause();
    // Driven by the server's own count of resets, not by time: write until this watcher is reset,
    // bounded in bytes (socket buffers on both sides take a few MiB before the server's 1 MiB backlog).
    const big = 'x'.repeat(15_000);
    const MAX_BYTES = 96 * 1024 * 1024;
    let written = 0;
    for (let i = 0; (await resets()) === resetsBefore; i++) {
      expect(written, 'the server never reset a watcher that read nothing').toBeLessThan(MAX_BYTES);
      await Promise.all(Array.from({ length: 10 }, (_, j) => call(`${a.api}/${bucket}/k${i}-${j}`, { method: 'PUT', body: big })));
      written += 10 * big.length;
    }
    // Now drain what the server left: the stream ends, and its last line says why.
    let body = '';
    res.setEncoding('utf8');
    res.on('data', (c: string) => (body += c));
    const ended = new Promise((resolve) => res.on('end', resolve));
    res.resume();
    await ended;
    const last = JSON.parse(body.trim().split('\n').at(-1)!);
    expect(last).toMatchObject({ type: 'reset', reason: expect.stringContaining('slow consumer') });
    expect(body.length).toBeLessThan(written + 64 * 1024);
  });
});

describe('watch: limits and shutdown', () => {
  it('over --max-watchers answers 503 with Retry-After; SIGTERM ends every stream at once with closed', { timeout: 30_000 }, async () => {
    // Spawned: SIGTERM and the exit code are the process's. A shutdown timeout past the test's own
    // means a stream that held the drain would fail the test rather than be cut after a while.
    const s = await startServer({ args: ['--max-watchers', '3', '--shutdown-timeout', '60'] });
    try {
      const bucket = await createBucket(s.api);
      const url = `${s.api}/${bucket}/?watch=true&format=jsonl`;
      const open = await Promise.all([openWatch(url), openWatch(url), openWatch(url)]);
      const over = await call(url);
      expect(over.status).toBe(503);
      expect(over.headers.get('retry-after')).toBe('5');
      const code = await s.stop();
      expect(code).toBe(0);
      for (const w of open) {
        await w.ended;
        expect(events(w.messages).at(-1)).toEqual({ type: 'closed', reason: 'the server is shutting down' });
      }
    } finally {
      await s.stop().catch(() => {});
    }
  });
});
