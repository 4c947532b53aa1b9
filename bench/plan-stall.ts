/**
 * The largest allowed plan and the event loop while it runs (docs/decisions/038): one gateway in this process
 * (sandbox upstreams), planKafkaCluster with 10 … PROVISIONING_MAX_TOPICS topics over real HTTP on loopback, the
 * time of each plan and the event-loop delay (perf_hooks, 1 ms resolution) during it. A request that held the loop
 * shows as a delay as long as the plan itself.
 *
 *   npx tsx bench/plan-stall.ts [topics, e.g. 10,50,100]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { request } from 'undici';
import { startGateway } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/logger.js';

const SIZES = (process.argv[2] ?? '10,50,100').split(',').map(Number);
const PLAN = `query($input: ProvisionKafkaClusterInput!) { planKafkaCluster(input: $input) { valid } }`;
const input = (n: number) => ({
  project: { name: 'bench' },
  network: { title: 'net' },
  subnet: { title: 'sub', cidr: '10.70.0.0/24' },
  cluster: { title: 'kafka', instanceType: 'C2_MEDIUM' },
  topics: Array.from({ length: n }, (_, i) => ({ name: `topic-${i}`, partitions: 3, replicationFactor: 1, retentionMs: '3600000' })),
  users: [{ name: 'svc', password: 'Bench-secret-1' }],
});

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'plan-stall-'));
const config = loadConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, PROVISIONING_MAX_TOPICS: String(Math.max(...SIZES)) });
const gw = await startGateway(config, { logger: createLogger({ level: 'silent' }) });
const plan = async (n: number) => {
  const res = await request(`${gw.url}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: PLAN, variables: { input: input(n) } }) });
  const body = (await res.body.json()) as { data?: { planKafkaCluster?: { valid: boolean } } };
  if (!body.data?.planKafkaCluster?.valid) throw new Error(`plan of ${n} topics failed: ${JSON.stringify(body)}`);
};
console.log('| topics | plan (ms) | event-loop delay max (ms) | p99 (ms) |\n|---|---|---|---|');
for (const n of SIZES) {
  await plan(n);
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  const t = performance.now();
  await plan(n);
  const ms = performance.now() - t;
  h.disable();
  console.log(`| ${n} | ${ms.toFixed(0)} | ${(h.max / 1e6).toFixed(1)} | ${(h.percentile(99) / 1e6).toFixed(1)} |`);
}
await gw.close();
fs.rmSync(dataDir, { recursive: true, force: true });
