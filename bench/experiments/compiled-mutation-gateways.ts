/**
 * Scenario 1's durable createNetwork on several gateways side by side, one per variant of the environment
 * (docs/decisions/087): each from dist/ (`npm run build` first), unpinned, SQLITE_SYNCHRONOUS=FULL, the bench's
 * upstream stub, a fresh key each time, a closed loop of `--inflight`. After a warm-up of each, every round runs a
 * block of `--n` creations on each gateway, the order turned by one each round; per block the CPU of the gateway's
 * whole process per creation (/proc schedstat, every thread). Prints each variant's median and, per round, its
 * difference from the first variant. Give each variant twice (`off`, `on`, `off2`, `on2`) to see the spread of two
 * identical gateways beside the difference; without `--variant`, two identical gateways.
 *
 * A variant may run another tree's build (docs/decisions/088): `dir=<path to a dist/>` (its `src/main.js` is run from
 * the checkout that holds it) among its settings, e.g. `--variant main:dir=/work/main/dist --variant this:`.
 *
 * With `--together` (docs/decisions/099) each round drives every gateway's block at the same time instead of one after
 * the other, so that the other processes of a busy machine weigh on every variant of a round alike.
 *
 *   npx tsx bench/experiments/compiled-mutation-gateways.ts [--rounds 12] [--n 2000] [--inflight 16] [--together]
 *     [--variant off:NAME=false --variant on:NAME=true …] [--variant NAME:dir=/path/to/dist,K=V …]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';

import { closedLoop, processCpu } from '../lib/cpu.js';
import { gatewayEnv } from '../lib/env.js';
import { freePort, spawnNode } from '../lib/processes.js';
import { parseVariants } from '../lib/variants.js';
import { createNetworkBody, createOnce } from '../scenarios/mutation.js';

const { values: cli } = parseArgs({
  options: {
    rounds: { type: 'string', default: '12' },
    n: { type: 'string', default: '2000' },
    inflight: { type: 'string', default: '16' },
    variant: { type: 'string', multiple: true },
    together: { type: 'boolean', default: false },
  },
});
const rounds = Number(cli.rounds);
const n = Number(cli.n);
const inflight = Number(cli.inflight);

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'compiled-mutation-gateways-'));
const stub = await spawnNode('upstream', {
  script: 'bench/servers/upstream.ts',
  cpus: null,
  readiness: { line: true },
});

async function gateway(name: string, env: Record<string, string>, dist: string) {
  const main = path.join(dist, 'src/main.js');
  if (!fs.existsSync(main)) throw new Error(`no ${main}: run \`npm run build\``);
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const dataDir = path.join(root, name);
  fs.mkdirSync(dataDir);
  const child = await spawnNode(`gateway ${name}`, {
    script: main,
    cwd: path.dirname(dist),
    cpus: null,
    env: {
      ...gatewayEnv({ port, dataDir, stubUrl: String(stub.ready.url) }),
      SQLITE_SYNCHRONOUS: 'FULL',
      ...env,
    },
    readiness: { url: `${origin}/readyz` },
    timeoutMs: 60_000,
  });
  const body = await createNetworkBody(origin, 'ab');
  const pool = new Pool(origin, { connections: Math.max(inflight, 64) });
  const one = (): Promise<void> => createOnce(pool, body);
  const block = async (): Promise<number> => {
    const pid = child.child.pid!;
    const cpu0 = processCpu(pid);
    await closedLoop(n, inflight, one);
    return ((processCpu(pid) - cpu0) / n) * 1e6;
  };
  return { block, stop: async () => (await pool.close(), await child.stop()) };
}

// Each variant: a name, the environment over the bench's, and the build it runs (`--variant name:dir=D,K=V,K=V`;
// without `dir`, this tree's dist/).
const variants = parseVariants(cli.variant, ['a:', 'b:']);
const gws: Array<{ name: string; gw: Awaited<ReturnType<typeof gateway>>; figures: number[] }> = [];
for (const v of variants) gws.push({ name: v.name, gw: await gateway(v.name, v.env, v.dist), figures: [] });
// Warm-up: V8's optimizing compiler and SQLite's page cache settle over a few thousand creations.
for (let i = 0; i < 3; i++) for (const g of gws) await g.gw.block();
for (let r = 0; r < rounds; r++) {
  // The order turns each round, so that no variant always follows the same one.
  const order = gws.map((_, i) => gws[(i + r) % gws.length]!);
  if (cli.together) {
    const figures = await Promise.all(order.map((g) => g.gw.block()));
    order.forEach((g, i) => g.figures.push(figures[i]!));
  } else for (const g of order) g.figures.push(await g.gw.block());
  console.log(`round ${r}: ${gws.map((g) => `${g.name} ${g.figures.at(-1)!.toFixed(0)}`).join(', ')} µs`);
}
const median = (xs: number[]) => [...xs].sort((p, q) => p - q)[Math.floor(xs.length / 2)]!;
const first = gws[0]!;
for (const g of gws) {
  const d = g.figures.map((f, i) => f - first.figures[i]!);
  console.log(
    `${g.name}: median ${median(g.figures).toFixed(1)} µs; ${g.name} − ${first.name} by round: median ${median(d).toFixed(1)} µs, range ${Math.min(...d).toFixed(1)}–${Math.max(...d).toFixed(1)}`,
  );
}
for (const g of gws) await g.gw.stop();
await stub.stop();
fs.rmSync(root, { recursive: true, force: true });
process.exit(0);
