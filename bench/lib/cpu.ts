import fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

import { cpuSeconds } from './processes.js';

/** CPU seconds of every thread of `pid`, in nanoseconds' precision (schedstat), else clock ticks (stat). */
export function processCpu(pid: number): number {
  try {
    let ns = 0;
    for (const task of fs.readdirSync(`/proc/${pid}/task`)) {
      ns += Number(fs.readFileSync(`/proc/${pid}/task/${task}/schedstat`, 'utf8').split(' ')[0]);
    }
    if (Number.isFinite(ns) && ns > 0) return ns / 1e9;
  } catch {
    // a thread ended between the listing and the read, or no schedstat: the coarser figure
  }
  return cpuSeconds(pid);
}

/** Runs `count` operations, `concurrency` at a time (closed loop: each starts when one ends). */
export async function closedLoop(count: number, concurrency: number, op: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) await op(next++);
    }),
  );
}

/**
 * Runs `count` operations at `rate` per second, open loop: each leaves on schedule whatever the answers do; resolves
 * with each one's latency from its scheduled time (ms). `times`, when given, gets each one's scheduled and answered
 * time in ms since the epoch, and its second of the block.
 */
export async function openLoop(
  rate: number,
  count: number,
  op: () => Promise<void>,
  times?: Array<[number, number, number]>,
): Promise<number[]> {
  const latencies: number[] = [];
  const interval = 1000 / rate;
  const start = performance.now();
  const inFlight: Promise<void>[] = [];
  const origin = performance.timeOrigin;
  for (let i = 0; i < count; i++) {
    const due = start + i * interval;
    const wait = due - performance.now();
    if (wait > 1) await sleep(wait);
    inFlight.push(
      op().then(() => {
        const end = performance.now();
        latencies.push(end - due);
        times?.push([origin + due, origin + end, i / rate]);
      }),
    );
  }
  await Promise.all(inFlight);
  return latencies;
}

/** CPU seconds of the main thread of `pid` alone (its tid is the pid), from schedstat. */
export function mainThreadCpu(pid: number): number {
  return Number(fs.readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[0]) / 1e9;
}
