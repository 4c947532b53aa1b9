/**
 * CPU per mobile-ID notification of several gateways side by side (docs/decisions/094), one per variant: each a
 * build (`dir=<path to a dist/>`, default this tree's; `npm run build` first) with the bench's environment over it,
 * SQLITE_SYNCHRONOUS=FULL, the data directory on /dev/shm (so that the disk does not hide the CPU), fed scenario 4's
 * success notification with a fresh auth_req_id. After a warm-up of each, every round runs a block of `--n`
 * notifications on each gateway, the order turned by one each round; per block the CPU of the gateway's whole
 * process (every thread: libuv's pool with the WAL sync, the checkpoint worker; /proc schedstat) per notification,
 * and its main thread's alone.
 *
 * Two loads: a closed loop of `--inflight` (saturation: commits and syncs shared), or with `--rate R` an open loop
 * at R notifications per second (a steady rate below saturation: each notification commits and syncs nearly alone).
 * Give a variant twice (`main`, `this`, `main2`, `this2`) to see two identical gateways apart beside the difference.
 * `--variant base:baseline=1` runs the hand-written webhook of bench/servers/baseline.ts instead (scenario 4's
 * baseline: the token checked, the JSON parsed, one insert committed and synced on its main thread), the floor of the
 * same durable work at the same load. `--variant floor:mix=1` runs the webhook of bench/servers/mix-baseline.ts
 * (scenario 7's floor: the id_token decoded, one seal, a keyed fingerprint, the gateway's group commit with its WAL
 * synced on libuv's pool and a checkpoint worker), the floor of most of the gateway's work, written by hand.
 *
 *   npx tsx bench/experiments/intake-gateways.ts --variant main:dir=/work/main/dist --variant this:
 *     [--rounds 14] [--n 3000] [--inflight 8] [--rate 1500]
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';

import { startNodeArgs } from '../lib/build.js';
import { closedLoop, mainThreadCpu, processCpu } from '../lib/cpu.js';
import { gatewayEnv, NOTIFICATION_TOKEN } from '../lib/env.js';
import { freePort, ROOT, spawnNode } from '../lib/processes.js';
import { parseVariants } from '../lib/variants.js';
import { notificationBody, WEBHOOK_PATH } from '../scenarios/webhook.js';

const { values: cli } = parseArgs({
  options: {
    rounds: { type: 'string', default: '14' },
    n: { type: 'string', default: '3000' },
    inflight: { type: 'string', default: '8' },
    rate: { type: 'string' },
    warmup: { type: 'string', default: '3' },
    variant: { type: 'string', multiple: true },
  },
});
const rounds = Number(cli.rounds);
const n = Number(cli.n);
const inflight = Number(cli.inflight);
const rate = cli.rate === undefined ? null : Number(cli.rate);
const template = notificationBody();
const headers = {
  'content-type': 'application/json',
  authorization: `Bearer ${NOTIFICATION_TOKEN}`,
  'x-mobileid-request-id': 'bench',
};

/** `count` operations started at `perSecond`, whatever the answers' pace (an open loop); settles when all are answered. */
async function openLoop(count: number, perSecond: number, op: () => Promise<void>): Promise<void> {
  const started = performance.now();
  const answers: Promise<void>[] = [];
  while (answers.length < count) {
    const due = Math.min(count, Math.floor(((performance.now() - started) * perSecond) / 1000) + 1);
    while (answers.length < due) answers.push(op());
    await new Promise((r) => setTimeout(r, 1));
  }
  await Promise.all(answers);
}

/** The hand-written webhook (bench/servers/baseline.ts), FULL, its data on /dev/shm as the gateways' are. */
async function baseline(dataDir: string) {
  const child = await spawnNode('baseline', {
    script: 'bench/servers/baseline.ts',
    args: [
      // Neither the upstream nor the gateway's file is used by the webhook route.
      ...['--upstream', 'http://127.0.0.1:9', '--token', 'unused', '--gateway-db', path.join(dataDir, 'none')],
      ...['--data-dir', dataDir, '--synchronous', 'FULL', '--notification-token', NOTIFICATION_TOKEN],
    ],
    nodeArgs: startNodeArgs(ROOT),
    cpus: null,
    readiness: { line: true },
  });
  return { child, origin: String(child.ready.url).replace(/\/$/, ''), path: '/webhook' };
}

/** Scenario 7's floor (bench/servers/mix-baseline.ts): its webhook alone, its data on /dev/shm as the gateways' are. */
async function mixFloor(dataDir: string, flags: string | undefined) {
  const child = await spawnNode('mix floor', {
    script: 'bench/servers/mix-baseline.ts',
    // No graphql-ws connection is opened: the API key only has to be set.
    args: ['--data-dir', dataDir, '--api-key', 'unused', '--token', NOTIFICATION_TOKEN],
    // As the suite runs the hand-written references: with this checkout's `npm start` options (and `node=<flags>`).
    nodeArgs: [...startNodeArgs(ROOT), ...(flags ? flags.split(' ') : [])],
    cpus: null,
    readiness: { line: true },
  });
  return { child, origin: String(child.ready.url).replace(/\/$/, ''), path: WEBHOOK_PATH };
}

