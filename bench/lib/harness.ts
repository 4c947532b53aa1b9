import type { ChildProcess } from 'node:child_process';
import { request } from 'undici';

import { cpuSeconds, othersSince, spawnNode, waitForQuiet, type Proc } from './processes.js';
import type { FromLoadgen, HttpLoad, HttpResult, Job, JobResult } from './protocol.js';

/** The load generator process, driven over IPC. */
export class Loadgen {
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve: (r: JobResult) => void; reject: (e: Error) => void }>();

  private constructor(readonly proc: Proc) {
    const child: ChildProcess = proc.child;
    child.on('message', (msg: FromLoadgen) => {
      const w = this.waiting.get(msg.id);
      if (!w) return;
      this.waiting.delete(msg.id);
      if (msg.ok) w.resolve(msg.result);
      else w.reject(new Error(`load generator: ${msg.error}`));
    });
    child.on('exit', () => {
      for (const w of this.waiting.values()) w.reject(new Error(`load generator exited:\n${proc.tail()}`));
      this.waiting.clear();
    });
  }

  /** `nodeArgs`: e.g. `--cpu-prof` (with `--profile`, the load generator is profiled too). */
  static async start(cpus: string | null, nodeArgs: string[] = []): Promise<Loadgen> {
    const proc = await spawnNode('loadgen', {
      script: 'bench/loadgen.ts',
      cpus,
      ipc: true,
      readiness: { line: true },
      nodeArgs,
    });
    return new Loadgen(proc);
  }

  run<T extends JobResult>(job: Job): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.waiting.set(id, { resolve: resolve as (r: JobResult) => void, reject });
      this.proc.child.send({ id, job });
    });
  }
}

/** An HTTP load without its destination (the target adds it). */
export type HttpSpec = Omit<HttpLoad, 'kind' | 'origin' | 'path' | 'headers'>;

/** A server under test: the gateway or the baseline, with where it takes the scenario's requests. */
export interface Target {
  name: string;
  proc: Proc;
  origin: string;
  path: string;
  headers: Record<string, string>;
}

export interface Measurement {
  target: string;
  round: number;
  result: HttpResult;
  /** CPU the server under test used, in cores (1.0 = one core busy the whole time). */
  serverCpu: number;
  /** CPU of the other side (load generator + upstream stub), in cores. */
  driverCpu: number;
  /**
   * CPU used by everything else on the machine (other people's processes), in cores: the benchmark shares
   * the machine, and a figure taken while this is high is worth less.
   */
  otherCpu: number;
}

/**
 * Runs one load against one target and samples CPU time of the target and of the driver processes
 * around it.
 */
export async function measure(
  lg: Loadgen,
  target: Target,
  load: HttpSpec,
  driverProcs: Proc[],
  round = 0,
): Promise<Measurement> {
  await waitForQuiet();
  const ours = () => driverProcs.reduce((s, p) => s + p.cpuSeconds(), 0) + cpuSeconds(process.pid);
  const cpu0 = target.proc.cpuSeconds();
  const drivers0 = ours();
  const others = othersSince();
  const t0 = performance.now();
  const result = await lg.run<HttpResult>({
    ...load,
    kind: 'http',
    origin: target.origin,
    path: target.path,
    headers: target.headers,
  });
  const wall = (performance.now() - t0) / 1000;
  const server = target.proc.cpuSeconds() - cpu0;
  const drivers = ours() - drivers0;
  const otherCpu = others().cores;
  return { target: target.name, round, result, serverCpu: server / wall, driverCpu: drivers / wall, otherCpu };
}

/** Cores used by other people's processes above which a measurement is taken again. */
const NOISY = 0.35;
/** Re-measurements left for the whole suite (each costs one measurement's duration). */
let retriesLeft = Number(process.env.BENCH_RETRIES ?? 10);
/** No re-measurement after this point of the run (process time), so that the suite ends within 10 minutes. */
const RETRY_UNTIL_MS = 5 * 60_000;

/**
 * Warms every target up, then measures them in turn, `rounds` times (A B A B ...), so that drift of the
 * machine (other tenants, thermal, a growing database) hits all of them alike.
 */
export async function alternate(
  lg: Loadgen,
  targets: Target[],
  load: (t: Target) => HttpSpec,
  options: { rounds: number; warmupMs: number; driverProcs: Proc[]; log: (line: string) => void },
): Promise<Measurement[]> {
  for (const t of targets) {
    if (options.warmupMs > 0) await measure(lg, t, { ...load(t), durationMs: options.warmupMs }, options.driverProcs);
  }
  const out: Measurement[] = [];
  for (let round = 0; round < options.rounds; round++) {
    for (const t of targets) {
      let m = await measure(lg, t, load(t), options.driverProcs, round);
      // Someone else's work ran beside it: measure again (a bounded number of times per suite) and keep
      // the figure taken on the quieter machine.
      while (m.otherCpu > NOISY && retriesLeft > 0 && performance.now() < RETRY_UNTIL_MS) {
        retriesLeft -= 1;
        options.log(
          `  ${t.name.padEnd(18)} round ${round + 1}: other processes used ${(m.otherCpu * 100).toFixed(0)}% of a core; measuring again`,
        );
        const again = await measure(lg, t, load(t), options.driverProcs, round);
        if (again.otherCpu < m.otherCpu) m = again;
      }
      const r = m.result;
      options.log(
        `  ${t.name.padEnd(18)} round ${round + 1}: ${Math.round(r.rps)} req/s, p50 ${r.latency.p50.toFixed(2)} ms, p99 ${r.latency.p99.toFixed(2)} ms, ` +
          `errors ${r.errors}, server CPU ${(m.serverCpu * 100).toFixed(0)}%, driver CPU ${(m.driverCpu * 100).toFixed(0)}%, other CPU ${(m.otherCpu * 100).toFixed(0)}%` +
          (r.driver
            ? `; from the send p99 ${r.driver.fromSend.p99.toFixed(2)} ms, sent late max ${r.driver.sentLateMaxMs.toFixed(1)} ms ` +
              `(${r.driver.sentLate} ≥ 5 ms), driver loop delay max ${r.driver.loopDelayMaxMs.toFixed(1)} ms; ` +
              `slowest by 250 ms: ${r.driver.slowestByQuarter.join(' ')}`
            : '') +
          (r.errorSamples.length ? `\n    first errors: ${r.errorSamples.join(' | ')}` : ''),
      );
      out.push(m);
    }
  }
  return out;
}

export function byTarget(ms: Measurement[], name: string): Measurement[] {
  return ms.filter((m) => m.target === name);
}

export function mean(values: number[]): number {
  return values.length ? values.reduce((a, b) => a + b, 0) / values.length : NaN;
}

/** POST a GraphQL operation and return `data`, throwing on errors. */
export async function graphql<T = any>(
  origin: string,
  apiKey: string,
  query: string,
  variables: Record<string, unknown> = {},
): Promise<T> {
  const res = await request(`${origin}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await res.body.json()) as { data?: T; errors?: unknown[] };
  if (body.errors?.length || !body.data)
    throw new Error(`GraphQL error (HTTP ${res.statusCode}): ${JSON.stringify(body.errors ?? body)}`);
  return body.data;
}
