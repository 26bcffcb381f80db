import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { isPrivateAddress, PrivateAddressError, publicOnlyLookup } from './webhook-address.js';

/** How much of a receiver's answer is kept (in the delivery log): enough to see what went wrong. */
export const EXCERPT_BYTES = 256;

/** What one POST came to: the status and the start of the body, or why there was no answer. */
export type PostOutcome = { status: number; excerpt: string } | { status: null; error: string };

export interface PostOptions {
  timeoutMs: number;
  allowPrivate: boolean;
  headers: Record<string, string>;
}

/**
 * POSTs `body` to `url` once. No redirect is followed (a 3xx is an answer like any other, not a
 * 2xx); only the first EXCERPT_BYTES of the answer are read, then the connection is dropped. The
 * whole exchange, connection included, must finish within the timeout.
 */
export function postWebhook(url: URL, body: string, options: PostOptions): Promise<PostOutcome> {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  // An IP literal is connected to without a lookup: checked here instead.
  if (!options.allowPrivate && isIP(host) !== 0 && isPrivateAddress(host)) {
    return Promise.resolve({ status: null, error: `${host} is a private address` });
  }
  return new Promise((resolve) => {
    let settled = false;
    const finish = (outcome: PostOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      request.destroy();
      resolve(outcome);
    };
    const send = url.protocol === 'https:' ? https.request : http.request;
    const request = send(url, {
      method: 'POST',
      headers: { ...options.headers, 'content-length': String(Buffer.byteLength(body)) },
      agent: false,
      ...(!options.allowPrivate && { lookup: publicOnlyLookup }),
    });
    const timer = setTimeout(() => finish({ status: null, error: `no answer within ${options.timeoutMs} ms` }), options.timeoutMs);
    request.on('error', (err) =>
      finish({
        status: null,
        error: err instanceof PrivateAddressError ? err.message : `${(err as NodeJS.ErrnoException).code ?? 'error'}: ${err.message}`,
      }),
    );
    request.on('response', (response) => {
      const chunks: Buffer[] = [];
      let length = 0;
      const done = () =>
        finish({ status: response.statusCode ?? 0, excerpt: Buffer.concat(chunks).subarray(0, EXCERPT_BYTES).toString('utf8') });
      response.on('data', (chunk: Buffer) => {
        chunks.push(chunk);
        length += chunk.length;
        if (length >= EXCERPT_BYTES) done();
      });
      response.on('end', done);
      response.on('error', done);
    });
    request.end(body);
  });
}
