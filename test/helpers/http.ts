import { expect } from 'vitest';
import { injectorFor } from './injected.js';

export interface Answer {
  status: number;
  headers: Headers;
  body: Buffer;
  text: string;
  json: () => unknown;
}

/**
 * One HTTP request with fetch, the whole body read as bytes. A server in this process
 * (app-server.ts) is reached through `app.inject()` instead, with the same answer.
 */
export async function call(url: string, init: RequestInit & { token?: string } = {}): Promise<Answer> {
  const headers = new Headers(init.headers);
  if (init.token) headers.set('authorization', `Bearer ${init.token}`);
  const { token: _token, ...request } = init;
  const injector = injectorFor(url, init);
  const res = injector ? await injector(new URL(url), { ...request, headers }) : await fetch(url, { ...init, headers });
  const body = Buffer.from(await res.arrayBuffer());
  return { status: res.status, headers: res.headers, body, text: body.toString('utf8'), json: () => JSON.parse(body.toString('utf8')) };
}

/** Creates a bucket with the given form fields; returns its id. */
export async function createBucket(api: string, fields: Record<string, string> = {}): Promise<string> {
  const res = await call(`${api}/`, { method: 'POST', body: new URLSearchParams({ email: 'test@example.com', ...fields }) });
  expect(res.status, res.text).toBe(201);
  return res.text;
}

/** Asserts the spec's error envelope with the given status and message, and its detail: the header's reason. */
export function expectError(answer: Answer, status: number, message: string): void {
  expect(answer.status, answer.text).toBe(status);
  const body = answer.json() as { error: { detail: string } };
  expect(body).toEqual({ error: { code: status, message, detail: expect.any(String) } });
  expect(body.error.detail).not.toBe('');
  expect(body.error.detail.replace(/[^\x20-\x7e]/g, '?')).toBe(answer.headers.get('kvb-error-detail'));
}

/** A JSON request body, with any other headers (Authorization, …) merged in. */
export const json = (value: unknown, headers: Record<string, string> = {}): RequestInit => ({
  body: JSON.stringify(value),
  headers: { ...headers, 'content-type': 'application/json' },
});
