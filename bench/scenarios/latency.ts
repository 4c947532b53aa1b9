import { alternate, byTarget, mean, type Target } from '../lib/harness.js';
import { baselineTarget, gatewayTarget, type BenchEnv, type ScenarioReport } from '../lib/env.js';
import { fmt } from '../lib/stats.js';

const SHARES = [0.25, 0.5, 0.8];

/** Scenario 2: p50/p99 of gateway minus baseline at fixed arrival rates (open loop). */
export async function addedLatency(env: BenchEnv, body: string, baselineMaxRps: number, durationMs: number): Promise<ScenarioReport> {
  env.log('scenario 2: added latency at fixed arrival rates');
  const gateways = [env.gateway, ...(env.gatewayNormal ? [env.gatewayNormal] : []), ...env.others];
  const rows: string[] = [];
  const targets: ScenarioReport['targets'] = [];
  for (const share of SHARES) {
    const rate = Math.max(1, Math.round(baselineMaxRps * share));
    env.log(` ${Math.round(share * 100)}% of the baseline maximum: ${rate} req/s`);
    const ts: Target[] = [baselineTarget(env, '/mutation'), ...gateways.map((g) => gatewayTarget(g))];
    const ms = await alternate(
      env.lg,
      ts,
      () => ({ body, connections: 256, durationMs, rate, expectStatus: 200, graphql: true }),
      { rounds: env.options.rounds, warmupMs: 0, driverProcs: env.driverProcs, log: env.log },
    );
    const base = byTarget(ms, 'baseline');
    const b50 = mean(base.map((m) => m.result.latency.p50));
    const b99 = mean(base.map((m) => m.result.latency.p99));
    for (const g of gateways) {
      const gm = byTarget(ms, g.name);
      const g50 = mean(gm.map((m) => m.result.latency.p50));
      const g99 = mean(gm.map((m) => m.result.latency.p99));
      const achieved = mean(gm.map((m) => m.result.rps));
      const errors = gm.reduce((s, m) => s + m.result.errors, 0) + base.reduce((s, m) => s + m.result.errors, 0);
      rows.push(
        `| ${Math.round(share * 100)}% | ${fmt.int(rate)} | ${g.name} | ${fmt.ms(b50)} | ${fmt.ms(b99)} | ${fmt.ms(g50)} | ${fmt.ms(g99)} | **${fmt.ms(g50 - b50)}** | **${fmt.ms(g99 - b99)}** | ${fmt.int(achieved)} | ${errors} | ${fmt.pct(mean(gm.map((m) => m.serverCpu)))} |`,
      );
      if (share === 0.5) {
        targets.push({ target: `added p99 ≤ 2 ms at 50% load (${g.name})`, measured: `${fmt.ms(g99 - b99)} ms (p50 +${fmt.ms(g50 - b50)} ms)`, met: g99 - b99 <= 2 });
      }
    }
  }
  const markdown = [
    `Open loop: requests leave on a fixed schedule (${durationMs / 1000} s per measurement, ${env.options.rounds} alternating rounds, up to 256 connections, no pipelining) ` +
      'and each latency counts from the scheduled send time, so queueing shows in the tail. ' +
      `Rates are shares of the baseline's maximum from scenario 1 (${fmt.int(baselineMaxRps)} req/s). Same request as scenario 1.`,
    '',
    '| load | req/s | gateway | baseline p50 ms | baseline p99 ms | gateway p50 ms | gateway p99 ms | added p50 ms | added p99 ms | gateway achieved req/s | errors | gateway CPU |',
    '|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...rows,
    '',
    'When a rate is above what the gateway can serve (see scenario 1), the open loop queues and the tail grows without bound: that row shows saturation, not latency.',
  ].join('\n');
  return { id: 2, title: 'Added latency', markdown, targets };
}
