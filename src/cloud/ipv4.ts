import net from 'node:net';

/** a.b.c.d, each part 0..255 in decimal without leading zeros: input checks and wire parsing both use it. */
export function isIPv4(value: string): boolean {
  return net.isIPv4(value) && value.split('.').every((p) => p === '0' || !p.startsWith('0'));
}
