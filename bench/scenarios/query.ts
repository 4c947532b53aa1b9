import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';

import { loadConfig } from '../../src/config/index.js';
import { startGateway } from '../../src/gateway/start.js';
import { createLogger } from '../../src/logger.js';
import {
  API_KEY,
  baselineTarget,
  gatewayTarget,
  UPSTREAM_TOKEN,
  type BenchEnv,
  type ScenarioReport,
} from '../lib/env.js';
import { alternate, byTarget, graphql, mean } from '../lib/harness.js';
import { fmt, median } from '../lib/stats.js';

export const PROJECT_TREE =
  'query($id: ID!) { project(id: $id) { id name networks { id title subnets { id cidr } } } }';
const NETWORKS = 7;
const SUBNETS_PER_NETWORK = 6;

/** project → 7 networks → 6 subnets each: 50 resources on three levels. */
export async function seedTree(origin: string): Promise<string> {
  const project = await graphql(
    origin,
    API_KEY,
    'mutation($input: CreateProjectInput!) { createProject(input: $input) { project { id } } }',
    {
      input: { name: 'tree', description: 'query benchmark' },
    },
  );
  const projectId = project.createProject.project.id as string;
  for (let n = 0; n < NETWORKS; n++) {
    const net = await graphql(
      origin,
      API_KEY,
      'mutation($input: CreateNetworkInput!) { createNetwork(input: $input) { network { id } } }',
      {
        input: { projectId, title: `net-${n}` },
      },
    );
    const networkId = net.createNetwork.network.id as string;
    for (let s = 0; s < SUBNETS_PER_NETWORK; s++) {
      await graphql(
        origin,
        API_KEY,
        'mutation($input: CreateSubnetInput!) { createSubnet(input: $input) { subnet { id } } }',
        {
          input: { projectId, networkId, title: `subnet-${n}-${s}`, cidr: `10.${n}.${s}.0/24` },
        },
      );
    }
  }
  return projectId;
}

/** SQL statements one query costs, counted by a gateway in this process (store.stats) over the same upstream. */
async function statementsPerQuery(env: BenchEnv): Promise<{ statements: number; resources: number }> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-count-'));
  const config = loadConfig({
    DATA_DIR: dataDir,
    CLOUD_API_URL: env.stub.url,
    CLOUD_API_TOKEN: UPSTREAM_TOKEN,
    GATEWAY_API_KEYS: API_KEY,
    SANDBOX_UPSTREAMS: 'identification,verification,rfm,mobile-id',
    LOG_LEVEL: 'warn',
  });
  const logger = createLogger({ level: 'warn', destination: new Writable({ write: (_c, _e, cb) => cb() }) });
  const gw = await startGateway(config, { port: 0, host: '127.0.0.1', logger });
  try {
    const projectId = await seedTree(gw.url);
    const stats = gw.services.store.stats;
    const before = stats.queries;
    const data = await graphql(gw.url, API_KEY, PROJECT_TREE, { id: projectId });
    const statements = stats.queries - before;
    const nets = data.project.networks as Array<{ subnets: unknown[] }>;
    return { statements, resources: 1 + nets.length + nets.reduce((s, n) => s + n.subnets.length, 0) };
  } finally {
    await gw.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

export async function queryThroughput(env: BenchEnv): Promise<ScenarioReport> {
  env.log('scenario 3: query throughput (project tree of 50 resources from the store)');
  // Each gateway has its own store, so its own tree; the baseline reads the first gateway's file.
  const bodies = new Map<string, string>();
  for (const g of [env.gateway, ...env.others]) {
    bodies.set(g.name, JSON.stringify({ query: PROJECT_TREE, variables: { id: await seedTree(g.origin) } }));
  }
  bodies.set('baseline', bodies.get(env.gateway.name)!);
  const { statements, resources } = await statementsPerQuery(env);
  env.log(`  ${resources} resources, ${statements} SQL statements per query`);
  const targets = [
    baselineTarget(env, '/query'),
    gatewayTarget(env.gateway),
    ...env.others.map((o) => gatewayTarget(o)),
  ];
  const ms = await alternate(
    env.lg,
    targets,
    (t) => ({
      body: bodies.get(t.name)!,
      connections: env.options.connections,
      durationMs: env.options.durationMs,
      expectStatus: 200,
      graphql: true,
    }),
    { rounds: env.options.rounds, warmupMs: env.options.warmupMs, driverProcs: env.driverProcs, log: env.log },
  );
  const b = byTarget(ms, 'baseline');
  const g = byTarget(ms, env.gateway.name);
  const bRps = median(b.map((m) => m.result.rps));
  const gRps = median(g.map((m) => m.result.rps));
  const row = (name: string, list: typeof ms, rps: number) =>
    `| ${name} | ${fmt.int(rps)} | ${list.map((m) => fmt.int(m.result.rps)).join(' / ')} | ${fmt.ratio(rps / bRps)} | ${fmt.ms(mean(list.map((m) => m.result.latency.p50)))} | ${fmt.ms(mean(list.map((m) => m.result.latency.p99)))} | ${list.reduce((s, m) => s + m.result.errors, 0)} | ${fmt.pct(mean(list.map((m) => m.serverCpu)))} | ${fmt.pct(mean(list.map((m) => m.otherCpu)))} |`;
  const markdown = [
    `\`${PROJECT_TREE}\` over a project with ${NETWORKS} networks of ${SUBNETS_PER_NETWORK} subnets (${resources} resources, three levels). ` +
      "The baseline answers the same request from the gateway's SQLite file (read-only) with one prepared statement per level and builds the same JSON. " +
      `Closed loop, ${env.options.connections} connections, ${env.options.durationMs / 1000} s per measurement, ${env.options.rounds} alternating rounds.`,
    '',
    `SQL statements per query: **${statements}** (levels: 3; counted with the store's statement counter on a gateway in the orchestrator process).`,
    '',
    '| server | req/s (median) | req/s per round | ratio to baseline | p50 ms | p99 ms | errors | server CPU | other CPU |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
    row('baseline', b, bRps),
    row(env.gateway.name, g, gRps),
    ...env.others.map((o) => {
      const list = byTarget(ms, o.name);
      return row(o.name, list, median(list.map((m) => m.result.rps)));
    }),
  ].join('\n');
  return {
    id: 3,
    title: 'Query throughput',
    markdown,
    targets: [
      {
        target: 'one SQL statement per level of the tree (3)',
        measured: `${statements} statements for ${resources} resources`,
        met: statements === 3,
      },
      {
        target: 'query ≥ 0.8 of its baseline',
        measured: `${fmt.ratio(gRps / bRps)} (${fmt.int(gRps)} vs ${fmt.int(bRps)} req/s)`,
        met: gRps >= 0.8 * bRps,
      },
    ],
  };
}
