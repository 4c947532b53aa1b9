/**
 * SecretBox.digest (the intake's keyed fingerprint of each notification's canonical body) against the code it
 * replaced (an Hmac object per digest: `createHmac('sha256', key).update(text).digest('hex')`), in this process, in
 * alternating calls, warm (a hot loop) and cold (16 MB of memory touched and 2,000 objects made before each call, as
 * the gateway's other work does between two notifications). docs/decisions/112.
 *
 *   npm run build && npx tsx bench/experiments/secret-digest-micro.ts [--calls 4000]
 */
import { createHmac, hkdfSync, randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';

import { notificationBody } from '../scenarios/webhook.js';

const { values: cli } = parseArgs({
  options: {
    calls: { type: 'string', default: '4000' },
    dist: { type: 'string', default: new URL('../../dist/src', import.meta.url).pathname },
  },
});
const { SecretBox } = (await import(`${cli.dist}/secret.js`)) as typeof import('../../src/secret.js');
const { canonicalJson } = (await import(`${cli.dist}/fingerprint.js`)) as typeof import('../../src/fingerprint.js');

const master = randomBytes(32);
const box = new SecretBox(master);
const macKey = Buffer.from(hkdfSync('sha256', master, Buffer.alloc(0), 'gateway token digest v1', 32));
const before = (text: string) => createHmac('sha256', macKey).update(text, 'utf8').digest('hex');
const text = canonicalJson(JSON.parse(notificationBody().replace('{{uuid}}', 'a1b2c3d4-0000-4000-8000-000000000000')))!;
if (box.digest(text) !== before(text)) throw new Error('the digests differ');

const junk = Buffer.alloc(16 * 2 ** 20);
let sink: unknown;
const cool = () => {
  for (let i = 0; i < junk.length; i += 64) junk[i] = (junk[i]! + 1) & 255;
  const objects: unknown[] = [];
  for (let i = 0; i < 2000; i++) objects.push({ i, s: `x${i}` });
  sink = objects;
};
const calls = Number(cli.calls);
const q = (v: number[], p: number) => [...v].sort((x, y) => x - y)[Math.floor(p * (v.length - 1))]!;
const fmt = (v: number[]) => `${q(v, 0.5).toFixed(2)} (${q(v, 0.25).toFixed(2)}–${q(v, 0.75).toFixed(2)}) µs`;
for (const cold of [false, true]) {
  const a: number[] = [];
  const b: number[] = [];
  for (let i = 0; i < calls; i++) {
    for (const [f, out] of i % 2
      ? ([
          [before, b],
          [(t: string) => box.digest(t), a],
        ] as const)
      : ([
          [(t: string) => box.digest(t), a],
          [before, b],
        ] as const)) {
      if (cold) cool();
      const t0 = process.hrtime.bigint();
      sink = f(text);
      const t1 = process.hrtime.bigint();
      if (i >= 200) out.push(Number(t1 - t0) / 1000);
    }
  }
  process.stdout.write(
    `${cold ? 'cold' : 'warm'}: the pads ${fmt(a)}, an Hmac object ${fmt(b)} (median, quartiles; ${calls - 200} calls each; text ${text.length} chars)\n`,
  );
}
void sink;
