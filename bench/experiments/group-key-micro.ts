/**
 * A shared execution's group lookup (src/execution/shared.ts, docs/decisions/100), in process: µs per member of a group
 * of 1,000 subscriptions, each with its own key string (as each subscribe message makes one), rounds interleaved, the
 * first 10 a warm-up:
 * - `key at delivery` (before decision 100): the turn's Map looked up by each member's key string (read in full, hashed,
 *   compared with the first member's);
 * - `key at subscribe` (after): the live groups' Map looked up by the same strings and the WeakRef read, as groupOf
 *   does at subscribe time;
 * - `group at delivery` (after): the turn's Map looked up by the one Group object.
 * Here every string is fresh and in the cache; in the gateway a key made at subscribe time is read at delivery long
 * after, out of the cache, where perf put the first row at several times this figure (decision 100).
 *
 *   npx tsx bench/experiments/group-key-micro.ts [--rounds 60]
 */
import { parseArgs } from 'node:util';

import { APP_GRANTS } from '../../src/auth/caller.js';
import { Group } from '../../src/execution/shared.js';

const { values: cli } = parseArgs({ options: { rounds: { type: 'string', default: '60' } } });

/** 1,000 members' keys, each its own string, as groupOf makes them. */
function keys(n: number): string[] {
  return Array.from({ length: n }, () => {
    const variables = JSON.stringify({ id: '6f1c2b0e-8d1e-4c1a-9f3e-2a5b7c9d0e1f' });
    return `${1}\u0000MobileIdAuthentication\u0000key:0123456789abcdef\u0000${APP_GRANTS.key}\u0000${variables}`;
  });
}

const rows = ['key at delivery', 'key at subscribe', 'group at delivery'] as const;
const times: Record<(typeof rows)[number], number[]> = {
  'key at delivery': [],
  'key at subscribe': [],
  'group at delivery': [],
};
const timed = (f: () => void, n: number): number => {
  const t0 = process.hrtime.bigint();
  f();
  return Number(process.hrtime.bigint() - t0) / 1000 / n;
};
for (let r = 0; r < Number(cli.rounds); r++) {
  const warm = r >= 10;
  const before = keys(1000);
  const turn = new Map<string, number>();
  const a = timed(() => {
    for (const k of before) if (turn.get(k) === undefined) turn.set(k, 1);
  }, before.length);
  const after = keys(1000);
  const groups = new Map<string, WeakRef<Group>>();
  const members: Group[] = [];
  const b = timed(() => {
    for (const k of after) {
      let group = groups.get(k)?.deref();
      if (group === undefined) {
        group = new Group(k);
        groups.set(k, new WeakRef(group));
      }
      members.push(group);
    }
  }, after.length);
  const byGroup = new Map<Group, number>();
  const c = timed(() => {
    for (const g of members) if (byGroup.get(g) === undefined) byGroup.set(g, 1);
  }, members.length);
  if (warm) {
    times['key at delivery'].push(a);
    times['key at subscribe'].push(b);
    times['group at delivery'].push(c);
  }
}
const median = (v: number[]) => [...v].sort((x, y) => x - y)[Math.floor(v.length / 2)]!;
const range = (v: number[]) => `${Math.min(...v).toFixed(3)}–${Math.max(...v).toFixed(3)}`;
process.stdout.write(
  `µs per member (median of ${times['key at delivery'].length} rounds of 1,000; key ${keys(1)[0]!.length} characters): ` +
    rows.map((row) => `${row} ${median(times[row]).toFixed(3)} (${range(times[row])})`).join(', ') +
    '\n',
);
