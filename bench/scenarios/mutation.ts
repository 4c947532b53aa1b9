import { randomUUID } from 'node:crypto';
import type { Pool } from 'undici';

import { API_KEY, baselineTarget, gatewayTarget, type BenchEnv, type ScenarioReport } from '../lib/env.js';
import { alternate, byTarget, graphql, mean, type Measurement, type Target } from '../lib/harness.js';
import { seedDurableBaseline, type MutationReferences } from '../lib/mutation-references.js';
import { fmt, median } from '../lib/stats.js';
import { hiveMutationBody } from '../peers/requests.js';

export const CREATE_NETWORK =
  'mutation($input: CreateNetworkInput!, $key: UUID) { createNetwork(input: $input, idempotencyKey: $key) { network { id title } idempotencyKey replayed } }';

/** The request body of scenarios 1 and 2: the same bytes go to the gateway and to the baseline. */
export function mutationBody(env: BenchEnv): Promise<string> {
  return createNetworkBody(env.gateway.origin, 'bench');
}

/**
 * A project created on the gateway at `origin`, and the body of a `createNetwork` in it with `{{uuid}}` for its
 * idempotency key: a fresh key on every request, so every request is a first call upstream.
 */
export async function createNetworkBody(origin: string, label: string): Promise<string> {
  const data = await graphql<{ createProject: { project: { id: string } } }>(
    origin,
    API_KEY,
    'mutation($input: CreateProjectInput!) { createProject(input: $input) { project { id } } }',
    { input: { name: label, description: `${label} project` } },
  );
  return JSON.stringify({
    query: CREATE_NETWORK,
    variables: { input: { projectId: data.createProject.project.id, title: `${label}-net` }, key: '{{uuid}}' },
  });
}

/** One creation of `body` (from createNetworkBody) with a fresh key through `pool`; throws unless it succeeded. */
export async function createOnce(pool: Pool, body: string): Promise<void> {
  const res = await pool.request({
    method: 'POST',
    path: '/graphql',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
    body: body.replace('{{uuid}}', randomUUID()),
  });
  const text = await res.body.text();
  if (res.statusCode !== 200 || text.includes('"errors"')) throw new Error(`${res.statusCode} ${text}`);
}

export interface MutationFigures {
  baselineRps: number;
  gatewayRps: number;
  normalRps: number | null;
  ratio: number;
  /** The durable baseline's throughput (scenario 1's main reference); NaN when it did not run. */
  durableRps: number;
}

interface Row {
  name: string;
  ms: Measurement[];
  /** Why the server has no figures (a peer that could not start). */
  failure?: string;
}

function row(r: Row, durableRps: number, baselineRps: number): string {
  if (r.failure !== undefined)
    return `| ${r.name} | could not run: ${r.failure.replaceAll('|', '\\|')} |${' |'.repeat(9)}`;
  const { ms } = r;
  const rps = median(ms.map((m) => m.result.rps));
  const errors = ms.reduce((s, m) => s + m.result.errors, 0);
  const rounds = ms.map((m) => fmt.int(m.result.rps)).join(' / ');
  return `| ${r.name} | ${fmt.int(rps)} | ${rounds} | ${fmt.ratio(rps / durableRps)} | ${fmt.ratio(rps / baselineRps)} | ${fmt.ms(mean(ms.map((m) => m.result.latency.p50)))} | ${fmt.ms(mean(ms.map((m) => m.result.latency.p99)))} | ${errors} | ${fmt.pct(mean(ms.map((m) => m.serverCpu)))} | ${fmt.pct(mean(ms.map((m) => m.driverCpu)))} | ${fmt.pct(mean(ms.map((m) => m.otherCpu)))} |`;
}

export const DURABLE = 'durable baseline';

/** The durable baseline as a target of the gateway's request bytes (its project must be seeded first: scenario 1 does). */
export function durableTarget(refs: MutationReferences): Target {
  return {
    name: DURABLE,
    proc: refs.durable,
    origin: refs.durable.url,
    path: '/mutation',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
  };
}

/** What a durable creation must reach of the durable baseline's rate. */
const DURABLE_GOAL = 0.85;
/** What it must reach of a peer's rate, where the goal is a share rather than being ahead (the peer keeps nothing). */
const PEER_GOALS: Record<string, number> = { 'Apollo Server 5 (undici)': 0.7 };

/**
 * Scenario 1. Targets: the gateway's createNetwork against the durable baseline (the same durable work,
 * hand-written: the main figure), the bare proxy baseline (the outer reference) and the peers, all over
 * the same stub, alternating. The durable baseline gets the gateway's very bytes (its project seeded
 * first: it has its own SQLite file); Apollo Server too; Hive Gateway the equivalent operation of its
 * OpenAPI-generated schema (the same upstream POST).
 */
