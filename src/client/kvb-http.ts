import { BucketRequests } from './bucket-requests.js';
import { HttpTransport } from './http-transport.js';
import type { HttpOptions } from './http-types.js';
import { KeyRequests } from './key-requests.js';
import { ListingRequests } from './listing-requests.js';
import { WebhookRequests } from './webhook-requests.js';

// kvb's HTTP API for the CLI, kvb/client and the console: the request core in http-transport.ts,
// one method per route in its parts (key-, listing-, bucket- and webhook-requests.ts), each given
// the one transport. KvbHttp embeds them, as etcd's clientv3.Client embeds KV, Watcher and Lease.

/** Where a client connects when it is told nowhere (the CLI's default, and connectFromEnv's without KVB_URL). */
export const DEFAULT_URL = 'http://127.0.0.1:8080';

export type * from './http-types.js';
export type { WebhookAttempt, WebhookInfo, WebhookKind, WebhookRequest } from './webhook-requests.js';
export { chunksOf } from './http-transport.js';
export { conditionHeaders } from './key-requests.js';

const PARTS = [KeyRequests, ListingRequests, BucketRequests, WebhookRequests];

/** The parts' methods, which the constructor gives each instance. */
export interface KvbHttp extends KeyRequests, ListingRequests, BucketRequests, WebhookRequests {}

/** One method per kvb route, taking the bucket per call. Builds every URL and turns every error answer into a typed error. */
// biome-ignore lint/suspicious/noUnsafeDeclarationMerging: its constructor binds them (test/unit/kvb-http.test.ts)
export class KvbHttp {
  readonly url: string;

  constructor(options: HttpOptions) {
    const transport = new HttpTransport(options);
    this.url = transport.url;
    for (const Part of PARTS) embed(this, new Part(transport));
  }
}

/** Gives `target` each method of `part`, bound to it; a name two parts share throws. */
function embed(target: object, part: object): void {
  const methods = Object.getPrototypeOf(part) as Record<string, unknown>;
  for (const name of Object.getOwnPropertyNames(methods)) {
    if (name === 'constructor') continue;
    if (name in target) throw new Error(`KvbHttp: two parts have ${name}`);
    const method = methods[name] as (...args: unknown[]) => unknown;
    Object.defineProperty(target, name, { value: method.bind(part), writable: true, configurable: true });
  }
}
