import { compileErrors, validate } from '@readme/openapi-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AppServer, startAppServer } from '../helpers/app-server.js';
import { call, createBucket } from '../helpers/http.js';
import {
  DEFAULT_BUCKET_TTL_SECONDS,
  DEFAULT_LIST_LIMIT,
  MAX_KEY_BYTES,
  MAX_LIST_LIMIT,
  MAX_TTL_SECONDS,
  MAX_TXN_OPS,
  PERMISSIONS,
  VALUE_TYPES,
} from '../../src/limits.js';
import { TXN_OPERATIONS, type TxnOperationName, txnFieldNames } from '../../src/server/routes/txn-operations.js';

interface Operation {
  operationId?: string;
  parameters?: Array<{ name: string; in: string; required?: boolean; schema?: unknown; example?: unknown }>;
  requestBody?: { content: Record<string, { schema?: unknown; example?: unknown }> };
  responses: Record<string, { content?: Record<string, { schema?: { $ref?: string }; example?: unknown }> }>;
  security?: Array<Record<string, string[]>>;
}
interface Document {
  openapi: string;
  info: { version: string };
  servers?: Array<{ url: string }>;
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, unknown>; securitySchemes: Record<string, Record<string, string>> };
}

let server: AppServer;
let doc: Document;

beforeAll(async () => {
  server = await startAppServer();
  const res = await call(`${server.url}/api-docs/openapi.json`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  doc = res.json() as Document;
});
afterAll(async () => {
  await server?.stop();
});

const op = (method: string, path: string): Operation => {
  const found = doc.paths[path]?.[method];
  if (!found) throw new Error(`${method.toUpperCase()} ${path} is not in the document`);
  return found;
};

/** Every operation of the spec, by the operationId the document gives it. */
const SPEC_OPERATIONS: Array<[string, string, string]> = [
  ['get', '/health', 'health'],
  ['get', '/ready', 'ready'],
  ['get', '/metrics', 'metrics'],
  ['get', '/api-docs/openapi.json', 'openapi'],
  ['post', '/api/v1/', 'createBucket'],
  ['get', '/api/v1/{bucket}', 'getBucketPolicy'],
  ['head', '/api/v1/{bucket}', 'checkBucket'],
  ['patch', '/api/v1/{bucket}', 'updateBucket'],
  ['delete', '/api/v1/{bucket}', 'deleteBucket'],
  ['delete', '/api/v1/{bucket}/', 'deleteBucketSlash'],
  ['post', '/api/v1/{bucket}', 'commitTransaction'],
  ['get', '/api/v1/{bucket}/', 'listKeys'],
  ['post', '/api/v1/{bucket}/tokens/', 'mintToken'],
  ['get', '/api/v1/{bucket}/{key}', 'getKey'],
  ['head', '/api/v1/{bucket}/{key}', 'checkKey'],
  ['post', '/api/v1/{bucket}/{key}', 'setKey'],
  ['put', '/api/v1/{bucket}/{key}', 'setKeyPut'],
  ['delete', '/api/v1/{bucket}/{key}', 'deleteKey'],
  ['patch', '/api/v1/{bucket}/{key}', 'addToCounter'],
  // Webhooks: beyond the spec (its Events section shows none), outside the key paths.
  ['get', '/api/v1/webhooks/{bucket}', 'listWebhooks'],
  ['post', '/api/v1/webhooks/{bucket}', 'addWebhook'],
  ['get', '/api/v1/webhooks/{bucket}/{id}', 'getWebhook'],
  ['patch', '/api/v1/webhooks/{bucket}/{id}', 'updateWebhook'],
  ['delete', '/api/v1/webhooks/{bucket}/{id}', 'deleteWebhook'],
  ['post', '/api/v1/webhooks/{bucket}/{id}/secret', 'rotateWebhookSecret'],
  ['post', '/api/v1/webhooks/{bucket}/{id}/test', 'testWebhook'],
  ['get', '/api/v1/webhooks/{bucket}/{id}/deliveries', 'webhookDeliveries'],
];

/** Webhook routes: for the bucket's secret-key holder, presented any of the four ways. */
const WEBHOOK_OPERATIONS = SPEC_OPERATIONS.filter(([, path]) => path.startsWith('/api/v1/webhooks/')).map(([, , id]) => id);

describe('the OpenAPI document', () => {
  it('is served at /api-docs/openapi.json and is a valid OpenAPI 3 document', async () => {
    expect(doc.openapi).toMatch(/^3\.0\.\d+$/);
    const result = await validate(structuredClone(doc) as never);
    expect(result.valid, result.valid ? '' : compileErrors(result)).toBe(true);
    expect(result.warnings).toEqual([]);
  });

  it('is the same document the explorer loads', async () => {
    const res = await call(`${server.url}/swagger-ui/json`);
    expect(res.status).toBe(200);
    expect(res.json()).toEqual(doc);
  });

  it('carries the version /health reports', async () => {
    const health = (await call(`${server.url}/health`)).json() as { version: string };
    expect(doc.info.version).toBe(health.version);
    expect(health.version).not.toBe('');
  });

  it('sends requests to the server that served it (relative server URL)', () => {
    expect(doc.servers).toEqual([expect.objectContaining({ url: '/' })]);
  });

  it('describes every route of the spec, and nothing else', () => {
    for (const [method, path, id] of SPEC_OPERATIONS) expect(op(method, path).operationId, `${method} ${path}`).toBe(id);
    const listed = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m} ${path}`));
    expect(listed.sort()).toEqual(SPEC_OPERATIONS.map(([m, p]) => `${m} ${p}`).sort());
  });

  it('names the key a path parameter of its own, so it travels as one percent-encoded segment', () => {
    for (const method of ['get', 'head', 'post', 'put', 'delete', 'patch']) {
      const params = op(method, '/api/v1/{bucket}/{key}').parameters ?? [];
      expect(params.filter((p) => p.in === 'path').map((p) => p.name)).toEqual(['bucket', 'key']);
      expect(params.find((p) => p.name === 'key')).toMatchObject({ required: true, schema: { type: 'string' } });
    }
  });

  it('documents the query parameters of listing and of setting', () => {
    const names = (o: Operation) => (o.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name);
    expect(names(op('get', '/api/v1/{bucket}/')).sort()).toEqual([
      'actor',
      'cursor',
      'delimiter',
      'export',
      'format',
      'history',
      'limit',
      'meta',
      'prefix',
      'rev',
      'reverse',
      'since',
      'skip',
      'until',
      'values',
      'watch',
    ]);
    expect(names(op('post', '/api/v1/{bucket}/{key}'))).toEqual(['ttl']);
    expect(names(op('patch', '/api/v1/{bucket}/{key}'))).toEqual(['ttl']);
  });

  it('states the limits and vocabularies of src/limits.ts', () => {
    const param = (method: string, path: string, name: string) =>
      (op(method, path).parameters ?? []).find((p) => p.name === name) as { description?: string } | undefined;
    expect(param('get', '/api/v1/{bucket}/', 'limit')?.description).toBe(
      `at most this many, 0 to ${MAX_LIST_LIMIT} (default ${DEFAULT_LIST_LIMIT})`,
    );
    expect(param('post', '/api/v1/{bucket}/{key}', 'ttl')?.description).toContain(`0 to ${MAX_TTL_SECONDS}`);
    expect(param('get', '/api/v1/{bucket}/{key}', 'key')?.description).toContain(`1 to ${MAX_KEY_BYTES} bytes`);
    const token = JSON.stringify(op('post', '/api/v1/{bucket}/tokens/').requestBody);
    expect(token).toContain(`1 to ${MAX_TTL_SECONDS}`);
    expect(token).toContain(`from ${PERMISSIONS.join(', ')}`);
    const create = JSON.stringify(op('post', '/api/v1/').requestBody);
    expect(create).toContain(`default ${DEFAULT_BUCKET_TTL_SECONDS}`);
    // Every enum of value types in the document (Kvb-Type, list and watch rows) is the one list.
    const enums: unknown[][] = [];
    const walk = (node: unknown): void => {
      if (typeof node !== 'object' || node === null) return;
      const { enum: values } = node as { enum?: unknown };
      if (Array.isArray(values) && values.includes('int64')) enums.push(values);
      for (const child of Object.values(node)) walk(child);
    };
    walk(doc);
    expect(enums.length).toBeGreaterThanOrEqual(3);
    for (const values of enums) expect(values).toEqual([...VALUE_TYPES]);
  });

  it("documents a transaction's operations with the fields, bounds and types the parser takes", () => {
    const body = op('post', '/api/v1/{bucket}').requestBody?.content['application/json']?.schema as {
      properties: {
        txn: { maxItems: number; items: { oneOf: Array<{ properties: Record<string, { maximum?: number; enum?: string[] }> }> } };
      };
    };
    expect(body.properties.txn.maxItems).toBe(MAX_TXN_OPS);
    const operations = body.properties.txn.items.oneOf.map((o) => Object.keys(o.properties));
    expect(operations).toEqual(Object.keys(TXN_OPERATIONS).map((name) => txnFieldNames(name as TxnOperationName)));
    const set = body.properties.txn.items.oneOf[0]!.properties;
    expect(set.ttl?.maximum).toBe(MAX_TTL_SECONDS);
    expect(set.type?.enum).toEqual([...VALUE_TYPES]);
  });

  it('has a request body for each content type the routes take', () => {
    const types = (o: Operation) => Object.keys(o.requestBody?.content ?? {}).sort();
    expect(types(op('post', '/api/v1/'))).toEqual(['application/x-www-form-urlencoded']);
    expect(types(op('post', '/api/v1/{bucket}/tokens/'))).toEqual(['application/x-www-form-urlencoded']);
    expect(types(op('patch', '/api/v1/{bucket}'))).toEqual(['application/json']);
    expect(types(op('post', '/api/v1/{bucket}'))).toEqual(['application/json']);
    for (const method of ['post', 'put']) {
      expect(types(op(method, '/api/v1/{bucket}/{key}'))).toEqual(['application/json', 'application/octet-stream', 'text/plain']);
    }
    const counter = op('patch', '/api/v1/{bucket}/{key}').requestBody!.content['text/plain']!;
    expect(counter.example).toBe('+1');
    expect(op('post', '/api/v1/{bucket}/{key}').requestBody!.content['application/octet-stream']!.schema).toMatchObject({
      type: 'string',
      format: 'binary',
    });
  });

  it('gives every success response a schema and an example', () => {
    for (const [method, path] of SPEC_OPERATIONS) {
      for (const [status, response] of Object.entries(op(method, path).responses)) {
        if (!status.startsWith('2') || !response.content) continue;
        for (const [type, media] of Object.entries(response.content)) {
          expect(media.schema, `${method} ${path} ${status} ${type}`).toBeDefined();
          if (type === 'application/octet-stream' || path === '/api-docs/openapi.json') continue;
          const example = media.example ?? (media.schema as { example?: unknown }).example;
          expect(example, `${method} ${path} ${status} ${type} example`).toBeDefined();
        }
      }
    }
  });

  it('answers no body for 204 and HEAD', () => {
    for (const [method, path] of SPEC_OPERATIONS) {
      for (const [status, response] of Object.entries(op(method, path).responses)) {
        if (status === '204' || method === 'head') expect(response.content, `${method} ${path} ${status}`).toBeUndefined();
      }
    }
  });

  it('shares the error envelope as a component that every error response references', () => {
    expect(doc.components.schemas.ErrorEnvelope).toMatchObject({
      type: 'object',
      required: ['error'],
      properties: { error: { required: ['code', 'message', 'detail'] } },
    });
    let errorResponses = 0;
    for (const [method, path] of SPEC_OPERATIONS) {
      for (const [status, response] of Object.entries(op(method, path).responses)) {
        if (Number(status) < 400 || method === 'head' || path === '/ready') continue;
        errorResponses++;
        const media = response.content?.['application/json'];
        expect(media?.schema, `${method} ${path} ${status}`).toEqual({ $ref: '#/components/schemas/ErrorEnvelope' });
        expect(media?.example).toEqual({ error: { code: Number(status), message: expect.any(String), detail: expect.any(String) } });
      }
    }
    expect(errorResponses).toBeGreaterThan(50);
  });

  it('declares the four ways to present a credential', () => {
    expect(doc.components.securitySchemes).toMatchObject({
      bearer: { type: 'http', scheme: 'bearer' },
      basic: { type: 'http', scheme: 'basic' },
      accessToken: { type: 'apiKey', in: 'query', name: 'access_token' },
      keyQuery: { type: 'apiKey', in: 'query', name: 'key' },
    });
  });

  it('says per operation which credentials it accepts, anonymous ({}) where a bucket may allow it', () => {
    const all = [{ bearer: [] }, { basic: [] }, { accessToken: [] }, { keyQuery: [] }];
    const admin = [
      'getBucketPolicy',
      'checkBucket',
      'updateBucket',
      'deleteBucket',
      'deleteBucketSlash',
      'mintToken',
      ...WEBHOOK_OPERATIONS,
    ];
    const anonymousToo = ['commitTransaction', 'listKeys', 'getKey', 'checkKey', 'setKey', 'setKeyPut', 'deleteKey', 'addToCounter'];
    for (const [method, path, id] of SPEC_OPERATIONS) {
      const security = op(method, path).security;
      if (admin.includes(id)) expect(security, id).toEqual(all);
      else if (anonymousToo.includes(id)) expect(security, id).toEqual([...all, {}]);
      else if (id === 'createBucket') expect(security).toEqual([{}, { bearer: [] }]);
      else expect(security, id).toBeUndefined();
    }
  });
});

describe('the document agrees with the server', () => {
  it('its request examples are accepted as they are', async () => {
    const form = (o: Operation) => {
      const schema = o.requestBody!.content['application/x-www-form-urlencoded']!.schema as {
        properties: Record<string, { example?: string }>;
      };
      const fields = Object.entries(schema.properties).filter(([, s]) => s.example !== undefined);
      return new URLSearchParams(fields.map(([name, s]): [string, string] => [name, String(s.example)]));
    };
    const createFields = form(op('post', '/api/v1/'));
    createFields.set('secret_key', 'S');
    createFields.set('signing_key', 'K');
    const created = await call(`${server.api}/`, { method: 'POST', body: createFields });
    expect(created.status, created.text).toBe(201);
    const bucket = created.text;
    const auth = { authorization: 'Bearer S' };

    const example = (method: string, path: string, type: string) => op(method, path).requestBody!.content[type]!.example;
    const patch = await call(`${server.api}/${bucket}`, {
      method: 'PATCH',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify(example('patch', '/api/v1/{bucket}', 'application/json')),
    });
    expect(patch.status, patch.text).toBe(204);
    const txn = await call(`${server.api}/${bucket}`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify(example('post', '/api/v1/{bucket}', 'application/json')),
    });
    expect(txn.status, txn.text).toBe(204);
    const keyExample = op('post', '/api/v1/{bucket}/{key}').parameters!.find((p) => p.name === 'key')!.example;
    const key = encodeURIComponent(String(keyExample));
    for (const type of ['text/plain', 'application/json']) {
      const body = example('post', '/api/v1/{bucket}/{key}', type);
      const set = await call(`${server.api}/${bucket}/${key}`, {
        method: 'POST',
        headers: { ...auth, 'content-type': type },
        body: typeof body === 'string' ? body : JSON.stringify(body),
      });
      expect(set.status, set.text).toBe(200);
    }
    const counter = await call(`${server.api}/${bucket}/visits`, {
      method: 'PATCH',
      headers: { ...auth, 'content-type': 'text/plain' },
      body: String(example('patch', '/api/v1/{bucket}/{key}', 'text/plain')),
    });
    expect(counter.text).toBe('1');
    const minted = await call(`${server.api}/${bucket}/tokens/`, {
      method: 'POST',
      headers: auth,
      body: form(op('post', '/api/v1/{bucket}/tokens/')),
    });
    expect(minted.status, minted.text).toBe(200);
    expect(minted.json()).toEqual({ access_token: expect.any(String), id: expect.any(String) });
  });

  it('its policy example has the shape the server answers', async () => {
    const bucket = await createBucket(server.api, { secret_key: 'S' });
    const policy = (await call(`${server.api}/${bucket}`, { token: 'S' })).json() as Record<string, unknown>;
    const media = op('get', '/api/v1/{bucket}').responses['200']!.content!['application/json']!;
    const example = (media.example ?? (media.schema as { example?: unknown }).example) as Record<string, unknown>;
    expect(Object.keys(example).sort()).toEqual(Object.keys(policy).sort());
  });
});
