/**
 * The seals of a success notification, stored version 3 against version 4 (src/mobile-id/stored.ts), in one process,
 * rounds interleaved: v3 seals the access token alone and the id_token with the subject (two seals; docs/decisions/072
 * measured it against version 2's three); v4 seals both tokens with the subject (one; docs/decisions/152). µs of
 * process CPU per notification, with an id_token of the bench's size (bench/scenarios/webhook.ts) or of a real
 * provider's (`--id-token-chars`).
 *
 *   npx tsx bench/experiments/notification-seals-ab.ts [--rounds 20] [--n 20000] [--id-token-chars 600]
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';

import { notificationContext } from '../../src/mobile-id/stored.js';
import { SecretBox } from '../../src/secret.js';
import { notificationBody } from '../scenarios/webhook.js';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '20' },
    n: { type: 'string', default: '20000' },
    'id-token-chars': { type: 'string', default: '' },
  },
});
const box = new SecretBox(randomBytes(32));
const body = JSON.parse(notificationBody()) as { access_token: string; id_token: string };
const idToken = args['id-token-chars'] ? 'e'.repeat(Number(args['id-token-chars'])) : body.id_token;
const accessToken = body.access_token;
const sub = '79001234567';
const scope = 'app:bench';

function v3(authReqId: string): unknown[] {
  const context = (field: string) => notificationContext(3, scope, authReqId, field);
  return [
    box.seal(accessToken, context('access_token')),
    box.seal(JSON.stringify({ sub, fields: {}, idToken }), context('personal')),
  ];
}
function v4(authReqId: string): unknown[] {
  return [
    box.seal(
      JSON.stringify({ sub, fields: {}, idToken, accessToken }),
      notificationContext(4, scope, authReqId, 'personal'),
    ),
  ];
}

const N = Number(args.n);
const cpu = (f: (id: string) => unknown[]) => {
  const t = process.cpuUsage();
  for (let i = 0; i < N; i++) f(`auth-${i}`);
  const u = process.cpuUsage(t);
  return (u.user + u.system) / N;
};
const ratios: number[] = [];
const a: number[] = [];
const b: number[] = [];
for (let r = 0; r < Number(args.rounds); r++) {
  const [x, y] = r % 2 ? [cpu(v4), cpu(v3)].reverse() : [cpu(v3), cpu(v4)];
  if (r < 2) continue; // warm-up
  a.push(x!);
  b.push(y!);
  ratios.push(y! / x!);
}
const med = (v: number[]) => [...v].sort((p, q) => p - q)[Math.floor(v.length / 2)]!;
const sorted = [...ratios].sort((p, q) => p - q);
console.log(
  `id_token ${idToken.length} chars: v3 ${med(a).toFixed(2)} µs, v4 ${med(b).toFixed(2)} µs per notification (medians of ${a.length} rounds); ` +
    `v4/v3 median ${med(ratios).toFixed(3)}, range ${sorted[0]!.toFixed(3)}..${sorted.at(-1)!.toFixed(3)}`,
);
