import net from 'node:net';

/** a.b.c.d, each part 0..255 in decimal without leading zeros: input checks and wire parsing both use it. */
export function isIPv4(value: string): boolean {
  return net.isIPv4(value) && value.split('.').every((p) => p === '0' || !p.startsWith('0'));
}

/**
 * Ranges that no host on the internet holds (RFC 6890 special-purpose blocks that are not globally reachable): this
 * network, private, shared (carrier NAT), loopback, link-local, IETF protocol, benchmarking, multicast, reserved and
 * broadcast. The documentation blocks (192.0.2/24, 198.51.100/24, 203.0.113/24) stay allowed: examples and the
 * sandbox stand them in for a public address.
 */
const NOT_PUBLIC = new net.BlockList();
for (const [address, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  NOT_PUBLIC.addSubnet(address, prefix, 'ipv4');

/** Whether an address that `isIPv4` accepts may be a public one (spec, Kafka cluster: `white_host`). */
export function isPublicIPv4(value: string): boolean {
  return !NOT_PUBLIC.check(value, 'ipv4');
}
