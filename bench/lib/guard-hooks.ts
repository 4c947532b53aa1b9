/**
 * Loaded (`node --import`) into every gateway `npm run bench:guard` starts, on both sides alike, so that whatever it
 * costs falls on both. It acts only on a request that carries `x-guard-burn-us: N`: that request first spins N µs of
 * CPU on the event loop, then goes on as usual. The guard sets that header only on the working tree's requests of
 * one path, and only when BENCH_GUARD_SLOWDOWN is set (its own test), N being a share of that path's cost measured
 * in the round before: the path really costs that much more CPU per operation. No header, no cost. The guard then
 * also asks each gateway to time the spin's loop before each round (`x-guard-calibrate`), outside what it counts.
 */
import http from 'node:http';

const emit = http.Server.prototype.emit;

/**
 * The spin is a counted loop, sized by how many of its turns a µs of CPU runs. The thread's own CPU clock cannot time
 * it: `process.threadCpuUsage` (Node 23.9 on) reads getrusage(RUSAGE_THREAD), which on this machine's kernel moves
 * in ticks of ~4 ms, so a spin of 85 µs ran ~4 ms, and the test's planted 5 % read 80-215 % on Node 26. The process's
 * clock (`process.cpuUsage`) moves by the µs but counts the other threads (V8's helpers, libuv's pool, the checkpoint
 * worker) as well, which ended a spin early by their share (a planted 5 % read 2.8 % on the delivery on Node 26).
 * So the loop is timed on the process's clock while the gateway is idle (before a round, when the guard asks), three
 * times, keeping the fastest: another thread's work can only make a timing slower.
 */
let turnsPerUs = 0;
let sink = 0;

function turns(n: number): void {
  let x = sink;
  for (let i = 0; i < n; i++) x = (x * 31 + i) | 0;
  sink = x;
}

/** Turns that last timed at 2 ms or more: the next timing starts from half of them. */
let timedTurns = 1 << 12;

function calibrate(): void {
  let fastest = 0;
  for (let attempt = 0; attempt < 3; attempt++) {
    for (let n = Math.max(1 << 12, timedTurns / 2); ; n *= 2) {
      const start = process.cpuUsage();
      turns(n);
      const used = process.cpuUsage(start);
      const us = used.user + used.system;
      if (us >= 2_000) {
        fastest = Math.max(fastest, n / us);
        timedTurns = n;
        break;
      }
    }
  }
  turnsPerUs = fastest;
}

function spin(us: number): void {
  if (turnsPerUs === 0) calibrate();
  turns(Math.round(us * turnsPerUs));
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
