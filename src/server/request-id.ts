import { randomUUID } from 'node:crypto';

/** A client's X-Request-Id is kept when it is short and plain; otherwise one is generated. */
const REQUEST_ID = /^[A-Za-z0-9._:@+=-]{1,128}$/;

export function requestId(header: string | string[] | undefined): string {
  return typeof header === 'string' && REQUEST_ID.test(header) ? header : randomUUID();
}
