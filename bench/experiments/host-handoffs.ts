/**
 * What this host charges for a hand-off between threads, the unit of several per-operation costs (the WAL sync the
 * gateway hands to libuv's pool, a socket write that wakes its reader): one process, no gateway.
 *
 * - a system call: `fs.writeSync` of 8 bytes to /dev/null;
 * - a thread's wake-up: `Atomics.notify` to a worker waiting in `Atomics.wait`, and the round trip back;
 * - a 4 KiB append and its `fs.fdatasync` on libuv's pool: the caller's time in the call (the hand-off), the next one
 *   started from the completion's `setImmediate` (back to back, as the gateway's syncs run under load) or after
 *   `--gap` µs of work; beside it the same append synced on the caller's thread (`fs.fdatasyncSync`) after the same
 *   work. For each, the process's CPU per sync (every thread), the work included where there is some.
 *
 * Run it where the server runs: `taskset -c 1 npx tsx bench/experiments/host-handoffs.ts` puts every thread on one
 * core, as the bench places the gateway (bench/lib/processes.ts).
 *
 *   npx tsx bench/experiments/host-handoffs.ts [--syncs 2000] [--gap 100]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';

const { values: cli } = parseArgs({
  options: { syncs: { type: 'string', default: '2000' }, gap: { type: 'string', default: '100' } },
});
const SYNCS = Number(cli.syncs);
const GAP_US = Number(cli.gap);
if (!Number.isInteger(SYNCS) || SYNCS < 1)
  throw new Error(`--syncs: a whole number of syncs, 1 or more (got ${cli.syncs})`);
if (!Number.isFinite(GAP_US) || GAP_US < 0) throw new Error(`--gap: microseconds of work, 0 or more (got ${cli.gap})`);

/** Busy for `us` microseconds: a request's work between two syncs. */
const work = (us: number): void => {
  const end = performance.now() + us / 1000;
  while (performance.now() < end);
};
const cpuUs = (): number => {
  const u = process.cpuUsage();
  return u.user + u.system;
};
const f1 = (x: number): string => x.toFixed(1);

function systemCall(): number {
  const fd = fs.openSync('/dev/null', 'w');
  const b = Buffer.alloc(8);
  const n = 20_000;
  const t = performance.now();
  for (let i = 0; i < n; i++) fs.writeSync(fd, b);
  const us = ((performance.now() - t) * 1000) / n;
  fs.closeSync(fd);
  return us;
}

async function wakeUp(): Promise<{ notify: number; roundTrip: number }> {
  const words = new Int32Array(new SharedArrayBuffer(8));
  const worker = new Worker(
    `const { workerData } = require('node:worker_threads');
     const w = new Int32Array(workerData);
     for (;;) { Atomics.wait(w, 0, 0); Atomics.store(w, 0, 0); Atomics.store(w, 1, 1); Atomics.notify(w, 1); }`,
    { eval: true, workerData: words.buffer },
  );
  await new Promise((resolve) => setTimeout(resolve, 200));
  const n = 2000;
  let notify = 0;
  const t = performance.now();
  for (let i = 0; i < n; i++) {
    Atomics.store(words, 1, 0);
    const a = performance.now();
    Atomics.store(words, 0, 1);
    Atomics.notify(words, 0);
    notify += performance.now() - a;
    Atomics.wait(words, 1, 0);
  }
  const roundTrip = ((performance.now() - t) * 1000) / n;
  await worker.terminate();
  return { notify: (notify * 1000) / n, roundTrip };
}

/** `SYNCS` appends of 4 KiB, each synced as `how` says; the caller's time in the sync call and the CPU per sync. */
async function syncs(how: 'pool' | 'pool after work' | 'caller'): Promise<{ call: number; cpu: number }> {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'handoffs-')), 'wal');
  const fd = fs.openSync(file, 'w');
  const page = Buffer.alloc(4096, 1);
  let call = 0;
  const cpu0 = cpuUs();
  for (let i = 0; i < SYNCS; i++) {
    if (how !== 'pool') work(GAP_US);
    fs.writeSync(fd, page);
    const t = performance.now();
    if (how === 'caller') {
      fs.fdatasyncSync(fd);
      call += performance.now() - t;
      continue;
    }
    const done = new Promise<void>((resolve, reject) =>
      fs.fdatasync(fd, (error) => (error ? reject(error) : setImmediate(resolve))),
    );
    call += performance.now() - t;
    await done;
  }
  const cpu = (cpuUs() - cpu0) / SYNCS;
  fs.closeSync(fd);
  fs.rmSync(path.dirname(file), { recursive: true });
  return { call: (call * 1000) / SYNCS, cpu };
}

const wake = await wakeUp();
console.log(`a system call (8 B to /dev/null): ${f1(systemCall())} µs`);
console.log(`a thread's wake-up: Atomics.notify ${f1(wake.notify)} µs, the round trip ${f1(wake.roundTrip)} µs`);
for (const how of ['pool', 'pool after work', 'caller'] as const) {
  const r = await syncs(how);
  const what =
    how === 'pool'
      ? 'fs.fdatasync, back to back'
      : how === 'pool after work'
        ? `fs.fdatasync after ${GAP_US} µs of work`
        : `fs.fdatasyncSync after ${GAP_US} µs of work`;
  console.log(`${what}: the caller's time in the call ${f1(r.call)} µs, CPU per sync ${f1(r.cpu)} µs (every thread)`);
}
