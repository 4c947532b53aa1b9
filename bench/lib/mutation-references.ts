/**
 * The servers scenario 1 measures the gateway's createNetwork against, besides the bare proxy baseline:
 * the durable baseline (the physical limit of the same durable work, bench/servers/durable-baseline.ts)
 * and two peers, Hive Gateway and Apollo Server 5 (bench/peers/). Each its own process, pinned like the
 * gateway. A peer that cannot start does not stop the suite: the table shows why instead.
 */
import fs from 'node:fs';
import path from 'node:path';
import { request } from 'undici';

import { startNodeArgs } from './build.js';
import { API_KEY, UPSTREAM_TOKEN } from './env.js';
import { ROOT, spawnNode, type Proc } from './processes.js';

export interface PeerProc {
  /** Row name in scenario 1's table. */
  name: string;
  kind: 'hive' | 'apollo' | 'hive-webhooks';
  /** The running process and its GraphQL endpoint, or why it could not start. */
  proc: Proc | null;
  url: string;
  failure: string | null;
}

export interface MutationReferences {
  durable: Proc & { url: string };
  peers: PeerProc[];
  /** Everything started, for bench/run.ts to stop. */
  procs: Proc[];
}

const PEERS: Array<{ kind: PeerProc['kind']; name: string }> = [
  { kind: 'hive', name: 'Hive Gateway (OpenAPI)' },
  { kind: 'apollo', name: 'Apollo Server 5 (undici)' },
];

/**
 * Starts one peer (`bench/peers/main.ts --peer <kind>`) pinned to `cpus`. One that cannot start does not
 * stop the suite: the peer comes back with `proc: null` and a one-line `failure` for the table.
 */
export async function spawnPeer(
  kind: PeerProc['kind'],
  name: string,
  args: string[],
  options: { cpus: string | null; log: (line: string) => void },
): Promise<PeerProc> {
  try {
    const proc = await spawnNode(name, {
      script: 'bench/peers/main.ts',
      args: ['--peer', kind, ...args],
      cpus: options.cpus,
      // As a team deploys them (Apollo Server and Hive Gateway read it; the gateway does not).
      env: { NODE_ENV: 'production' },
      readiness: { line: true },
      timeoutMs: 60_000,
    });
    return { name, kind, proc, url: String(proc.ready.url), failure: null };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    options.log(`${name} could not start: ${message}`);
    // One line for the table: what happened and the last thing the process said (its error).
    const lines = message
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean);
    const failure = lines.length > 1 ? `${lines[0]} … ${lines[lines.length - 1]}` : (lines[0] ?? 'unknown');
    return { name, kind, proc: null, url: '', failure };
  }
}

/** The durable baseline's arguments (bench/servers/durable-baseline.ts; FULL unless told) over the stub at `stubUrl`. */
export function durableBaselineArgs(stubUrl: string, dataDir: string): string[] {
  return ['--upstream', stubUrl, '--token', UPSTREAM_TOKEN, '--api-key', API_KEY, '--data-dir', dataDir];
}

/**
 * Inserts the project a creation's body names into the durable baseline's own ledger (`POST /seed`, set-up only, not
 * measured): it does not share the gateway's.
 */
export async function seedDurableBaseline(origin: string, projectId: string): Promise<void> {
  const seeded = await request(`${origin}/seed`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ projectId }),
  });
  await seeded.body.dump();
  if (seeded.statusCode !== 200) throw new Error(`durable baseline: seeding the project answered ${seeded.statusCode}`);
}

export async function startMutationReferences(options: {
  stubUrl: string;
  root: string;
  cpus: string | null;
  log: (line: string) => void;
}): Promise<MutationReferences> {
  const dataDir = path.join(options.root, 'durable-baseline');
  fs.mkdirSync(dataDir, { recursive: true });
  const durableProc = await spawnNode('durable baseline', {
    script: 'bench/servers/durable-baseline.ts',
    args: [...durableBaselineArgs(options.stubUrl, dataDir), '--synchronous', 'FULL'],
    // Under the node options the gateway's npm start gives it (docs/decisions/146): the same runtime, the same work.
    nodeArgs: startNodeArgs(ROOT),
    cpus: options.cpus,
    readiness: { line: true },
  });
  const procs: Proc[] = [durableProc];
  const peers: PeerProc[] = [];
  for (const { kind, name } of PEERS) {
    const peer = await spawnPeer(kind, name, ['--upstream', options.stubUrl, '--token', UPSTREAM_TOKEN], options);
    if (peer.proc) procs.push(peer.proc);
    peers.push(peer);
  }
  options.log(
    `durable baseline at ${String(durableProc.ready.url)}; peers: ${peers.map((p) => `${p.name} ${p.proc ? `at ${p.url}` : 'not running'}`).join(', ')}`,
  );
  return { durable: Object.assign(durableProc, { url: String(durableProc.ready.url) }), peers, procs };
}
