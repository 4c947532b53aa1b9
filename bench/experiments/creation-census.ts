/**
 * What a durable creation allocates and which functions it runs (docs/decisions/088): the gateway from dist/
 * (`npm run build` first) in this process, SQLITE_SYNCHRONOUS=FULL, the bench's upstream stub, scenario 1's
 * createNetwork with a fresh key, driven by a forked child (so that the driver's own work is not counted) with
 * `--inflight` in flight. After a warm-up, over `--n` creations:
 *
 * - allocation: V8's sampling heap profiler (`HeapProfiler.startSampling`, `--interval` bytes, objects later collected
 *   by either GC included); bytes and objects per creation, by allocation site (the function that allocated and
 *   its caller), the largest `--top`;
 * - calls: V8's precise coverage with call counts (as test/events/event-path-files.test.ts takes it); every function
 *   run, and how often per creation, the largest `--top` (gateway code, then libraries).
 *
 *   npx tsx bench/experiments/creation-census.ts [--n 3000] [--inflight 16] [--interval 256] [--top 40] [--gc]
 *     [--promotion] [--survivors] [--query DOCUMENT] [--synchronous FULL|NORMAL] [--dist /path/to/another/dist]
 *     [--env NAME=VALUE …] [--connections N] [--rate R]
 *
 * With `--gc` the young generation's volume is read too (scavenges counted by the `gc` performance entries, times
 * the new space's half), for a figure that does not depend on the sampler.
 * With `--promotion`, what reaches the old generation per request: the old space's growth over 20 blocks of `n / 10`,
 * the median of those without a mark-compact (docs/decisions/120). With `--survivors` the allocation table keeps only
 * the objects no scavenge collected (promoted, or made in the old generation). `--query` sends that document (no
 * variables) instead of the creation, for a request to compare with; `--synchronous` sets SQLITE_SYNCHRONOUS; each
 * `--env NAME=VALUE` one more of the gateway's variables (GRAPHQL_COMPILED_MUTATIONS=false: graphql-js runs it);
 * `--connections N` sends each request on the next of N connections in turn, as an open loop spreads them; `--rate R`
 * sends R a second on a fixed schedule (an open loop, as trickle-creation.ts does) instead of `--inflight` at a time.
 */
import { fork } from 'node:child_process';
import fs from 'node:fs';
import inspector from 'node:inspector/promises';
import os from 'node:os';
import path from 'node:path';
import { PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import v8 from 'node:v8';
import { Pool } from 'undici';

import { printAllocations, printCalls, printPromotion, type Profile } from '../lib/census.js';
import { closedLoop, openLoop } from '../lib/cpu.js';
import { gatewayEnv } from '../lib/env.js';
import { ROOT, spawnNode } from '../lib/processes.js';
import { createNetworkBody, createOnce } from '../scenarios/mutation.js';

const { values: cli } = parseArgs({
  options: {
    n: { type: 'string', default: '3000' },
    inflight: { type: 'string', default: '16' },
    interval: { type: 'string', default: '256' },
    top: { type: 'string', default: '40' },
    gc: { type: 'boolean', default: false },
    survivors: { type: 'boolean', default: false },
    promotion: { type: 'boolean', default: false },
    query: { type: 'string' },
    dist: { type: 'string' },
    env: { type: 'string', multiple: true },
    synchronous: { type: 'string', default: 'FULL' },
    driver: { type: 'string' },
    connections: { type: 'string' },
    rate: { type: 'string' },
  },
});

if (cli.driver !== undefined) {
  // The driver: creations on the parent's word `{ n }`, `done` when they are answered.
  const origin = cli.driver;
  const inflight = Number(cli.inflight);
  const pool = new Pool(origin, { connections: Math.max(inflight, 64) });
  const fixed = cli.query === undefined ? null : JSON.stringify({ query: cli.query });
  const body = fixed ?? (await createNetworkBody(origin, 'census'));
  // --connections N: each request on the next of N connections in turn (an open loop's many connections, each
  // quiet between its requests), instead of the pool's first free one.
  const spread = Array.from({ length: Number(cli.connections ?? 0) }, () => new Pool(origin, { connections: 1 }));
  let next = 0;
  const one = (): Promise<void> => createOnce(spread.length ? spread[next++ % spread.length]! : pool, body);
  process.on('message', async (m: { n: number } | 'exit') => {
    if (m === 'exit') process.exit(0);
    if (cli.rate === undefined) await closedLoop(m.n, inflight, one);
    else await openLoop(Number(cli.rate), m.n, one);
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
  const stub = await spawnNode('upstream', {
    script: 'bench/servers/upstream.ts',
    cpus: null,
    readiness: { line: true },
  });
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'creation-census-'));
  const { loadConfig } = (await import(
    path.join(dist, 'src/config/index.js')
  )) as typeof import('../../src/config/index.js');
  const { startGateway } = (await import(
    path.join(dist, 'src/gateway/start.js')
  )) as typeof import('../../src/gateway/start.js');
  const { createLogger } = (await import(path.join(dist, 'src/logger.js'))) as typeof import('../../src/logger.js');
  const env = {
    ...gatewayEnv({ port: 0, dataDir, stubUrl: String(stub.ready.url) }),
    SQLITE_SYNCHRONOUS: cli.synchronous,
    ...Object.fromEntries((cli.env ?? []).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)])),
  };
  const gateway = await startGateway(loadConfig(env), {
    port: 0,
    host: '127.0.0.1',
    logger: createLogger({ level: 'warn' } as never),
  });

  const driver = fork(
    fileURLToPath(import.meta.url),
    [
      '--driver',
      gateway.url,
      '--inflight',
      cli.inflight,
      ...(cli.query === undefined ? [] : ['--query', cli.query]),
      ...(cli.connections === undefined ? [] : ['--connections', cli.connections]),
      ...(cli.rate === undefined ? [] : ['--rate', cli.rate]),
    ],
    {
      execArgv: ['--import', 'tsx'],
    },
  );
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
      `young GC: ${pauses} scavenges, ${((young * 1000) / n).toFixed(1)} µs of pause per creation; ≈ ${((pauses * semi) / n / 1024).toFixed(1)} KiB per creation (scavenges × half the new space, ${(semi / 1024).toFixed(0)} KiB)`,
    );
  }

  if (cli.promotion) await printPromotion(block, n, 'creation');

  // Allocation, by site.
  const interval = Number(cli.interval);
  await session.post('HeapProfiler.enable');
  await session.post('HeapProfiler.startSampling', {
    samplingInterval: interval,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: !cli.survivors,
  });
  await block(n);
  const { profile } = await session.post('HeapProfiler.stopSampling');
  await session.post('HeapProfiler.disable');
  printAllocations(profile as unknown as Profile, n, interval, top, 'creation');

  // Calls, by function.
  await session.post('Profiler.enable');
  await session.post('Profiler.startPreciseCoverage', { callCount: true, detailed: false });
  await block(200); // functions first run here (coverage counts from their next compile)
  await session.post('Profiler.takePreciseCoverage'); // resets the counts
  await block(n);
  const { result } = await session.post('Profiler.takePreciseCoverage');
  await session.post('Profiler.stopPreciseCoverage');
  await session.post('Profiler.disable');
  printCalls(result, n, top, 'creation');

  driver.send('exit');
  await gateway.close();
  await stub.stop();
  fs.rmSync(dataDir, { recursive: true, force: true });
  process.exit(0);
}

/** The profile as V8 sends it (Node's typings leave out the node ids and the samples). */
