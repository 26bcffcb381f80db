import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { BucketRequests } from '../../src/client/bucket-requests.js';
import type { FetchInit, FetchLike } from '../../src/client/http-types.js';
import { KeyRequests } from '../../src/client/key-requests.js';
import { KvbHttp } from '../../src/client/kvb-http.js';
import { ListingRequests } from '../../src/client/listing-requests.js';
import { WebhookRequests } from '../../src/client/webhook-requests.js';

/*
 * KvbHttp is composed, not inherited: one transport, parts that each take it (key, listing, bucket
 * and webhook requests), their methods embedded in the one object callers hold. Its methods are the
 * client's public API (`kv.http`, `new KvbHttp()` from kvb-client): the same names as before.
 */
const CLIENT_SRC = fileURLToPath(new URL('../../src/client/', import.meta.url));
const CONSOLE_SRC = fileURLToPath(new URL('../../console/src/', import.meta.url));

const PUBLIC_METHODS = [
  'set',
  'get',
  'del',
  'incr',
  'history',
  'rollback',
  'listPage',
  'exportBucket',
  'importBucket',
  'watch',
  'health',
  'createBucket',
  'policy',
  'policyAndUsage',
  'bucketExists',
  'updateBucket',
  'deleteBucket',
  'txn',
  'mintToken',
  'addWebhook',
  'listWebhooks',
  'getWebhook',
  'setWebhookState',
  'deleteWebhook',
  'rotateWebhookSecret',
  'testWebhook',
  'webhookDeliveries',
];

const methodsOf = (part: { prototype: object }) => Object.getOwnPropertyNames(part.prototype).filter((name) => name !== 'constructor');

/** A fetch that records what it was given and answers `status` with `body`. */
function recordingFetch(status = 200, body = '{}', headers: Record<string, string> = {}) {
  const seen: Array<{ url: string; init: FetchInit }> = [];
  const fetch: FetchLike = async (url, init) => {
    seen.push({ url, init });
    return new Response(status === 204 ? null : body, { status, headers });
  };
  return { fetch, seen };
}

const sourcesUnder = (dir: string, pattern: RegExp): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourcesUnder(join(dir, e.name), pattern) : pattern.test(e.name) ? [join(dir, e.name)] : [],
  );

describe('KvbHttp, composed of its parts', () => {
  it('has every method of its parts, each once, and those are the public API', () => {
    const http = new KvbHttp({ url: 'http://127.0.0.1:1' });
    const parts = [KeyRequests, ListingRequests, BucketRequests, WebhookRequests].flatMap(methodsOf);
    expect(new Set(parts).size).toBe(parts.length);
    expect([...parts].sort()).toEqual([...PUBLIC_METHODS].sort());
    const record = http as unknown as Record<string, unknown>;
    for (const name of PUBLIC_METHODS) expect(typeof record[name], name).toBe('function');
    expect(http.url).toBe('http://127.0.0.1:1');
  });

  it('every part speaks through the one transport: its URL, credential and fetch', async () => {
    const { fetch, seen } = recordingFetch(200, '{"status":"ok"}', { 'kvb-revision': '7' });
    const http = new KvbHttp({ url: 'http://example.test/kvb/', token: 'T', fetch });
    const { get } = http; // bound: a method taken off the object still works
    await get('b', 'k');
    await http.health();
    await http.listWebhooks('b');
    expect(seen.map((s) => s.url)).toEqual([
      'http://example.test/kvb/api/v1/b/k',
      'http://example.test/kvb/health',
      'http://example.test/kvb/api/v1/webhooks/b',
    ]);
    expect(seen.map((s) => s.init.headers.authorization)).toEqual(['Bearer T', undefined, 'Bearer T']);
    expect(seen.every((s) => !('cache' in s.init))).toBe(true);
  });

  it("the cache option goes to every fetch (the console's no-store); an upload's progress is told, once answered, where there is no XMLHttpRequest", async () => {
    const { fetch, seen } = recordingFetch(200, '{"imported":2,"skipped":0,"rev":3}');
    const http = new KvbHttp({ url: 'http://example.test', fetch, cache: 'no-store' });
    const fractions: number[] = [];
    const result = await http.importBucket('b', '{"key":"a"}\n', { onUploadProgress: (f) => fractions.push(f) });
    expect(result).toEqual({ imported: 2, skipped: 0, rev: 3 });
    expect(fractions).toEqual([1]);
    expect(seen[0]!.init.cache).toBe('no-store');
  });

  it('an upload that fails reports no progress', async () => {
    const { fetch } = recordingFetch(400, '{"error":{"code":400,"message":"bad_request"}}');
    const http = new KvbHttp({ url: 'http://example.test', fetch });
    const fractions: number[] = [];
    await expect(http.importBucket('b', 'x', { onUploadProgress: (f) => fractions.push(f) })).rejects.toMatchObject({ status: 400 });
    expect(fractions).toEqual([]);
  });
});

describe('one HTTP client', () => {
  it('no class in src/client extends another of its classes, but the errors (whose hierarchy is the API: instanceof KvbHttpError)', () => {
    const files = sourcesUnder(CLIENT_SRC, /\.ts$/);
    const own = new Set(files.flatMap((f) => [...readFileSync(f, 'utf8').matchAll(/^export class (\w+)/gm)].map((m) => m[1]!)));
    expect(own.has('KvbHttp')).toBe(true);
    const extending = files.flatMap((f) =>
      [...readFileSync(f, 'utf8').matchAll(/^(?:export )?class (\w+) extends (\w+)/gm)]
        .filter((m) => own.has(m[2]!) && !m[1]!.endsWith('Error'))
        .map((m) => `${m[1]} extends ${m[2]}`),
    );
    expect(extending).toEqual([]);
  });

  it('console/src sends no request of its own: no fetch, no XMLHttpRequest, only the client', () => {
    const files = sourcesUnder(CONSOLE_SRC, /\.tsx?$/);
    expect(files.length).toBeGreaterThan(5);
    const own = files.flatMap((f) =>
      readFileSync(f, 'utf8')
        .split('\n')
        .map((line, i) => ({ where: `${f.slice(CONSOLE_SRC.length)}:${i + 1}`, line }))
        .filter(({ line }) => /\bfetch\(|XMLHttpRequest|EventSource|sendBeacon/.test(line) && !/^\s*(\/\/|\*|\/\*)/.test(line)),
    );
    expect(own.map((o) => `${o.where}: ${o.line.trim()}`)).toEqual([]);
  });
});
