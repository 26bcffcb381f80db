import { describe, expect, it } from 'vitest';
import { KvbNetworkError, networkErrorFor } from '../../src/client/client-errors.js';

/** Each runtime's fetch failure, as it really throws it (recorded from Node 20, Deno 2.9, Bun 1.4, Chromium, Firefox, Safari). */
const withCause = (message: string, cause: Error) => Object.assign(new TypeError(message), { cause });
const withCode = (message: string, code: string) => Object.assign(new TypeError(message), { code });

describe('networkErrorFor: an unreachable server is a KvbNetworkError in every runtime', () => {
  it.each([
    [
      'node refused',
      withCause('fetch failed', Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' })),
      'connection refused',
    ],
    [
      'bun refused',
      withCode('ECONNREFUSED: Unable to connect. Is the computer able to access the url?', 'ECONNREFUSED'),
      'connection refused',
    ],
    ['bun reset', withCode('ECONNRESET: The socket connection was closed unexpectedly.', 'ECONNRESET'), 'connection reset'],
    [
      'deno refused',
      withCause(
        'fetch failed',
        new Error(
          'error sending request for url (http://127.0.0.1:45221/): client error (Connect): tcp connect error: Connection refused (os error 111)',
        ),
      ),
      'connection refused',
    ],
    [
      'deno dns',
      withCause(
        'fetch failed',
        new Error(
          'error sending request for url (http://x.invalid/): client error (Connect): dns error: failed to lookup address information: Name or service not known',
        ),
      ),
      'host not found',
    ],
    [
      'deno closed',
      withCause(
        'fetch failed',
        new Error(
          'error sending request from 127.0.0.1:48822 for http://127.0.0.1:33425/ (127.0.0.1:33425): client error (SendRequest): connection closed before message completed',
        ),
      ),
      'connection closed by the server',
    ],
    ['deno blocked port', new TypeError('Fetch failed: Requests to port 1 are blocked'), 'Requests to port 1 are blocked'],
    ['chromium', new TypeError('Failed to fetch'), 'network error'],
    ['firefox', new TypeError('NetworkError when attempting to fetch resource.'), 'network error'],
    ['safari', new TypeError('Load failed'), 'network error'],
  ])('%s', (_name, error, reason) => {
    const typed = networkErrorFor('http://kv', error);
    expect(typed).toBeInstanceOf(KvbNetworkError);
    expect((typed as KvbNetworkError).reason).toContain(reason);
    expect((typed as KvbNetworkError).cause).toBe(error);
  });
  it('anything else passes through untouched (a bug is not a network error)', () => {
    for (const error of [
      new TypeError("Cannot read properties of undefined (reading 'x')"),
      new RangeError('bad'),
      new TypeError('Invalid URL'),
    ]) {
      expect(networkErrorFor('http://kv', error)).toBe(error);
    }
  });
});
