/**
 * Loaded (`node --import`) into every gateway `npm run bench:guard` starts, on both sides alike, so that whatever it
 * costs falls on both. It acts only on a request that carries `x-guard-burn-us: N` with N > 0: that request first
 * spins N µs of CPU on the event loop, then goes on as usual. Only when BENCH_GUARD_SLOWDOWN is set (its own test)
 * does the guard send that header, on every request of both sides so that the header's own cost falls on both, and N
 * is 0 but on the working tree's requests of a planted path, where it is a share of that path's cost measured in the
 * round before: the path really costs that much more CPU per operation. The guard then also asks each gateway to time
 * the spin before a round (`x-guard-calibrate`), outside what it counts; a gateway times it the first time only.
 */
import { createHash } from 'node:crypto';
import http from 'node:http';

import { SpinRate } from './spin-rate.js';

const emit = http.Server.prototype.emit;

/**
 * The spin hashes bytes (SHA-256, in Node's native code), so that its speed does not hang on what V8's compilers did
 * meanwhile: a counted JavaScript loop, timed while unoptimised and run once optimised, spent a third of the ask in 4
 * runs of 42 of its test. It feeds one hash for the process's life, a block of 4 KiB at a time, and so leaves no
 * garbage: a hash made and digested per spin left a handle and a buffer for the collector of the working tree's side
 * alone. Nor can a clock end the spin as it runs: `process.threadCpuUsage` (Node 23.9 on) reads
 * getrusage(RUSAGE_THREAD), which on this machine's kernel moves in steps of ~4 ms (a spin of 85 µs ran ~4 ms, and
 * the planted 5 % read 80-215 % on Node 26); the process's clock (`process.cpuUsage`) moves by the µs but counts the
 * other threads, which ended a spin early by their share (a planted 5 % read 2.8 % on the delivery on Node 26).
 *
 * So a spin hashes a number of blocks, timed after the fact on the wall clock: the next spin's blocks a µs are those of
 * the fastest of the last spins (bench/lib/spin-rate.ts), which the spins another thread or an interrupt preempted
 * (they read long) do not move. Not on the process's clock, as decisions 130 and 132 did: each reading is a
 * getrusage(RUSAGE_SELF), which walks every thread of the gateway, and the two a spin took were a plant of their own: a
 * plant of 0.1 % read 1.06 on the tree query, and the same two readings with no spin 1.063 (the wall clock is read
 * without a system call). Until the first spin, the rate is a timing of 2 MiB taken while the gateway is idle (before a
 * round, when the guard asks). That timing alone sized every spin before decision 130: the spins then spent 1.6-1.85
 * times their ask.
 */
const BLOCK = Buffer.alloc(4 * 1024, 0x5a);
const HASH = createHash('sha256');
const rate = new SpinRate();

/** Hashes `blocks` blocks; returns what that took, in µs of the wall clock. */
function timedSpin(blocks: number): number {
  const start = performance.now();
  for (let i = 0; i < blocks; i++) HASH.update(BLOCK);
  return (performance.now() - start) * 1000;
}

/** Times the hash while the gateway is idle, the fastest of three (another thread's work only slows one), once. */
function calibrate(): void {
  if (rate.rate > 0) return;
  const blocks = (2 * 1024 * 1024) / BLOCK.length;
  rate.seed(blocks / Math.max(1, Math.min(timedSpin(blocks), timedSpin(blocks), timedSpin(blocks))));
}

function spin(us: number): void {
  calibrate();
  const blocks = rate.blocksFor(us);
  rate.record(blocks, timedSpin(blocks));
}

/** A full collection, when the guard started the gateway with `--expose-gc` and asks for one before a round. */
function collect(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc) gc();
}

http.Server.prototype.emit = function emitWithBurn(
  this: http.Server,
  event: string | symbol,
  ...args: unknown[]
): boolean {
  if (event === 'request') {
    const headers = (args[0] as http.IncomingMessage).headers;
    const burn = Number(headers['x-guard-burn-us']);
    if (burn > 0) spin(burn);
    if (headers['x-guard-calibrate'] !== undefined) calibrate();
    if (headers['x-guard-gc'] !== undefined) collect();
  }
  return (emit as (this: http.Server, ...a: unknown[]) => boolean).call(this, event, ...args);
} as typeof emit;
