/**
 * SQLITE_CLAIM_WITHOUT_SYNC=true against false (docs/decisions/078): two gateways of this checkout side by side
 * (`node --import tsx src/main.ts`, the bench's environment, SQLITE_SYNCHRONOUS=FULL, data on the bench's disk), the
 * bench's upstream stub, scenario 1's createNetwork with a fresh key each time. Blocks alternate (A, B, B, A, …); a
 * block is `--n` creations either in a closed loop of `--inflight` or, with `--rate`, an open loop at that many
 * creations per second. Per block: the gateway process's CPU (every thread, /proc) per creation, and its fdatasyncs
 * and COMMITs per creation (claim-sync-counter.ts, loaded into both). The first two rounds are warm-up.
 *
 *   npx tsx bench/experiments/claim-sync-ab.ts [--rounds 12] [--n 1500] [--inflight 1] [--rate 700]
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';

import { closedLoop, processCpu } from '../lib/cpu.js';
import { API_KEY, gatewayEnv } from '../lib/env.js';
import { freePort, ROOT, spawnNode, type Proc } from '../lib/processes.js';
import { createNetworkBody } from '../scenarios/mutation.js';

const { values: cli } = parseArgs({
  options: {
    rounds: { type: 'string', default: '12' },
    n: { type: 'string', default: '1500' },
    inflight: { type: 'string', default: '1' },
    rate: { type: 'string' },
  },
});
const rounds = Number(cli.rounds);
const n = Number(cli.n);
const inflight = Number(cli.inflight);
const rate = cli.rate === undefined ? null : Number(cli.rate);

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'claim-sync-ab-'));
const stub = await spawnNode('upstream', {
  script: 'bench/servers/upstream.ts',
  cpus: null,
  readiness: { line: true },
});
const stubUrl = String(stub.ready.url);

interface Side {
  name: 'durable' | 'visible';
  proc: Proc;
  pool: Pool;
  body: string;
  counts: string;
}

async function start(name: Side['name'], claimWithoutSync: boolean): Promise<Side> {
  const port = await freePort();
  const dataDir = path.join(root, name);
  fs.mkdirSync(dataDir);
  const counts = path.join(root, `${name}.counts.json`);
  const origin = `http://127.0.0.1:${port}`;
  const proc = await spawnNode(`gateway (${name})`, {
    script: 'src/main.ts',
    cwd: ROOT,
    cpus: null,
    nodeArgs: ['--import', pathToFileURL(path.join(ROOT, 'bench/experiments/claim-sync-counter.ts')).href],
    env: {
      ...gatewayEnv({ port, dataDir, stubUrl }),
      SQLITE_SYNCHRONOUS: 'FULL',
      SQLITE_CLAIM_WITHOUT_SYNC: String(claimWithoutSync),
      CLAIM_SYNC_COUNTS: counts,
    },
    readiness: { url: `${origin}/readyz` },
    timeoutMs: 60_000,
  });
  const body = await createNetworkBody(origin, 'ab');
  return { name, proc, pool: new Pool(origin, { connections: Math.max(inflight, 64) }), body, counts };
}

const sides: Side[] = [];
// A failure mid-run (a refused request, a crash) still stops every process this run started.
process.on('exit', () => {
  for (const s of sides) s.proc.child.kill();
  stub.child.kill();
});
sides.push(await start('durable', false), await start('visible', true));
const readCounts = async (s: Side) => {
  await sleep(120);
  return JSON.parse(fs.readFileSync(s.counts, 'utf8')) as { syncs: number; commits: number };
};

async function one(s: Side, latencies: number[]): Promise<void> {
  const t0 = performance.now();
  const res = await s.pool.request({
    method: 'POST',
    path: '/graphql',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
    body: s.body.replace('{{uuid}}', randomUUID()),
  });
  const text = await res.body.text();
  if (res.statusCode !== 200 || text.includes('"errors"')) throw new Error(`${res.statusCode} ${text}`);
  latencies.push(performance.now() - t0);
}

async function block(s: Side, latencies: number[]): Promise<void> {
  if (rate === null) return closedLoop(n, inflight, () => one(s, latencies));
  const started = performance.now();
  const all: Promise<void>[] = [];
  for (let i = 0; i < n; i++) {
    const due = started + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 1) await sleep(wait);
    all.push(one(s, latencies));
  }
  await Promise.all(all);
}

type Figures = { cpuUs: number; syncs: number; commits: number; p50: number; p99: number };
const results: Record<Side['name'], Figures[]> = { durable: [], visible: [] };
const pct = (a: number[], p: number) => [...a].sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor(a.length * p))]!;
for (let r = 0; r < rounds; r++) {
  const order = r % 2 ? [sides[1]!, sides[0]!] : [sides[0]!, sides[1]!];
  for (const s of order) {
    const c0 = await readCounts(s);
    const cpu0 = processCpu(s.proc.child.pid!);
    const latencies: number[] = [];
    await block(s, latencies);
    const cpu = processCpu(s.proc.child.pid!) - cpu0;
    const c1 = await readCounts(s);
    results[s.name].push({
      cpuUs: (cpu / n) * 1e6,
      syncs: (c1.syncs - c0.syncs) / n,
      commits: (c1.commits - c0.commits) / n,
      p50: pct(latencies, 0.5),
      p99: pct(latencies, 0.99),
    });
  }
  const f = (x: Figures) =>
    `${x.cpuUs.toFixed(0)} µs, ${x.syncs.toFixed(2)} syncs, ${x.commits.toFixed(2)} commits, p50 ${x.p50.toFixed(2)} p99 ${x.p99.toFixed(2)} ms`;
  console.log(`round ${r}: durable ${f(results.durable.at(-1)!)} | visible ${f(results.visible.at(-1)!)}`);
}
const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]!;
const d = results.durable.slice(2);
const v = results.visible.slice(2);
const ratios = v.map((x, i) => x.cpuUs / d[i]!.cpuUs).sort((a, b) => a - b);
const med = (rs: Figures[], k: keyof Figures) => median(rs.map((x) => x[k])).toFixed(k === 'cpuUs' ? 0 : 2);
console.log(
  `${rate === null ? `inflight ${inflight}` : `rate ${rate}/s`}, ${n} per block, ${ratios.length} rounds (medians):\n` +
    `  claim waits for its sync: ${med(d, 'cpuUs')} µs CPU, ${med(d, 'syncs')} syncs, ${med(d, 'commits')} commits, p50 ${med(d, 'p50')} ms, p99 ${med(d, 'p99')} ms per creation\n` +
    `  claim without its sync:   ${med(v, 'cpuUs')} µs CPU, ${med(v, 'syncs')} syncs, ${med(v, 'commits')} commits, p50 ${med(v, 'p50')} ms, p99 ${med(v, 'p99')} ms per creation\n` +
    `  CPU ratio without/with: median ${median(ratios).toFixed(3)}, range ${ratios[0]!.toFixed(3)}..${ratios.at(-1)!.toFixed(3)}`,
);
for (const s of sides) {
  await s.pool.close();
  await s.proc.stop();
}
await stub.stop();
fs.rmSync(root, { recursive: true, force: true });
process.exit(0);