export async function mutationThroughput(
  env: BenchEnv,
  body: string,
): Promise<{ report: ScenarioReport; figures: MutationFigures }> {
  env.log('scenario 1: mutation throughput (createNetwork, fresh idempotency key per request)');
  const refs = env.mutationRefs;
  const projectId = (JSON.parse(body) as { variables: { input: { projectId: string } } }).variables.input.projectId;
  const targets: Target[] = [];
  const bodies = new Map<string, string>();
  if (refs) {
    await seedDurableBaseline(refs.durable.url, projectId);
    targets.push(durableTarget(refs));
  }
  targets.push(baselineTarget(env, '/mutation'), gatewayTarget(env.gateway));
  if (env.gatewayNormal) targets.push(gatewayTarget(env.gatewayNormal));
  for (const o of env.others) targets.push(gatewayTarget(o));
  for (const peer of refs?.peers ?? []) {
    if (!peer.proc) continue;
    const url = new URL(peer.url);
    targets.push({
      name: peer.name,
      proc: peer.proc,
      origin: url.origin,
      path: url.pathname,
      headers: { 'content-type': 'application/json' },
    });
    if (peer.kind === 'hive') bodies.set(peer.name, hiveMutationBody(projectId));
  }
  const ms = await alternate(
    env.lg,
    targets,
    (t) => ({
      body: bodies.get(t.name) ?? body,
      connections: env.options.connections,
      durationMs: env.options.durationMs,
      expectStatus: 200,
      graphql: true,
    }),
    { rounds: env.options.rounds, warmupMs: env.options.warmupMs, driverProcs: env.driverProcs, log: env.log },
  );
  const rpsOf = (name: string) => median(byTarget(ms, name).map((m) => m.result.rps));
  const baselineRps = rpsOf('baseline');
  const gatewayRps = rpsOf(env.gateway.name);
  const durableRps = refs ? rpsOf(DURABLE) : NaN;
  const normalRps = env.gatewayNormal ? rpsOf(env.gatewayNormal.name) : null;
  const ratio = gatewayRps / baselineRps;
  const rows: Row[] = [
    ...(refs ? [{ name: DURABLE, ms: byTarget(ms, DURABLE) }] : []),
    { name: 'baseline (bare proxy)', ms: byTarget(ms, 'baseline') },
    { name: env.gateway.name, ms: byTarget(ms, env.gateway.name) },
    ...(env.gatewayNormal ? [{ name: env.gatewayNormal.name, ms: byTarget(ms, env.gatewayNormal.name) }] : []),
    ...env.others.map((o) => ({ name: o.name, ms: byTarget(ms, o.name) })),
    ...(refs?.peers ?? []).map((p) =>
      p.proc ? { name: p.name, ms: byTarget(ms, p.name) } : { name: p.name, ms: [], failure: p.failure ?? 'unknown' },
    ),
  ];
  const lines = [
    `Closed loop, ${env.options.connections} keep-alive connections, no pipelining, ${env.options.durationMs / 1000} s per measurement, ` +
      `${env.options.rounds} alternating rounds after a ${env.options.warmupMs / 1000} s warm-up of each server. ` +
      'Every request carries a fresh idempotency key, so every one is a first call: the gateway validates, looks the project up in the ledger, ' +
      'claims the key, calls the upstream, records the network and completes the key in SQLite before it answers. ' +
      "The durable baseline does the same SQLite work by hand (node:http, better-sqlite3 prepared statements, group commit, synchronous=FULL with the claim settled at its COMMIT and its sync left to the completion's as the gateway does by default, undici): " +
      'the main reference. The bare proxy baseline only forwards to the upstream: the outer reference. ' +
      'The peers keep nothing: Hive Gateway serves the upstream call through an OpenAPI description composed with @graphql-mesh/compose-cli and @omnigraph/openapi ' +
      "(its own operation, `createService`, the same upstream POST with bearer token and Idempotency-Key); Apollo Server 5 gets the gateway's request bytes and calls the upstream from one resolver with undici.",
    '',
    '| server | req/s (median) | req/s per round | ratio to durable baseline | ratio to bare proxy | p50 ms | p99 ms | errors | server CPU | driver CPU | other CPU |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...rows.map((r) => row(r, durableRps, baselineRps)),
    '',
    'Server CPU is the share of its core the server under test used; driver CPU is the load generator plus the upstream stub on the other core ' +
      '(near 100% there means the driver, not the server, set the pace); other CPU is what processes outside the benchmark used on the shared machine meanwhile.',
  ];
  const vs = (rps: number, ref: number, refName: string) =>
    `${fmt.ratio(rps / ref)} (${fmt.int(rps)} vs ${fmt.int(ref)} req/s ${refName})`;
  const targetsMet: ScenarioReport['targets'] = [];
  if (refs) {
    targetsMet.push({
      target: `mutations ≥ ${DURABLE_GOAL} of the durable baseline (gateway FULL; the main mutation figure)`,
      measured: vs(gatewayRps, durableRps, 'durable baseline'),
      met: gatewayRps / durableRps >= DURABLE_GOAL,
    });
  }
  targetsMet.push({
    target: 'mutations ≥ 0.4 of the bare proxy baseline (gateway FULL)',
    measured: vs(gatewayRps, baselineRps, 'bare proxy'),
    met: ratio >= 0.4,
  });
  for (const peer of refs?.peers ?? []) {
    if (!peer.proc) {
      targetsMet.push({
        target: `mutations ahead of ${peer.name}`,
        measured: `${peer.name} could not run (bench/README.md says why)`,
        met: null,
      });
      continue;
    }
    const peerRps = rpsOf(peer.name);
    const goal = PEER_GOALS[peer.name];
    targetsMet.push(
      goal === undefined
        ? {
            target: `mutations ahead of ${peer.name} (gateway FULL)`,
            measured: vs(gatewayRps, peerRps, peer.name),
            met: gatewayRps > peerRps,
          }
        : {
            target: `mutations ≥ ${goal} of ${peer.name}, which keeps nothing (gateway FULL)`,
            measured: vs(gatewayRps, peerRps, peer.name),
            met: gatewayRps / peerRps >= goal,
          },
    );
  }
  if (normalRps !== null && refs) {
    targetsMet.push({
      target: `mutations ≥ ${DURABLE_GOAL} of the durable baseline (FULL), gateway with SQLITE_SYNCHRONOUS=NORMAL`,
      measured: vs(normalRps, durableRps, 'durable baseline'),
      met: normalRps / durableRps >= DURABLE_GOAL,
    });
  }
  return {
    report: { id: 1, title: 'Mutation throughput', markdown: lines.join('\n'), targets: targetsMet },
    figures: { baselineRps, gatewayRps, normalRps, ratio, durableRps },
  };
}
