import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AppServer, startAppServer } from '../helpers/app-server.js';
import { exportFile } from '../helpers/export-file.js';
import { call, createBucket, expectError, json } from '../helpers/http.js';

const ADMIN = 'transfer-admin';
const WRITER = 'transfer-writer';
const READER = 'transfer-reader';
const auth = (key = ADMIN) => ({ authorization: `Bearer ${key}` });
const NDJSON = { 'content-type': 'application/x-ndjson' };

/** An export file with webhook lines after its header (the end line's SHA-256 covers them). */
function withWebhooks(file: string, hooks: Array<Record<string, unknown>>): string {
  const lines = file.trimEnd().split('\n');
  const body = `${[lines[0], ...hooks.map((h) => JSON.stringify({ kvb: 'webhook', ...h })), ...lines.slice(1, -1)].join('\n')}\n`;
  const end = JSON.parse(lines.at(-1)!) as { count: number };
  return `${body}${JSON.stringify({ kvb: 'end', count: end.count, sha256: createHash('sha256').update(body).digest('hex') })}\n`;
}

/**
 * A bucket's webhooks in its export and import: a secret-key holder's export of the whole bucket
 * carries what each delivers and its state, never its secret; an import adds them with new
 * secrets, shown once in its answer, and is refused whole (nothing changes) past the limit.
 */
describe('webhooks in export and import', () => {
  let server: AppServer;
  let source: string;
  const hooks = (bucket: string) => `${server.api}/webhooks/${bucket}`;
  const listed = async (bucket: string) =>
    (await call(hooks(bucket), { headers: auth() })).json() as Array<{ id: string; url: string; state: string; position: number }>;
  const exported = async (bucket: string, key = ADMIN, query = '') => {
    const res = await call(`${server.api}/${bucket}/?export=true${query}`, { headers: auth(key) });
    expect(res.status, res.text).toBe(200);
    return res.text;
  };
  const importInto = (bucket: string, body: string, key = ADMIN, query = '') =>
    call(`${server.api}/${bucket}${query}`, { method: 'POST', body, headers: { ...auth(key), ...NDJSON } });
  const keysOf = async (bucket: string) => (await call(`${server.api}/${bucket}/?format=json`, { headers: auth() })).json();
  const newBucket = () => createBucket(server.api, { secret_key: ADMIN, write_key: WRITER, read_key: READER });

  beforeAll(async () => {
    server = await startAppServer({ config: { maxWebhooksPerBucket: 3 } });
    source = await newBucket();
    for (const [key, value] of [
      ['a', '1'],
      ['b', '2'],
    ])
      expect((await call(`${server.api}/${source}/${key}`, { method: 'PUT', body: value, headers: auth() })).status).toBe(200);
    for (const body of [{ url: 'https://example.com/all' }, { url: 'https://example.com/users', prefix: 'user/', kinds: ['set'] }]) {
      const res = await call(hooks(source), { method: 'POST', ...json(body, auth()) });
      expect(res.status, res.text).toBe(201);
    }
    const [, second] = await listed(source);
    await call(`${hooks(source)}/${second!.id}`, { method: 'PATCH', ...json({ state: 'paused' }, auth()) });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("a secret-key holder's export of the whole bucket carries each webhook without its secret or position", async () => {
    const text = await exported(source);
    const lines = text
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.filter((l) => l.kvb === 'webhook')).toEqual([
      {
        kvb: 'webhook',
        url: 'https://example.com/all',
        prefix: '',
        kinds: ['set', 'delete', 'expire'],
        state: 'active',
        paused_reason: null,
      },
      {
        kvb: 'webhook',
        url: 'https://example.com/users',
        prefix: 'user/',
        kinds: ['set'],
        state: 'paused',
        paused_reason: 'paused by request',
      },
    ]);
    expect(text).not.toMatch(/whsec_|"secret"|"position"/);
    // A read key's export, a prefix's and a past revision's are about keys only.
    for (const other of [
      await exported(source, READER),
      await exported(source, ADMIN, '&prefix=a'),
      await exported(source, ADMIN, '&rev=1'),
    ])
      expect(other).not.toContain('"kvb":"webhook"');
  });

  it('an import adds them with new secrets, shown once, from its own revision on; importing it again adds none', async () => {
    const file = await exported(source);
    const target = await newBucket();
    const res = await importInto(target, file);
    expect(res.status, res.text).toBe(200);
    const answer = res.json() as {
      imported: number;
      rev: number;
      webhooks: Array<{ id: string; state: string; secret: string; position: number }>;
    };
    expect(answer.imported).toBe(2);
    expect(answer.webhooks.map((w) => [w.state, w.position])).toEqual([
      ['active', answer.rev],
      ['paused', answer.rev],
    ]);
    for (const w of answer.webhooks) expect(w.secret).toMatch(/^whsec_/);
    const now = await listed(target);
    expect(now.map((w) => [w.url, w.state])).toEqual([
      ['https://example.com/all', 'active'],
      ['https://example.com/users', 'paused'],
    ]);
    expect(JSON.stringify(now)).not.toContain('whsec_');
    // The same file again: the keys are written again, the webhooks it names are there already.
    const again = await importInto(target, file);
    expect(again.status, again.text).toBe(200);
    expect((again.json() as { webhooks: unknown[] }).webhooks).toEqual([]);
    expect((await listed(target)).length).toBe(2);
  });

  it('is refused whole (409) past the per-bucket limit, and changes nothing', async () => {
    const target = await newBucket();
    for (const url of ['https://example.com/x', 'https://example.com/y'])
      expect((await call(hooks(target), { method: 'POST', ...json({ url }, auth()) })).status).toBe(201);
    const before = await listed(target);
    expectError(await importInto(target, await exported(source)), 409, 'conflict');
    expect(await listed(target)).toEqual(before);
    expect(await keysOf(target)).toEqual([]);
  });

  it('is refused (403, 400) for a caller who may not manage webhooks, a private URL, or a prefix import, and changes nothing', async () => {
    const target = await newBucket();
    const file = await exported(source);
    expectError(await importInto(target, file, WRITER), 403, 'forbidden');
    const local = withWebhooks(exportFile([{ key: 'k', type: 'text', value: '"v"' }]), [{ url: 'http://127.0.0.1:9/' }]);
    const refused = await importInto(target, local);
    expectError(refused, 400, 'bad_request');
    expect(refused.headers.get('kvb-error-detail')).toMatch(/^line 2: url must be https/);
    expectError(
      await importInto(target, withWebhooks(exportFile([]), [{ url: 'https://example.com/', kinds: ['move'] }])),
      400,
      'bad_request',
    );
    expectError(await importInto(target, withWebhooks(exportFile([]), [{ url: 'https://example.com/', secret: 'x' }])), 400, 'bad_request');
    expectError(await importInto(target, file, ADMIN, '?prefix=a'), 400, 'bad_request');
    expect(await listed(target)).toEqual([]);
    expect(await keysOf(target)).toEqual([]);
  });

  it('an export without webhook lines (older, or a read key holder’s) still imports, and adds none', async () => {
    const target = await newBucket();
    const res = await importInto(target, exportFile([{ key: 'old', type: 'text', value: '"v"' }]));
    expect(res.status, res.text).toBe(200);
    expect(res.json()).toEqual({ imported: 1, skipped: 0, rev: expect.any(Number) });
    expect((await importInto(target, await exported(source, READER))).status).toBe(200);
    expect(await listed(target)).toEqual([]);
  });
});
