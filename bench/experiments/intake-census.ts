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
 *   npx tsx bench/experiments/intake-census.ts [--n 3000] [--inflight 8] [--interval 256] [--top 40] [--gc] [--promotion]
 *     [--dist /path/to/another/dist]
 *
 * With `--gc` the young generation's volume is read too (scavenges counted by the `gc` performance entries, times
 * the new space's half), for a figure that does not depend on the sampler. With `--promotion`, what reaches the old
 * generation per notification (bench/lib/census.ts, docs/decisions/120).
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

import {
  printAllocations,
  printCalls,
  printPromotion,
  printTime,
  type CpuProfile,
  type Profile,
} from '../lib/census.js';
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
    promotion: { type: 'boolean', default: false },
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

  if (cli.promotion) await printPromotion(block, n, 'notification');

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
  printAllocations(profile as unknown as Profile, n, interval, top, 'notification');

  // Time, by function: V8's sampling CPU profiler (every 100 µs) over the same block, self time per function.
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 100 });
  await session.post('Profiler.start');
  await block(n);
  const { profile: cpu } = await session.post('Profiler.stop');
  await session.post('Profiler.disable');
  printTime(cpu as unknown as CpuProfile, n, top, 'notification');

  // Calls, by function.
  await session.post('Profiler.enable');
  await session.post('Profiler.startPreciseCoverage', { callCount: true, detailed: false });
  await block(200); // functions first run here (coverage counts from their next compile)
  await session.post('Profiler.takePreciseCoverage'); // resets the counts
  await block(n);
  const { result } = await session.post('Profiler.takePreciseCoverage');
  await session.post('Profiler.stopPreciseCoverage');
  await session.post('Profiler.disable');
  printCalls(result, n, top, 'notification');

  driver.send('exit');
  await gateway.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
  process.exit(0);
}

/** The profile as V8 sends it (Node's typings leave out the node ids and the samples). */
