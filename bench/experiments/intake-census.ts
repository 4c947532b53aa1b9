/**
 * What one mobile-ID notification allocates and which functions it runs (docs/decisions/094, the method of
 * creation-census.ts and decision 088): the gateway from dist/ (`npm run build` first) in this process,
 * SQLITE_SYNCHRONOUS=FULL, scenario 4's success notification with a fresh auth_req_id, driven by a forked child (so
 * that the driver's own work is not counted) with `--inflight` in flight. After a warm-up, over `--n` notifications:
 *
 * - allocation: V8's sampling heap profiler (`HeapProfiler.startSampling`, `--interval` bytes, objects later collected
 *   by either GC included); bytes and objects per notification, by allocation site (the function that allocated and
 *   its caller), the largest `--top`;
 * - time: V8's sampling CPU profiler (every 100 µs), self time per function and per file (a direction: the sampler
 *   itself costs the main thread ~15 %, decision 080);
 * - calls: V8's precise coverage with call counts (as test/events/event-path-files.test.ts takes it); every function
 *   run, and how often per notification, the largest `--top` (gateway code, then libraries).
 *
 *   npx tsx bench/experiments/intake-census.ts [--n 3000] [--inflight 8] [--interval 256] [--top 40] [--gc]
 *     [--dist /path/to/another/dist]
 *
 * With `--gc` the young generation's volume is read too (scavenges counted by the `gc` performance entries, times
 * the new space's half), for a figure that does not depend on the sampler.
 */
import { fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import inspector from 'node:inspector/promises';
import os from 'node:os';
import path from 'node:path';
import { PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import v8 from 'node:v8';
import { Pool } from 'undici';

import { closedLoop } from '../lib/cpu.js';
import { gatewayEnv, NOTIFICATION_TOKEN } from '../lib/env.js';
import { ROOT } from '../lib/processes.js';
import { notificationBody, WEBHOOK_PATH } from '../scenarios/webhook.js';

const { values: cli } = parseArgs({
  options: {
    n: { type: 'string', default: '3000' },
    inflight: { type: 'string', default: '8' },
    interval: { type: 'string', default: '256' },
    top: { type: 'string', default: '40' },
    gc: { type: 'boolean', default: false },
    driver: { type: 'string' },
    dist: { type: 'string' },
  },
});

if (cli.driver !== undefined) {
  // The driver: notifications on the parent's word `{ n }`, `done` when they are answered.
  const origin = cli.driver;
  const inflight = Number(cli.inflight);
  const template = notificationBody();
  const pool = new Pool(origin, { connections: Math.max(inflight, 64) });
  const headers = {
    'content-type': 'application/json',
    authorization: `Bearer ${NOTIFICATION_TOKEN}`,
    'x-mobileid-request-id': 'census',
  };
  const one = async (): Promise<void> => {
    const res = await pool.request({
      method: 'POST',
      path: WEBHOOK_PATH,
      headers,
      body: template.replace('{{uuid}}', randomUUID()),
    });
    const text = await res.body.text();
    if (res.statusCode !== 204) throw new Error(`${res.statusCode} ${text}`);
  };
  process.on('message', async (m: { n: number } | 'exit') => {
    if (m === 'exit') process.exit(0);
    await closedLoop(m.n, inflight, one);
    process.send!('done');
  });
  process.send!('ready');
} else {
  await census();
}

async function census(): Promise<void> {
  const n = Number(cli.n);
  const top = Number(cli.top);
  const dist = path.resolve(cli.dist ?? path.join(ROOT, 'dist'));
  if (!fs.existsSync(path.join(dist, 'src/main.js'))) throw new Error(`no ${dist}/src/main.js: run \`npm run build\``);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'intake-census-'));
  const { loadConfig } = (await import(
    path.join(dist, 'src/config/index.js')
  )) as typeof import('../../src/config/index.js');
  const { startGateway } = (await import(
    path.join(dist, 'src/gateway/start.js')
  )) as typeof import('../../src/gateway/start.js');
  const { createLogger } = (await import(path.join(dist, 'src/logger.js'))) as typeof import('../../src/logger.js');
  const env = { ...gatewayEnv({ port: 0, dataDir, stubUrl: 'http://127.0.0.1:9' }), SQLITE_SYNCHRONOUS: 'FULL' };
  const gateway = await startGateway(loadConfig(env), {
    port: 0,
    host: '127.0.0.1',
    logger: createLogger({ level: 'warn' } as never),
  });

  const driver = fork(fileURLToPath(import.meta.url), ['--driver', gateway.url, '--inflight', cli.inflight], {
    execArgv: ['--import', 'tsx'],
  });
  const said = (word: string) =>
    new Promise<void>((resolve) => {
      const on = (m: unknown) => {
        if (m !== word) return;
        driver.off('message', on);
        resolve();
      };
      driver.on('message', on);
    });
  await said('ready');
  const block = async (count: number) => {
    const done = said('done');
    driver.send({ n: count });
    await done;
  };
  for (let i = 0; i < 3; i++) await block(n);

  const session = new inspector.Session();
  session.connect();

  if (cli.gc) {
    let young = 0;
    let pauses = 0;
    const obs = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        if ((e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind === 1)
          ((young += e.duration), pauses++);
      }
    });
    obs.observe({ entryTypes: ['gc'] });
    await block(n);
    obs.disconnect();
    // Each scavenge starts when the new space's half is full: scavenges × its size is the young volume.
    const semi = v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')!.space_size / 2;
    console.log(
      `young GC: ${pauses} scavenges, ${((young * 1000) / n).toFixed(1)} µs of pause per notification; ≈ ${((pauses * semi) / n / 1024).toFixed(1)} KiB per notification (scavenges × half the new space, ${(semi / 1024).toFixed(0)} KiB)`,
    );
  }

  // Allocation, by site.
  const interval = Number(cli.interval);
  await session.post('HeapProfiler.enable');
  await session.post('HeapProfiler.startSampling', {
    samplingInterval: interval,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  await block(n);
  const { profile } = await session.post('HeapProfiler.stopSampling');
  await session.post('HeapProfiler.disable');
  printAllocations(profile as unknown as Profile, n, interval, top);

  // Time, by function: V8's sampling CPU profiler (every 100 µs) over the same block, self time per function.
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 100 });
  await session.post('Profiler.start');
  await block(n);
  const { profile: cpu } = await session.post('Profiler.stop');
  await session.post('Profiler.disable');
  printTime(cpu as unknown as CpuProfile, n, top);

  // Calls, by function.
  await session.post('Profiler.enable');
  await session.post('Profiler.startPreciseCoverage', { callCount: true, detailed: false });
  await block(200); // functions first run here (coverage counts from their next compile)
  await session.post('Profiler.takePreciseCoverage'); // resets the counts
  await block(n);
  const { result } = await session.post('Profiler.takePreciseCoverage');
  await session.post('Profiler.stopPreciseCoverage');
  await session.post('Profiler.disable');
  printCalls(result, n, top);

  driver.send('exit');
  await gateway.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
  process.exit(0);
}

/** The profile as V8 sends it (Node's typings leave out the node ids and the samples). */
type Node = Omit<inspector.HeapProfiler.SamplingHeapProfileNode, 'children'> & { id: number; children: Node[] };
type Profile = { head: Node; samples: Array<{ size: number; nodeId: number }> };

