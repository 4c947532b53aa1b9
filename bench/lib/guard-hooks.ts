/**
 * Loaded (`node --import`) into every gateway `npm run bench:guard` starts, on both sides alike, so that whatever it
 * costs falls on both. It acts only on a request that carries `x-guard-burn-us: N`: that request first spins N µs of
 * CPU on the event loop, then goes on as usual. The guard sets that header only on the working tree's requests of
 * one path, and only when BENCH_GUARD_SLOWDOWN is set (its own test), N being a share of that path's cost measured
 * in an unmeasured round: the path really costs that much more CPU per operation. No header, no cost.
 */
import http from 'node:http';

const emit = http.Server.prototype.emit;

/**
 * The CPU of the thread that spins, where Node can say it (`process.threadCpuUsage`, Node 23.9 on): the process's, as
 * Node 20 has only that, counts what the other threads (V8's helpers, libuv's pool, the checkpoint worker) run
 * meanwhile, and so ends the spin early by their share; on Node 26 that left a planted 5 % at 2.8 % on the delivery.
 */
const threadCpu = (process as { threadCpuUsage?: (previous?: NodeJS.CpuUsage) => NodeJS.CpuUsage }).threadCpuUsage;
const cpuUsage: (previous?: NodeJS.CpuUsage) => NodeJS.CpuUsage = threadCpu
  ? (previous) => threadCpu.call(process, previous)
  : (previous) => process.cpuUsage(previous);

function spin(us: number): void {
  const start = cpuUsage();
  for (;;) {
    const used = cpuUsage(start);
    if (used.user + used.system >= us) return;
  }
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
    if (headers['x-guard-gc'] !== undefined) collect();
  }
  return (emit as (this: http.Server, ...a: unknown[]) => boolean).call(this, event, ...args);
} as typeof emit;
