import { ENV_VARS } from '../../src/config/index.js';
import type { Loadgen, Target } from './harness.js';
import type { MutationReferences } from './mutation-references.js';
import type { Placement, Proc } from './processes.js';

export const API_KEY = 'bench-api-key';
export const NOTIFICATION_TOKEN = 'bench-notification-token';
export const UPSTREAM_TOKEN = 'sandbox-service-account-token';

/**
 * The environment of a benchmarked gateway: ours minus every gateway variable (so a stray LOG_LEVEL or DATABASE_URL
 * cannot leak in), then the benchmark's settings.
 */
export function gatewayEnv(o: { port: number; dataDir: string; stubUrl: string }): Record<string, string> {
  const names = new Set(ENV_VARS.map((v) => v.name));
  return {
    ...(Object.fromEntries(Object.entries(process.env).filter(([k, v]) => v !== undefined && !names.has(k))) as Record<
      string,
      string
    >),
    PORT: String(o.port),
    HOST: '127.0.0.1',
    DATA_DIR: o.dataDir,
    CLOUD_API_URL: o.stubUrl,
    CLOUD_API_TOKEN: UPSTREAM_TOKEN,
    GATEWAY_API_KEYS: API_KEY,
    MOBILEID_NOTIFICATION_TOKENS: NOTIFICATION_TOKEN,
    // The benchmarks measure cloud calls and webhooks; the identity interfaces stay simulated.
    SANDBOX_UPSTREAMS: 'identification,verification,rfm',
    // Info lines per request would measure pino; operators run production at info, but the request log is debug already.
    LOG_LEVEL: 'warn',
    // As the Dockerfile runs it (and as the peers run): graphql-js skips its development-only checks.
    NODE_ENV: 'production',
  };
}

/**
 * `NAME=VALUE[,NAME=VALUE]` (an experiment's `--env`, or a variant's settings) as an environment; empty for none. The
 * value is everything after the first `=`; a pair without a name is refused, naming `option`.
 */
export function envPairs(raw: string | undefined, option = '--env'): Record<string, string> {
  return Object.fromEntries(
    (raw ? raw.split(',') : []).filter(Boolean).map((pair) => {
      const at = pair.indexOf('=');
      if (at < 1) throw new Error(`${option} wants NAME=VALUE[,NAME=VALUE], got ${JSON.stringify(pair)}`);
      return [pair.slice(0, at).trim(), pair.slice(at + 1)];
    }),
  );
}

export interface BenchOptions {
  /** Length of one measurement. */
  durationMs: number;
  warmupMs: number;
  /** Alternating rounds per scenario (baseline, gateway, baseline, gateway, ...). */
  rounds: number;
  /** Closed-loop connections for the throughput scenarios. */
  connections: number;
}

/** A gateway process under test. */
export interface GatewayProc {
  name: string;
  proc: Proc;
  origin: string;
  dataDir: string;
  synchronous: 'FULL' | 'NORMAL';
  /** The checkout it runs from (the repository itself, or a `--compare` directory). */
  checkout: string;
}

/** What every scenario gets from bench/run.ts. */
export interface BenchEnv {
  options: BenchOptions;
  placement: Placement;
  lg: Loadgen;
  stub: Proc & { url: string };
  /** The gateway with the durability it ships with (SQLITE_SYNCHRONOUS=FULL). */
  gateway: GatewayProc;
  /** The same gateway with SQLITE_SYNCHRONOUS=NORMAL, when both are measured. */
  gatewayNormal: GatewayProc | null;
  /** Other checkouts of the gateway (`--compare`), measured beside it in scenarios 1 and 2. */
  others: GatewayProc[];
  baseline: Proc & { url: string };
  /** Scenario 1's durable baseline and peers (Hive Gateway, Apollo Server); null when scenario 1 does not run. */
  mutationRefs: MutationReferences | null;
  /** Processes on the driver core: their CPU is reported beside each figure. */
  driverProcs: Proc[];
  log(line: string): void;
}

export function gatewayTarget(g: GatewayProc, path = '/graphql', headers: Record<string, string> = {}): Target {
  return {
    name: g.name,
    proc: g.proc,
    origin: g.origin,
    path,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}`, ...headers },
  };
}

export function baselineTarget(env: BenchEnv, path: string, headers: Record<string, string> = {}): Target {
  return {
    name: 'baseline',
    proc: env.baseline,
    origin: env.baseline.url,
    path,
    headers: { 'content-type': 'application/json', ...headers },
  };
}

/** One scenario's outcome: its Markdown section and the figures the target table needs. */
export interface ScenarioReport {
  id: number;
  title: string;
  markdown: string;
  /** Target lines: what was asked, what was measured, met or not. */
  targets: Array<{ target: string; measured: string; met: boolean | null }>;
}
