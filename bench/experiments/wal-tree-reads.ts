/**
 * The tree query's CPU with a WAL restarted at 16,384 frames against one restarted at 65,536 (docs/decisions/107):
 * whether reads get slower through a larger WAL and its larger wal-index. Two gateways in this process (sandbox
 * upstreams), `small` (SQLITE_WAL_RESTART_FRAMES=16384) and `large` (65536), each with the bench's project tree
 * (bench/scenarios/query.ts) seeded. Creations, 16 in flight, fill both WALs: `small`'s restarts, `large`'s grows to
 * --frames (60,000 by default, short of its restart), and every frame is copied into the database (a checkpoint) with
 * no write after it: each WAL keeps its frames, and the reads search none of them (SQLite looks only past the last
 * checkpoint's frame), as between two checkpoints under load. Then, in rounds, the two gateways in turns: --queries
 * tree queries one at a time, this process's CPU per query (the client's share is the same on both). Prints each round and the medians.
 *
 *   npx tsx bench/experiments/wal-tree-reads.ts [--rounds 8] [--queries 800] [--frames 60000]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { Pool } from 'undici';

import { API_KEY } from '../lib/env.js';
import { createNetworkBody, createOnce } from '../scenarios/mutation.js';
import { PROJECT_TREE, seedTree } from '../scenarios/query.js';
import { inProcessGateway } from './in-process-gateway.js';

const { values: cli } = parseArgs({
  options: {
    rounds: { type: 'string', default: '8' },
    queries: { type: 'string', default: '800' },
    frames: { type: 'string', default: '60000' },
  },
});
const FRAME = 4096 + 24;

const sides: Array<{
  name: string;
  gateway: Awaited<ReturnType<typeof inProcessGateway>>;
  pool: Pool;
  tree: string;
  create: string;
  wal: string;
}> = [];
for (const [name, frames] of [
  ['small', '16384'],
  ['large', '65536'],
] as const) {
  const gateway = await inProcessGateway(`wal-tree-${name}`, {
    SQLITE_WAL_RESTART_FRAMES: frames,
    GATEWAY_API_KEYS: API_KEY,
  });
  const origin = gateway.url;
  const pool = new Pool(origin, { connections: 4 });
  const tree = JSON.stringify({ query: PROJECT_TREE, variables: { id: await seedTree(origin) } });
  const create = await createNetworkBody(origin, `wal-${name}`);
  // Its data directory: the newest of its prefix in the temporary folder (in-process-gateway.ts makes it).
  const dir = fs
    .readdirSync(os.tmpdir())
    .filter((d) => d.startsWith(`wal-tree-${name}-`))
    .map((d) => path.join(os.tmpdir(), d))
    .sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs)[0]!;
  const wal = path.join(dir, 'gateway.sqlite-wal');
  sides.push({ name, gateway, pool, tree, create, wal });
}
const walFrames = (file: string) => Math.max(0, Math.round((fs.statSync(file).size - 32) / FRAME));

const query = async (pool: Pool, body: string) => {
  const res = await pool.request({
    method: 'POST',
    path: '/graphql',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
    body,
  });
  const text = await res.body.text();
  if (res.statusCode !== 200 || text.includes('"errors"')) throw new Error(`${res.statusCode} ${text}`);
};

// Fill: creations on both at once, 16 in flight on each, until the large side's WAL holds --frames (the small side's
// restarts meanwhile). A pause in its writes would let the worker's checkpoint catch up, and SQLite restarts the WAL
// at the next write on its own.
const target = Number(cli.frames);
let filled = false;
let made = 0;
await Promise.all(
  sides.flatMap((s) =>
    Array.from({ length: 16 }, async () => {
      while (!filled) {
        await createOnce(s.pool, s.create);
        if (++made % 4000 === 0)
          console.log(`fill: ${sides.map((x) => `${x.name} WAL file ${walFrames(x.wal)} frames`).join(', ')}`);
        if (walFrames(sides[1]!.wal) >= target) filled = true;
      }
    }),
  ),
);
// Then every frame copied (a PASSIVE checkpoint from a connection of this experiment's own), so that the reads search
// the same empty tail on both, and no more writes: nothing restarts either WAL, each keeps its frames and wal-index.
for (const s of sides) {
  const db = new Database(s.wal.replace(/-wal$/, ''));
  const [r] = db.pragma('wal_checkpoint(PASSIVE)') as Array<{ log: number; checkpointed: number }>;
  db.close();
  console.log(`${s.name}: the WAL holds ${r!.log} frames, ${r!.checkpointed} copied`);
}
// Warm-up of the tree query on both.
for (const s of sides) for (let i = 0; i < 2000; i++) await query(s.pool, s.tree);

const perQuery: Record<string, number[]> = { small: [], large: [] };
for (let r = 0; r < Number(cli.rounds); r++) {
  const order = r % 2 ? [...sides].reverse() : sides;
  const line: string[] = [];
  for (const s of order) {
    const before = process.cpuUsage();
    for (let i = 0; i < Number(cli.queries); i++) await query(s.pool, s.tree);
    const used = process.cpuUsage(before);
    const us = (used.user + used.system) / Number(cli.queries);
    perQuery[s.name]!.push(us);
    line.push(`${s.name} ${us.toFixed(0)} µs (WAL file ${walFrames(s.wal)} frames)`);
  }
  console.log(`round ${r}: ${line.join(' | ')} | load ${os.loadavg()[0]!.toFixed(2)}`);
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const d = perQuery.large!.map((x, i) => x - perQuery.small![i]!);
console.log(
  `tree query, CPU per query (this process): small ${median(perQuery.small!).toFixed(1)} µs, large ${median(perQuery.large!).toFixed(1)} µs; large − small by round: median ${median(d).toFixed(1)}, range ${Math.min(...d).toFixed(1)}–${Math.max(...d).toFixed(1)} µs`,
);
for (const s of sides) {
  await s.pool.close();
  await s.gateway.close();
}
process.exit(0);
