/**
 * Loaded (`node --import`) into a gateway by `npm run bench:guard` only when BENCH_GUARD_SLOWDOWN is set, and only
 * into the working tree's side: the guard's own test uses it to prove that the guard catches a slower path.
 *
 * A request carrying `x-guard-burn-us: N` first spins N µs of CPU on the event loop, then goes on as usual. The
 * guard sets that header on one path's requests, N being a share of that path's cost measured in the warm-up
 * round, so the path really costs that much more CPU per operation. No header, no cost: nothing else changes.
 */
import http from 'node:http';

const emit = http.Server.prototype.emit;

function spin(us: number): void {
  const start = process.cpuUsage();
  for (;;) {
    const used = process.cpuUsage(start);
    if (used.user + used.system >= us) return;
  }
}

http.Server.prototype.emit = function emitWithBurn(
  this: http.Server,
  event: string | symbol,
  ...args: unknown[]
): boolean {
  if (event === 'request') {
    const burn = Number((args[0] as http.IncomingMessage).headers['x-guard-burn-us']);
    if (burn > 0) spin(burn);
  }
  return (emit as (this: http.Server, ...a: unknown[]) => boolean).call(this, event, ...args);
} as typeof emit;
