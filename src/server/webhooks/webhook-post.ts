import http from 'node:http';
import https from 'node:https';
import { type LookupFunction, isIP } from 'node:net';
import { isPrivateAddress, PrivateAddressError, publicOnlyLookup } from './webhook-address.js';

/** How much of a receiver's answer is kept (in the delivery log): enough to see what went wrong. */
export const EXCERPT_BYTES = 256;
/**
 * How long a webhook's connection stays open with no delivery on it. Under load one request
 * follows another; a new connection for each was about a tenth of what one webhook cost the
 * request thread. Shorter than the 5 s Node's own servers keep an idle connection, so the
 * receiver rarely closes one just as a delivery is sent on it (a `Keep-Alive: timeout` hint
 * shortens it further).
 */
export const IDLE_CONNECTION_MS = 4000;

/** What one POST came to: the status and the start of the body, or why there was no answer. */
export type PostOutcome = { status: number; excerpt: string } | { status: null; error: string };

export interface PostOptions {
  timeoutMs: number;
  allowPrivate: boolean;
  headers: Record<string, string>;
  /** A keep-alive agent (WebhookConnections) to send on; without one, a connection of its own, closed after. */
  agent?: http.Agent;
}

/**
 * POSTs `body` to `url` once. No redirect is followed (a 3xx is an answer like any other, not a
 * 2xx); only the first EXCERPT_BYTES of the answer are read: a longer answer drops the connection.
 * The whole exchange, connection included, must finish within the timeout. A kept connection the
 * receiver closed just as the request went out is tried once more on a new one.
 */
export async function postWebhook(url: URL, body: string, options: PostOptions): Promise<PostOutcome> {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  // An IP literal is connected to without a lookup: checked here instead.
  if (!options.allowPrivate && isIP(host) !== 0 && isPrivateAddress(host)) {
    return { status: null, error: `${host} is a private address` };
  }
  const deadline = performance.now() + options.timeoutMs;
  const first = await postOnce(url, body, options, options.timeoutMs);
  if (!('stale' in first)) return first;
  const retried = await postOnce(url, body, options, Math.max(0, deadline - performance.now()));
  return 'stale' in retried ? retried.outcome : retried;
}

/** One request; `stale`: it failed on a reused connection before any answer (the receiver had closed it). */
function postOnce(
  url: URL,
  body: string,
  options: PostOptions,
  timeoutMs: number,
): Promise<PostOutcome | { stale: true; outcome: PostOutcome }> {
  return new Promise((resolve) => {
    let settled = false;
    let answered = false;
    const finish = (outcome: PostOutcome | { stale: true; outcome: PostOutcome }, keep = false) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      // A connection whose answer was read to its end goes back to the agent for the next delivery.
      if (!keep) request.destroy();
      resolve(outcome);
    };
    const send = url.protocol === 'https:' ? https.request : http.request;
    const request = send(url, {
      method: 'POST',
      headers: { ...options.headers, 'content-length': String(Buffer.byteLength(body)) },
      agent: options.agent ?? false,
      ...(!options.allowPrivate && { lookup: publicOnlyLookup }),
    });
    const timer = setTimeout(() => finish({ status: null, error: `no answer within ${options.timeoutMs} ms` }), timeoutMs);
    request.on('error', (err) => {
      const code = (err as NodeJS.ErrnoException).code;
      const outcome: PostOutcome = {
        status: null,
        error: err instanceof PrivateAddressError ? err.message : `${code ?? 'error'}: ${err.message}`,
      };
      const stale = request.reusedSocket && !answered && (code === 'ECONNRESET' || code === 'EPIPE');
      finish(stale ? { stale: true, outcome } : outcome);
    });
    request.on('response', (response) => {
      answered = true;
      const chunks: Buffer[] = [];
      let length = 0;
      const done = (whole: boolean) =>
        finish({ status: response.statusCode ?? 0, excerpt: Buffer.concat(chunks).subarray(0, EXCERPT_BYTES).toString('utf8') }, whole);
      response.on('data', (chunk: Buffer) => {
        chunks.push(chunk);
        length += chunk.length;
        if (length > EXCERPT_BYTES) done(false);
      });
      response.on('end', () => done(true));
      response.on('error', () => done(false));
    });
    request.end(body);
  });
}

/**
 * One keep-alive agent per webhook, so deliveries back to back reuse a connection. Every new
 * connection still resolves the name through `lookup` (the private-address check, DNS
 * rebinding: webhook-address.ts); a connection already open stays with the address it was
 * checked at. Idle connections do not hold the process open (Node unrefs them), close after
 * IDLE_CONNECTION_MS, and are closed at once when the webhook is dropped (removed, paused) or
 * the deliveries stop.
 */
export class WebhookConnections {
  private readonly agents = new Map<string, { url: string; agent: http.Agent }>();

  /** `lookup`: the check on each new connection's address (none with `--webhook-allow-private`). */
  constructor(private readonly lookup: LookupFunction | undefined) {}

  /** The agent for webhook `id` posting to `url` (a new one if its URL is not the one the agent was made for). */
  agentFor(id: string, url: URL): http.Agent {
    const held = this.agents.get(id);
    if (held?.url === url.href) return held.agent;
    if (held) held.agent.destroy();
    const Agent = url.protocol === 'https:' ? https.Agent : http.Agent;
    const agent = new Agent({
      keepAlive: true,
      maxFreeSockets: 1,
      timeout: IDLE_CONNECTION_MS,
      ...(this.lookup && { lookup: this.lookup }),
    });
    this.agents.set(id, { url: url.href, agent });
    return agent;
  }

  /** Closes webhook `id`'s connections. */
  drop(id: string): void {
    this.agents.get(id)?.agent.destroy();
    this.agents.delete(id);
  }

  /** Closes the connections of every webhook not in `ids`. */
  keepOnly(ids: ReadonlySet<string>): void {
    for (const id of this.agents.keys()) if (!ids.has(id)) this.drop(id);
  }

  close(): void {
    for (const id of [...this.agents.keys()]) this.drop(id);
  }

  /** Webhooks with an agent (tests). */
  get size(): number {
    return this.agents.size;
  }
}
