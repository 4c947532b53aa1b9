import { alternate, byTarget, graphql, mean, type Measurement, type Target } from '../lib/harness.js';
import { API_KEY, baselineTarget, gatewayTarget, type BenchEnv, type ScenarioReport } from '../lib/env.js';
import { fmt, median } from '../lib/stats.js';

export const CREATE_NETWORK =
  'mutation($input: CreateNetworkInput!, $key: UUID) { createNetwork(input: $input, idempotencyKey: $key) { network { id title } idempotencyKey replayed } }';

/** The request body of scenarios 1 and 2: the same bytes go to the gateway and to the baseline. */
export async function mutationBody(env: BenchEnv): Promise<string> {
  const data = await graphql<{ createProject: { project: { id: string } } }>(
    env.gateway.origin,
    API_KEY,
    'mutation($input: CreateProjectInput!) { createProject(input: $input) { project { id } } }',
    { input: { name: 'bench', description: 'benchmark project' } },
  );
  const projectId = data.createProject.project.id;
  // `{{uuid}}`: a fresh idempotency key on every request, so every request is a first call upstream.
  return JSON.stringify({ query: CREATE_NETWORK, variables: { input: { projectId, title: 'bench-net' }, key: '{{uuid}}' } });
}

export interface MutationFigures {
  baselineRps: number;
  gatewayRps: number;
  normalRps: number | null;
  ratio: number;
}

function row(name: string, ms: Measurement[], baselineRps: number): string {
  const rps = median(ms.map((m) => m.result.rps));
  const errors = ms.reduce((s, m) => s + m.result.errors, 0);
  const rounds = ms.map((m) => fmt.int(m.result.rps)).join(' / ');
  return `| ${name} | ${fmt.int(rps)} | ${rounds} | ${name === 'baseline' ? '1.00' : fmt.ratio(rps / baselineRps)} | ${fmt.ms(mean(ms.map((m) => m.result.latency.p50)))} | ${fmt.ms(mean(ms.map((m) => m.result.latency.p99)))} | ${errors} | ${fmt.pct(mean(ms.map((m) => m.serverCpu)))} | ${fmt.pct(mean(ms.map((m) => m.driverCpu)))} | ${fmt.pct(mean(ms.map((m) => m.otherCpu)))} |`;
}

export async function mutationThroughput(env: BenchEnv, body: string): Promise<{ report: ScenarioReport; figures: MutationFigures }> {
  env.log('scenario 1: mutation throughput (createNetwork, fresh idempotency key per request)');
  const targets: Target[] = [baselineTarget(env, '/mutation'), gatewayTarget(env.gateway)];
  if (env.gatewayNormal) targets.push(gatewayTarget(env.gatewayNormal));
  for (const o of env.others) targets.push(gatewayTarget(o));
  const ms = await alternate(
    env.lg,
    targets,
    () => ({ body, connections: env.options.connections, durationMs: env.options.durationMs, expectStatus: 200, graphql: true }),
    { rounds: env.options.rounds, warmupMs: env.options.warmupMs, driverProcs: env.driverProcs, log: env.log },
  );
  const baselineRps = median(byTarget(ms, 'baseline').map((m) => m.result.rps));
  const gatewayRps = median(byTarget(ms, env.gateway.name).map((m) => m.result.rps));
  const normalRps = env.gatewayNormal ? median(byTarget(ms, env.gatewayNormal.name).map((m) => m.result.rps)) : null;
  const ratio = gatewayRps / baselineRps;
  const lines = [
    `Closed loop, ${env.options.connections} keep-alive connections, no pipelining, ${env.options.durationMs / 1000} s per measurement, ` +
      `${env.options.rounds} alternating rounds after a ${env.options.warmupMs / 1000} s warm-up of each server. ` +
      'Every request carries a fresh idempotency key, so every one is a first call: the gateway validates, looks the project up in the ledger, ' +
      'claims the key, calls the upstream, records the network and completes the key in SQLite before it answers.',
    '',
    '| server | req/s (median) | req/s per round | ratio to baseline | p50 ms | p99 ms | errors | server CPU | driver CPU | other CPU |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    row('baseline', byTarget(ms, 'baseline'), baselineRps),
    row(env.gateway.name, byTarget(ms, env.gateway.name), baselineRps),
    ...(env.gatewayNormal ? [row(env.gatewayNormal.name, byTarget(ms, env.gatewayNormal.name), baselineRps)] : []),
    ...env.others.map((o) => row(o.name, byTarget(ms, o.name), baselineRps)),
    '',
    'Server CPU is the share of its core the server under test used; driver CPU is the load generator plus the upstream stub on the other core ' +
      '(near 100% there means the driver, not the server, set the pace); other CPU is what processes outside the benchmark used on the shared machine meanwhile.',
  ];
  const targetsMet: ScenarioReport['targets'] = [
    { target: 'mutation ratio ≥ 0.8 of the baseline (durable idempotency record, FULL)', measured: `${fmt.ratio(ratio)} (${fmt.int(gatewayRps)} vs ${fmt.int(baselineRps)} req/s)`, met: ratio >= 0.8 },
  ];
  if (normalRps !== null) {
    targetsMet.push({
      target: 'mutation ratio ≥ 0.8, SQLITE_SYNCHRONOUS=NORMAL',
      measured: `${fmt.ratio(normalRps / baselineRps)} (${fmt.int(normalRps)} req/s)`,
      met: normalRps / baselineRps >= 0.8,
    });
  }
  return {
    report: { id: 1, title: 'Mutation throughput', markdown: lines.join('\n'), targets: targetsMet },
    figures: { baselineRps, gatewayRps, normalRps, ratio },
  };
}
