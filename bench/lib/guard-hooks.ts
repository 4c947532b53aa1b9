/**
 * Loaded (`node --import`) into every gateway `npm run bench:guard` starts, on both sides alike, so that whatever it
 * costs falls on both. It acts only on a request that carries `x-guard-burn-us: N`: that request first spins N µs of
 * CPU on the event loop, then goes on as usual. The guard sets that header only on the working tree's requests of
 * one path, and only when BENCH_GUARD_SLOWDOWN is set (its own test), N being a share of that path's cost measured
 * in the round before: the path really costs that much more CPU per operation. No header, no cost. The guard then
 * also asks each gateway to time the spin before each round (`x-guard-calibrate`), outside what it counts.
 */
import { createHash } from 'node:crypto';
import http from 'node:http';

const emit = http.Server.prototype.emit;

/**
 * The spin hashes bytes (SHA-256, in Node's native code), as many as the asked µs of CPU hash, so that its speed does
 * not hang on what V8's compilers did meanwhile: a counted JavaScript loop, timed while unoptimised and run once
 * optimised, spent a third of the ask in 4 runs of 42 of its test. Nor can a clock time the spin as it runs:
 * `process.threadCpuUsage` (Node 23.9 on) reads getrusage(RUSAGE_THREAD), which on this machine's kernel moves in
 * steps of ~4 ms, so a spin of 85 µs ran ~4 ms, and the test's planted 5 % read 80-215 % on Node 26; the process's
 * clock (`process.cpuUsage`) moves by the µs but counts the other threads (V8's helpers, libuv's pool, the checkpoint
 * worker), which ended a spin early by their share (a planted 5 % read 2.8 % on the delivery on Node 26). So the hash
 * is timed on the process's clock while the gateway is idle (before a round, when the guard asks): its cost a call and
 * its bytes a µs, each three times, keeping the fastest, as another thread's work can only make a timing slower.
 */
const BLOCK = Buffer.alloc(64 * 1024, 0x5a);
let bytesPerUs = 0;
let callUs = 0;

function hashBytes(bytes: number): void {
  const hash = createHash('sha256');
  for (let left = bytes; left > 0; left -= BLOCK.length)
    hash.update(left >= BLOCK.length ? BLOCK : BLOCK.subarray(0, left));
  hash.digest();
}

/** The fastest of three timings of `run`, in µs of the process's CPU. */
function fastest(run: () => void): number {
  let best = Number.POSITIVE_INFINITY;
  for (let attempt = 0; attempt < 3; attempt++) {
    const start = process.cpuUsage();
    run();
    const used = process.cpuUsage(start);
    best = Math.min(best, used.user + used.system);
  }
  return best;
}

/**
 * Times the hash again, keeping the fastest reading of the process's life: noise (another process on the machine, a
 * busy cache) only makes a timing slower, and a calibration read slow made every spin after it short. In a suite's
 * run, under a load average of 5.7, a planted 5 % read 2.8 % on the intake with the other paths at 8-12 %.
 */
function calibrate(): void {
  const call =
    fastest(() => {
      for (let i = 0; i < 200; i++) hashBytes(0);
    }) / 200;
  callUs = callUs === 0 ? call : Math.min(callUs, call);
  const bytes = 32 * BLOCK.length;
  bytesPerUs = Math.max(bytesPerUs, bytes / Math.max(1, fastest(() => hashBytes(bytes)) - callUs));
}

function spin(us: number): void {
  if (bytesPerUs === 0) calibrate();
  hashBytes(Math.round(Math.max(0, us - callUs) * bytesPerUs));
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
