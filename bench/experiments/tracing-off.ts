// What tracing costs when it is off (docs/decisions/022): an upstream call through UpstreamHttp, the hook site every
// GraphQL operation that reaches an upstream passes, measured three ways in alternating rounds in one process:
//
//   no tracing code  UpstreamHttp's inner `perform` (the body `request` had before tracing existed)
//   tracing off      `request` with the default TRACING_OFF (the check, then `perform`)
//   tracing on       `request` with an SDK tracer and an in-memory exporter (for scale)
//
// against a minimal loopback upstream, plus the other off-path hooks on their own (the event-intake and
// delivery checks). Not part of `npm run bench`; run with `npx tsx bench/experiments/tracing-off.ts [rounds] [calls]`.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';

import { loadConfig } from '../../src/config/index.js';
import { createLogger } from '../../src/logger.js';
import { Metrics } from '../../src/metrics.js';
import { createTracing, TRACING_OFF, type Tracing } from '../../src/telemetry/tracing.js';
import { UpstreamHttp, type UpstreamRequest, type UpstreamResponse } from '../../src/upstream/http.js';

const rounds = Number(process.argv[2] ?? 30);
const calls = Number(process.argv[3] ?? 1000);

const upstream = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(201, { 'content-type': 'application/json' });
    res.end('{"id":"7d5c6c1e-1d1f-4b7e-9a55-2f0d1b6f7a10"}');
  });
});
await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
const baseUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;

const logger = createLogger({ level: 'silent' });
const client = (tracing: Tracing) =>
  new UpstreamHttp({
    name: 'cloud',
    baseUrl,
    timeoutMs: 10_000,
    retryBudgetMs: 20_000,
    maxRetries: 0,
    metrics: new Metrics(),
    logger,
    tracing,
    connections: 8,
  });
const on = await createTracing(loadConfig({}).tracing, { exporter: new InMemorySpanExporter() });
const clients = { none: client(TRACING_OFF), off: client(TRACING_OFF), on: client(on) };
const req: UpstreamRequest = {
  method: 'POST',
  path: '/ocs/v1/services',
  route: 'POST /ocs/v1/services',
  headers: { 'idempotency-key': 'k' },
  body: { name: 'x' },
};

type Perform = (r: UpstreamRequest, inject: undefined, span: undefined) => Promise<UpstreamResponse>;
const variants: Record<'none' | 'off' | 'on', () => Promise<unknown>> = {
  none: () => (clients.none as unknown as { perform: Perform }).perform(req, undefined, undefined),
  off: () => clients.off.request(req),
  on: () => clients.on.request(req),
};

async function round(run: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  // 8 in flight, like a loaded gateway's pool; sequential calls would mostly measure loopback wake-ups.
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next++ < calls) await run();
    }),
  );
  return ((performance.now() - started) * 1000) / calls;
}

for (const run of Object.values(variants)) await round(run); // warm-up
const perCall: Record<string, number[]> = { none: [], off: [], on: [] };
for (let r = 0; r < rounds; r++) {
  const order = r % 2 === 0 ? (['none', 'off', 'on'] as const) : (['on', 'off', 'none'] as const);
  for (const name of order) perCall[name]!.push(await round(variants[name]));
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
function paired(a: number[], b: number[]): { diff: number; ci: number } {
  const d = a.map((x, i) => x - b[i]!);
  const m = mean(d);
  const sd = Math.sqrt(d.reduce((s, x) => s + (x - m) ** 2, 0) / (d.length - 1));
  return { diff: m, ci: (1.96 * sd) / Math.sqrt(d.length) };
}

// The other off-path hooks, alone: Events.ingest asks TRACING_OFF for a traceparent, EventStreams checks `enabled`.
function nsPerOp(fn: () => unknown, n = 20_000_000): number {
  let sink: unknown;
  const started = process.hrtime.bigint();
  for (let i = 0; i < n; i++) sink = fn();
  const ns = Number(process.hrtime.bigint() - started) / n;
  if (sink === 42) console.log('');
  return ns;
}
const tracing: Tracing = TRACING_OFF;
const emptyCall = nsPerOp(() => undefined);
const traceparentCall = nsPerOp(() => tracing.traceparent());
const enabledCheck = nsPerOp(() => (tracing.enabled ? 1 : undefined));

const base = mean(perCall.none!);
const off = paired(perCall.off!, perCall.none!);
const onCost = paired(perCall.on!, perCall.none!);
const fmt = (x: number) => x.toFixed(2);
console.log(
  `Upstream call through UpstreamHttp, loopback stub, ${rounds} alternating rounds x ${calls} calls (8 in flight), µs per call:`,
);
console.log(`| variant | mean µs/call | vs no tracing code (95% CI) |`);
console.log(`|---|---|---|`);
console.log(`| no tracing code | ${fmt(base)} | |`);
console.log(
  `| tracing off (default) | ${fmt(mean(perCall.off!))} | ${off.diff >= 0 ? '+' : ''}${fmt(off.diff)} ± ${fmt(off.ci)} µs (${fmt((off.diff / base) * 100)} %) |`,
);
console.log(
  `| tracing on (in-memory exporter) | ${fmt(mean(perCall.on!))} | ${onCost.diff >= 0 ? '+' : ''}${fmt(onCost.diff)} ± ${fmt(onCost.ci)} µs (${fmt((onCost.diff / base) * 100)} %) |`,
);
console.log(
  `Off-path hooks alone, ns per call: empty call ${emptyCall.toFixed(2)}, TRACING_OFF.traceparent() ${traceparentCall.toFixed(2)}, enabled check ${enabledCheck.toFixed(2)}`,
);

await Promise.all(Object.values(clients).map((c) => c.close()));
await on.close();
upstream.close();