function short(url: string): string {
  const i = url.indexOf('/dist/');
  if (i >= 0) return url.slice(i + 1);
  const j = url.lastIndexOf('/node_modules/');
  if (j >= 0) return url.slice(j + '/node_modules/'.length);
  return url.replace(/^file:\/\/\//, '/');
}

function frame(n: Node): string {
  const f = n.callFrame;
  if (!f.url) return f.functionName || '(native)';
  return `${f.functionName || '(anonymous)'} ${short(f.url)}:${f.lineNumber + 1}`;
}

function printAllocations(profile: Profile, n: number, interval: number, top: number) {
  // Each sample stands for 1 / (1 − e^(−size/interval)) objects of its size (V8's own scaling of selfSize).
  const objectsBySample = new Map<number, number>();
  for (const s of profile.samples) {
    objectsBySample.set(s.nodeId, (objectsBySample.get(s.nodeId) ?? 0) + 1 / (1 - Math.exp(-s.size / interval)));
  }
  const sites = new Map<string, { bytes: number; objects: number }>();
  const byFile = new Map<string, number>();
  let bytes = 0;
  let objects = 0;
  const walk = (node: Node, parents: Node[]) => {
    if (node.selfSize > 0) {
      // The site: the nearest frame with a script (a builtin's allocation is charged to its JavaScript caller), and
      // that frame's caller.
      const chain = [...parents, node].filter((p) => p.callFrame.url);
      const at = chain.at(-1);
      const key = at
        ? `${frame(node) === frame(at) ? '' : `[${frame(node)}] `}${frame(at)} ← ${chain.at(-2) ? frame(chain.at(-2)!) : '?'}`
        : frame(node);
      const o = objectsBySample.get(node.id) ?? 0;
      const s = sites.get(key) ?? { bytes: 0, objects: 0 };
      s.bytes += node.selfSize;
      s.objects += o;
      sites.set(key, s);
      const file = at ? short(at.callFrame.url) : '(native)';
      byFile.set(file, (byFile.get(file) ?? 0) + node.selfSize);
      bytes += node.selfSize;
      objects += o;
    }
    for (const c of node.children) walk(c, [...parents, node]);
  };
  walk(profile.head, []);
  console.log(
    `\nallocation: ${(bytes / n).toFixed(0)} bytes and ${(objects / n).toFixed(0)} objects per notification (sampling every ${interval} bytes)`,
  );
  console.log('\nby file (bytes per notification):');
  for (const [f, b] of [...byFile].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(`  ${(b / n).toFixed(0).padStart(6)}  ${f}`);
  console.log('\nby site (bytes, objects per notification):');
  for (const [k, s] of [...sites].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, top)) {
    console.log(`  ${(s.bytes / n).toFixed(0).padStart(6)} ${(s.objects / n).toFixed(1).padStart(6)}  ${k}`);
  }
}

type CpuProfile = {
  nodes: Array<{ id: number; callFrame: inspector.Runtime.CallFrame }>;
  samples: number[];
  timeDeltas: number[];
};

/** Self time per function (µs per notification, from the samples' time deltas), and per file. */
function printTime(profile: CpuProfile, n: number, top: number) {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const byFunction = new Map<string, number>();
  const byFile = new Map<string, number>();
  let total = 0;
  profile.samples.forEach((id, i) => {
    const us = profile.timeDeltas[i + 1] ?? 0;
    const f = byId.get(id)!.callFrame;
    const name = f.url ? `${f.functionName || '(anonymous)'} ${short(f.url)}:${f.lineNumber + 1}` : f.functionName;
    byFunction.set(name, (byFunction.get(name) ?? 0) + us);
    const file = f.url ? short(f.url) : f.functionName;
    byFile.set(file, (byFile.get(file) ?? 0) + us);
    total += us;
  });
  console.log(`\ntime: ${(total / n).toFixed(1)} µs of the main thread's samples per notification (idle included)`);
  console.log('\nby file (µs per notification):');
  for (const [f, us] of [...byFile].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(`  ${(us / n).toFixed(2).padStart(7)}  ${f}`);
  console.log('\nby function, self time (µs per notification):');
  for (const [f, us] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(`  ${(us / n).toFixed(2).padStart(7)}  ${f}`);
}

function printCalls(result: inspector.Profiler.ScriptCoverage[], n: number, top: number) {
  const rows: Array<{ name: string; per: number; gateway: boolean }> = [];
  for (const script of result) {
    if (!script.url.startsWith('file:') || script.url.includes('/bench/')) continue;
    for (const f of script.functions) {
      const count = f.ranges[0]!.count;
      if (count < n / 2) continue;
      rows.push({
        name: `${f.functionName || '(anonymous)'} ${short(script.url)}`,
        per: count / n,
        gateway: script.url.includes('/dist/src/'),
      });
    }
  }
  for (const gateway of [true, false]) {
    const mine = rows.filter((r) => r.gateway === gateway).sort((a, b) => b.per - a.per);
    const total = mine.reduce((s, r) => s + r.per, 0);
    console.log(
      `\n${gateway ? 'gateway' : 'library'} functions run at least every other notification: ${mine.length}, ${total.toFixed(0)} calls per notification`,
    );
    for (const r of gateway ? mine : mine.slice(0, top)) console.log(`  ${r.per.toFixed(2).padStart(7)}  ${r.name}`);
  }
}
