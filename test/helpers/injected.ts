/**
 * The in-process apps of this test file, by origin (`http://127.0.0.1:PORT`): `call` (http.ts)
 * sends a request to one of them through `app.inject()` instead of a socket. Kept apart from
 * app-server.ts so that http.ts, used by every suite, does not load the server.
 */
export type Injector = (url: URL, init: RequestInit) => Promise<Response>;

export const injectors = new Map<string, Injector>();

/** A bucket's listing, export or watch: answers streamed under a stalled-reader timer on the socket. */
const STREAMED = /^\/api\/v1\/[^/]+\/$/;

/**
 * What `call` may inject rather than send: a request to an in-process app that the caller cannot
 * abort (inject has no signal) and whose answer is not streamed (those set timers on the real
 * socket). Everything else goes through the socket.
 */
export function injectorFor(url: string, init: RequestInit): Injector | undefined {
  if (injectors.size === 0 || init.signal) return undefined;
  const parsed = new URL(url);
  if (STREAMED.test(parsed.pathname)) return undefined;
  return injectors.get(parsed.origin);
}
