/**
 * Scenario 2's tail goal read on the rounds of several runs together (docs/decisions/149): each run's paired
 * differences as the bench prints them ("rounds 1.20 / 17.5 / -7.88 / …": per round, the gateway's p99 at half its
 * own maximum minus the durable baseline's p99 of the same round, in ms), given as `NAME=d1/d2/…`, one argument a run.
 * Prints, for every run and for all of them pooled: the median (the verdict of `tailGoalMet`, decision 148), the
 * exact 95 % interval of the median (the order statistics a sign test gives, so the same for everyone who runs it),
 * how many rounds read over +2 ms, and the same for the rounds within ±`--quiet` ms (rounds without a stall of
 * either server), with how the stalled rounds fell.
 *
 *   npx tsx bench/experiments/tail-pooled.ts [--quiet 20] 'run-a=18.6/-2.49/-40.0/0.08/4.73/-3.98' 'run-b=…'
 */
import { parseArgs } from 'node:util';

import { median } from '../lib/stats.js';
import { tailGoalMet } from '../scenarios/latency.js';

const { values: cli, positionals } = parseArgs({
  options: { quiet: { type: 'string', default: '20' } },
  allowPositionals: true,
});
const QUIET_MS = Number(cli.quiet);
if (!Number.isFinite(QUIET_MS) || QUIET_MS <= 0) throw new Error(`--quiet: a number of ms over 0 (got ${cli.quiet})`);
if (positionals.length === 0) throw new Error("give each run's rounds as NAME=d1/d2/… (ms), one argument a run");

const runs = positionals.map((arg) => {
  const at = arg.indexOf('=');
  if (at < 1) throw new Error(`a run is NAME=d1/d2/… (got ${JSON.stringify(arg)})`);
  const rounds = arg
    .slice(at + 1)
    .split('/')
    .map((s) => s.trim().replace('−', '-'));
  const values = rounds.map(Number);
  const bad = rounds.find((s, i) => s === '' || !Number.isFinite(values[i]));
  if (bad !== undefined) throw new Error(`${arg.slice(0, at)}: ${JSON.stringify(bad)} is not a number of ms`);
  return { name: arg.slice(0, at), rounds: values };
});

/**
 * The exact interval of the median: the k-th smallest and the k-th largest of n values, with k the largest count for
 * which fewer than k values fall below the median with a chance of at most 2.5 % (a binomial of n and ½).
 * Returns null when n is too small for any (n < 6), and the interval's own coverage.
 */
function medianInterval(xs: readonly number[]): { low: number; high: number; coverage: number } | null {
  const n = xs.length;
  let k = 0;
  let below = 0;
  let term = 0.5 ** n; // P(B = 0)
  for (let i = 0; i < n; i++) {
    if (below + term > 0.025) break;
    below += term;
    k = i + 1;
    term = (term * (n - i)) / (i + 1); // P(B = i + 1)
  }
  if (k === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  return { low: s[k - 1]!, high: s[n - k]!, coverage: 1 - 2 * below };
}

const ms = (v: number): string => `${v >= 0 ? '+' : '−'}${Math.abs(v).toFixed(2)}`;

function describe(label: string, xs: readonly number[]): string {
  const interval = medianInterval(xs);
  const within = interval
    ? `interval ${ms(interval.low)} to ${ms(interval.high)} (${(interval.coverage * 100).toFixed(1)} %)`
    : 'no interval under 6 rounds';
  const over = xs.filter((x) => x > 2).length;
  const verdict = tailGoalMet(xs) ? 'met' : 'not met';
  return `${label}: ${xs.length} rounds, median ${ms(median(xs))} ms (${verdict}), ${within}, ${over} over +2 ms`;
}

for (const run of runs) console.log(describe(run.name, run.rounds));
const all = runs.flatMap((r) => r.rounds);
console.log(describe('pooled', all));
const quiet = all.filter((x) => Math.abs(x) <= QUIET_MS);
const stalled = all.filter((x) => Math.abs(x) > QUIET_MS);
if (quiet.length > 0) console.log(describe(`within ±${QUIET_MS} ms`, quiet));
console.log(
  `beyond ±${QUIET_MS} ms (a stall in one server's round): ${stalled.length} rounds, ` +
    `the gateway lower in ${stalled.filter((x) => x < 0).length}, higher in ${stalled.filter((x) => x > 0).length}`,
);
