import { lookup as dnsLookup } from 'node:dns';
import { BlockList, isIP } from 'node:net';
import type { LookupFunction } from 'node:net';

/**
 * Addresses a webhook may not reach unless the operator allows it (`--webhook-allow-private`):
 * loopback, private, carrier-grade NAT, link-local (the cloud metadata service, 169.254.169.254,
 * is one), unique-local, unspecified, multicast and reserved ranges, and IPv4 inside IPv6.
 */
const PRIVATE = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 3],
] as const) {
  PRIVATE.addSubnet(net, bits, 'ipv4');
}
for (const [net, bits] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
  ['64:ff9b::', 96],
  ['2001:db8::', 32],
] as const) {
  PRIVATE.addSubnet(net, bits, 'ipv6');
}

/** Whether `address` (an IP literal) is one a webhook may not reach by default. */
export function isPrivateAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return PRIVATE.check(address, 'ipv4');
  if (family !== 6) return true;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return PRIVATE.check(mapped[1]!, 'ipv4');
  return PRIVATE.check(address, 'ipv6');
}

/** Raised when a webhook's host is, or resolves to, an address it may not reach. */
export class PrivateAddressError extends Error {}

/**
 * The `lookup` of every delivery's connection: the name is resolved when the connection is made
 * (not only when the webhook was added, so a name that later resolves to a private address, DNS
 * rebinding, is refused), and a private answer fails the connection.
 */
export const publicOnlyLookup: LookupFunction = (hostname, options, callback) => {
  dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, '', 0);
    const list = addresses as Array<{ address: string; family: number }>;
    const refused = list.find((a) => isPrivateAddress(a.address));
    if (refused || list.length === 0) {
      return callback(new PrivateAddressError(`${hostname} resolves to ${refused?.address ?? 'nothing'}, a private address`), '', 0);
    }
    if ((options as { all?: boolean }).all) return (callback as (e: null, a: typeof list) => void)(null, list);
    callback(null, list[0]!.address, list[0]!.family);
  });
};
