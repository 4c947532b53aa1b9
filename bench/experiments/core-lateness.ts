/**
 * Whether a core is there: wakes every `--period-ms` and prints each wake-up later than `--threshold-ms`, with the
 * time of day, then a summary at SIGINT or after `--seconds`. Beside a bench run, on the core the bench gives the
 * server under test (the last core: bench/lib/processes.ts):
 *
 *   npx tsx bench/experiments/core-lateness.ts [--cpu N] [--period-ms 5] [--threshold-ms 20] [--seconds 0]
 *
 * Its main thread (only: `taskset -p` and `chrt -p` on its own id) goes to that core at SCHED_FIFO priority 50 (as
 * root), so nothing of the guest's ordinary tasks can hold it back, and a wake-up late by tens of milliseconds says the
 * virtual CPU itself was away (the host ran something else) or the kernel kept it from running; a server's stall
 * while this stays on time is the server's own: a saturated core, or a wait inside the process. Not the whole process
 * under `chrt`: npm and tsx, started at a real-time priority on one core, spun there and held it for minutes. Its own
 * cost is one short wake-up per period (~0.2 % of a core at 5 ms).
 */
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import { parseArgs } from 'node:util';

const { values: cli } = parseArgs({
  options: {
    'period-ms': { type: 'string', default: '5' },
    'threshold-ms': { type: 'string', default: '20' },
    seconds: { type: 'string', default: '0' },
    cpu: { type: 'string', default: String(os.availableParallelism() - 1) },
  },
});
const period = Number(cli['period-ms']);
const threshold = Number(cli['threshold-ms']);
const seconds = Number(cli.seconds);
if (!(period > 0) || !(threshold > 0) || !(seconds >= 0))
  throw new Error('--period-ms and --threshold-ms want positive numbers, --seconds a number ≥ 0');
for (const [command, args] of [
  ['taskset', ['-p', '-c', cli.cpu, String(process.pid)]],
  ['chrt', ['-f', '-p', '50', String(process.pid)]],
] as const) {
  const done = spawnSync(command, args, { encoding: 'utf8' });
  if (done.status !== 0) throw new Error(`${command} ${args.join(' ')}: ${done.stderr || done.error?.message}`);
}

const started = performance.now();
let last = started;
let wakeUps = 0;
let over = 0;
let worst = 0;
let timer: NodeJS.Timeout;

function summary(): void {
  clearTimeout(timer);
  const span = (performance.now() - started) / 1000;
  console.log(
    `${wakeUps} wake-ups in ${span.toFixed(1)} s, ${over} later than ${threshold} ms, the latest ${worst.toFixed(1)} ms`,
  );
}

function tick(): void {
  const now = performance.now();
  const late = now - last - period;
  last = now;
  wakeUps += 1;
  if (late > worst) worst = late;
  if (late > threshold) {
    over += 1;
    console.log(`${new Date().toISOString()} late ${late.toFixed(1)} ms`);
  }
  if (seconds > 0 && now - started >= seconds * 1000) summary();
  else timer = setTimeout(tick, period);
}

process.once('SIGINT', summary);
process.once('SIGTERM', summary);
timer = setTimeout(tick, period);
