import { WebhookRequests } from './webhook-requests.js';

// kvb's HTTP API for both the CLI and kvb/client, in rooms: the shapes in http-types.ts, the
// request core (URLs, deadlines, retries, error answers to typed errors) in http-transport.ts, and
// one method per route in key-requests.ts, listing-requests.ts and bucket-requests.ts. Each of
// those extends the one before (one class, so callers keep one object); KvbHttp is the last.
// Nothing here imports a node: module or a package: it runs in Node, browsers, Deno and Bun.

/** Where a client connects when it is told nowhere (the CLI's default, and connectFromEnv's without KVB_URL). */
export const DEFAULT_URL = 'http://127.0.0.1:8080';

export type * from './http-types.js';
export type { WebhookAttempt, WebhookInfo, WebhookKind, WebhookRequest } from './webhook-requests.js';
export { chunksOf } from './http-transport.js';
export { conditionHeaders } from './key-requests.js';

/** One method per kvb route, taking the bucket per call. Builds every URL and turns every error answer into a typed error. */
export class KvbHttp extends WebhookRequests {}
