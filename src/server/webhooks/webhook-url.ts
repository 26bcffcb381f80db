import { isIP } from 'node:net';
import { isPrivateAddress } from './webhook-address.js';

/** The longest webhook URL accepted. */
export const MAX_WEBHOOK_URL_LENGTH = 2048;

/**
 * Why `text` cannot be a webhook URL, or undefined when it can. `https://` to a public host only,
 * unless the operator allows private addresses (then `http://` too: a service on the same host
 * or network). A name is checked again each time a delivery connects (webhook-address.ts).
 */
export function webhookUrlProblem(text: string, allowPrivate: boolean): string | undefined {
  if (text.length > MAX_WEBHOOK_URL_LENGTH) return `url is longer than ${MAX_WEBHOOK_URL_LENGTH} characters`;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'url is not an absolute URL';
  }
  const schemes = allowPrivate ? ['https:', 'http:'] : ['https:'];
  if (!schemes.includes(url.protocol)) {
    return allowPrivate ? 'url must be https:// or http://' : 'url must be https:// (http:// only with kvb serve --webhook-allow-private)';
  }
  if (url.username !== '' || url.password !== '') return 'url must not carry a user name or password';
  if (url.hash !== '') return 'url must not have a #fragment';
  if (allowPrivate) return undefined;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if ((isIP(host) !== 0 && isPrivateAddress(host)) || host === 'localhost' || host.endsWith('.localhost')) {
    return 'url names a loopback, private or link-local address (allowed only with kvb serve --webhook-allow-private)';
  }
  return undefined;
}