/** A gateway build (`dist`) under the bench's environment and `env`, FULL, its data on /dev/shm. */
async function ours(name: string, variantEnv: Record<string, string>, dist: string, dataDir: string) {
  // `node=<flags>`: more options for node, space-separated (e.g. `--cpu-prof --cpu-prof-dir=/tmp/p`, which NODE_OPTIONS
  // refuses).
  const { node: flags, ...env } = variantEnv;
  const main = path.join(dist, 'src/main.js');
  if (!fs.existsSync(main)) throw new Error(`no ${main}: run \`npm run build\``);
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const child = await spawnNode(`gateway ${name}`, {
    script: main,
    cwd: path.dirname(dist),
    // As the suite starts a gateway: with the options its own checkout's `npm start` gives node (bench/lib/build.ts).
    nodeArgs: [...startNodeArgs(path.dirname(dist)), ...(flags ? flags.split(' ') : [])],
    cpus: null,
    env: {
      // No cloud call is made: the upstream address only has to be set.
      ...gatewayEnv({ port, dataDir, stubUrl: 'http://127.0.0.1:9' }),
      SQLITE_SYNCHRONOUS: 'FULL',
      ...env,
    },
    readiness: { url: `${origin}/readyz` },
    timeoutMs: 60_000,
  });
  return { child, origin, path: WEBHOOK_PATH };
}

async function gateway(name: string, env: Record<string, string>, dist: string) {
  const dataDir = fs.mkdtempSync(path.join('/dev/shm', `intake-gateways-${name}-`));
  const {
    child,
    origin,
    path: route,
  } = env.baseline === '1'
    ? await baseline(dataDir)
    : env.mix === '1'
      ? await mixFloor(dataDir, env.node)
      : await ours(name, env, dist, dataDir);
  const pool = new Pool(origin, { connections: 64 });
  const one = async (): Promise<void> => {
    const res = await pool.request({
      method: 'POST',
      path: route,
      headers,
      body: template.replace('{{uuid}}', randomUUID()),
    });
    const text = await res.body.text();
    if (res.statusCode !== 204) throw new Error(`${name}: ${res.statusCode} ${text}`);
  };
  /** µs per notification: every thread, and the main thread alone. */
  const block = async (): Promise<{ all: number; main: number }> => {
    const pid = child.child.pid!;
    const cpu0 = processCpu(pid);
    const main0 = mainThreadCpu(pid);
    if (rate === null) await closedLoop(n, inflight, one);
    else await openLoop(n, rate, one);
    return { all: ((processCpu(pid) - cpu0) / n) * 1e6, main: ((mainThreadCpu(pid) - main0) / n) * 1e6 };
  };
  const stop = async () => {
    await pool.close();
    await child.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  };
  return { block, stop };
}

// Each variant: a name, the environment over the bench's, and the build it runs (`--variant name:dir=D,K=V,K=V`;
// without `dir`, this tree's dist/).
const variants = parseVariants(cli.variant, ['a:', 'b:']);
const gws: Array<{ name: string; gw: Awaited<ReturnType<typeof gateway>>; figures: number[]; mains: number[] }> = [];
for (const v of variants) gws.push({ name: v.name, gw: await gateway(v.name, v.env, v.dist), figures: [], mains: [] });
// Warm-up: V8's optimizing compiler and SQLite's page cache settle over a few thousand notifications.
for (let i = 0; i < Number(cli.warmup); i++) for (const g of gws) await g.gw.block();
const load = rate === null ? `closed loop, ${inflight} in flight` : `open loop at ${rate}/s`;
console.log(`${load}, ${n} notifications a block, load average ${fs.readFileSync('/proc/loadavg', 'utf8').trim()}`);
for (let r = 0; r < rounds; r++) {
  // The order turns each round, so that no variant always follows the same one.
  const order = gws.map((_, i) => gws[(i + r) % gws.length]!);
  for (const g of order) {
    const { all, main } = await g.gw.block();
    g.figures.push(all);
    g.mains.push(main);
  }
  console.log(
    `round ${r}: ${gws.map((g) => `${g.name} ${g.figures.at(-1)!.toFixed(1)} (main thread ${g.mains.at(-1)!.toFixed(1)})`).join(', ')} µs`,
  );
}
const median = (xs: number[]) => {
  const s = [...xs].sort((p, q) => p - q);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const first = gws[0]!;
for (const g of gws) {
  const d = g.figures.map((f, i) => f - first.figures[i]!);
  const ratio = g.figures.map((f, i) => f / first.figures[i]!);
  console.log(
    `${g.name}: median ${median(g.figures).toFixed(1)} µs (range ${Math.min(...g.figures).toFixed(1)}–${Math.max(...g.figures).toFixed(1)}); ` +
      `${g.name} − ${first.name} by round: median ${median(d).toFixed(1)} µs, range ${Math.min(...d).toFixed(1)}–${Math.max(...d).toFixed(1)}, ` +
      `ratio median ${median(ratio).toFixed(3)} (${Math.min(...ratio).toFixed(3)}–${Math.max(...ratio).toFixed(3)}), ${d.filter((x) => x < 0).length}/${d.length} rounds below`,
  );
  const dm = g.mains.map((f, i) => f - first.mains[i]!);
  console.log(
    `  main thread: median ${median(g.mains).toFixed(1)} µs (range ${Math.min(...g.mains).toFixed(1)}–${Math.max(...g.mains).toFixed(1)}); ` +
      `− ${first.name} by round: median ${median(dm).toFixed(1)} µs, range ${Math.min(...dm).toFixed(1)}–${Math.max(...dm).toFixed(1)}`,
  );
}
console.log(`load average at the end ${fs.readFileSync('/proc/loadavg', 'utf8').trim()}`);
for (const g of gws) await g.gw.stop();
process.exit(0);
