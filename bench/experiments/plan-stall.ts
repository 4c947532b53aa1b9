/**
 * The largest allowed plans and the event loop (docs/decisions/038 and 053): one gateway in this process (sandbox
 * upstreams), planKafkaCluster over real HTTP on loopback, the event-loop delay (perf_hooks, 1 ms resolution) and the
 * process's CPU while plans run. A request that held the loop shows as a delay as long as its plan.
 *
 * 1. One plan of 10 … PROVISIONING_MAX_TOPICS topics (and one user): its time and the delay during it.
 * 2. The largest input within the default bounds: 100 topics, and 48 users with 50 ACLs and 50 group ACLs each (4,948
 *    list elements), with 1, 6 and 12 plans in flight at once, each sent by its own app (so that no per-app limit
 *    refuses one): the time until all have answered, the process's CPU, the longest event-loop delay, and the longest
 *    wait of a `ping` sent every 20 ms while they run. The row of 0 plans is 2 s of pings alone: what the machine's
 *    other load adds to every figure.
 *
 *   npx tsx bench/experiments/plan-stall.ts [topics, e.g. 10,50,100] [plans in flight, e.g. 0,1,6,12]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';

import { loadConfig } from '../../src/config/index.js';
import { startGateway } from '../../src/gateway/start.js';
import { createLogger } from '../../src/logger.js';

const SIZES = (process.argv[2] ?? '10,50,100').split(',').map(Number);
const IN_FLIGHT = (process.argv[3] ?? '0,1,6,12').split(',').map(Number);
const PLAN = `query($input: ProvisionKafkaClusterInput!) { planKafkaCluster(input: $input) { valid } }`;
const PING = 'mutation { ping }';

const input = (topics: number, users = 1, acls = 0) => ({
  project: { name: 'bench' },
  network: { title: 'net' },
  subnet: { title: 'sub', cidr: '10.70.0.0/24' },
  cluster: { title: 'kafka', instanceType: 'C2_MEDIUM' },
  topics: Array.from({ length: topics }, (_, i) => ({
    name: `topic-${i}`,
    partitions: 3,
    replicationFactor: 1,
    retentionMs: '3600000',
  })),
  users: Array.from({ length: users }, (_, i) => ({
    name: `svc-${i}`,
    password: 'Bench-secret-1',
    // Every ACL as the schema's defaults fill it in (pattern *, literal, rw): the smallest body per element.
    ...(acls > 0
      ? { acls: Array.from({ length: acls }, () => ({})), groupAcls: Array.from({ length: acls }, () => ({})) }
      : {}),
  })),
});
const LARGEST = input(100, 48, 50);
const listElements = (v: unknown): number =>
  Array.isArray(v)
    ? v.length + v.reduce<number>((n, x) => n + listElements(x), 0)
    : v && typeof v === 'object'
      ? Object.values(v).reduce<number>((n, x) => n + listElements(x), 0)
      : 0;

const APPS = Math.max(...IN_FLIGHT, 1);
const keyOf = (app: number) => `bench-plan-key-${app}-0123456789abcdef`;
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'plan-stall-'));
const config = loadConfig({
  PORT: '0',
  HOST: '127.0.0.1',
  DATA_DIR: dataDir,
  PROVISIONING_MAX_TOPICS: String(Math.max(100, ...SIZES)),
  GATEWAY_API_KEYS: Array.from({ length: APPS }, (_, i) => `bench-app-${i}:${keyOf(i)}`).join(','),
});
const gw = await startGateway(config, { logger: createLogger({ level: 'silent' }) });

async function post(
  app: number,
  query: string,
  variables: Record<string, unknown> = {},
): Promise<{ data?: Record<string, unknown>; errors?: unknown[] }> {
  const res = await request(`${gw.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${keyOf(app)}` },
    body: JSON.stringify({ query, variables }),
  });
  return (await res.body.json()) as { data?: Record<string, unknown>; errors?: unknown[] };
}

async function plan(app: number, given: unknown): Promise<void> {
  const body = await post(app, PLAN, { input: given });
  if (!(body.data?.planKafkaCluster as { valid?: boolean } | undefined)?.valid)
    throw new Error(`plan failed: ${JSON.stringify(body).slice(0, 500)}`);
}

const cpuMs = (since: NodeJS.CpuUsage) => {
  const d = process.cpuUsage(since);
  return (d.user + d.system) / 1000;
};

console.log('| topics | plan (ms) | event-loop delay max (ms) | p99 (ms) |\n|---|---|---|---|');
for (const n of SIZES) {
  await plan(0, input(n));
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  const t = performance.now();
  await plan(0, input(n));
  const ms = performance.now() - t;
  h.disable();
  console.log(`| ${n} | ${ms.toFixed(0)} | ${(h.max / 1e6).toFixed(1)} | ${(h.percentile(99) / 1e6).toFixed(1)} |`);
}

console.log(
  `\nLargest input: 100 topics, 48 users × (50 ACLs + 50 group ACLs): ${listElements(LARGEST).toLocaleString('en')} list elements, ` +
    `${(Buffer.byteLength(JSON.stringify({ query: PLAN, variables: { input: LARGEST } })) / 1024).toFixed(1)} KB request\n`,
);
console.log(
  '| plans in flight | all answered (ms) | CPU (ms) | CPU per plan (ms) | event-loop delay max (ms) | p99 (ms) | ping wait max (ms) | pings |\n|---|---|---|---|---|---|---|---|',
);
await plan(0, LARGEST);
for (const n of IN_FLIGHT) {
  await sleep(200);
  const h = monitorEventLoopDelay({ resolution: 1 });
  let running = true;
  const waits: number[] = [];
  const pinger = (async () => {
    while (running) {
      const t = performance.now();
      const res = await post(0, PING);
      if (res.data?.ping !== true) throw new Error(`ping failed: ${JSON.stringify(res)}`);
      waits.push(performance.now() - t);
      await sleep(20);
    }
  })();
  h.enable();
  const cpu = process.cpuUsage();
  const t = performance.now();
  // No plan: 2 s of pings alone, the floor of the figures on this machine at this moment (other load shows here).
  if (n === 0) await sleep(2000);
  else await Promise.all(Array.from({ length: n }, (_, app) => plan(app, LARGEST)));
  const ms = performance.now() - t;
  const used = cpuMs(cpu);
  h.disable();
  running = false;
  await pinger;
  console.log(
    `| ${n} | ${ms.toFixed(0)} | ${used.toFixed(0)} | ${n ? (used / n).toFixed(0) : '–'} | ${(h.max / 1e6).toFixed(1)} | ${(h.percentile(99) / 1e6).toFixed(1)} | ${Math.max(...waits).toFixed(1)} | ${waits.length} |`,
  );
}
await gw.close();
fs.rmSync(dataDir, { recursive: true, force: true });
