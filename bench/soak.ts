/**
 * `npm run soak`: a realistic mix against one gateway process for a given time, reporting per minute what its
 * /metrics says of its memory and event loop (prom-client's default process and nodejs metrics), and at the end
 * the slope (least squares, MB/min). Not part of `npm test` or `npm run bench`.
 *
 * Heap used as /metrics reads it is a sawtooth (garbage waiting for the next collection), so one sample a minute
 * says little about a leak. After each scrape the soak also forces a full collection through the inspector
 * (the gateway runs with `--inspect` on loopback) and reads what is still live: that figure's slope is the one
 * a leak would move. The collection's own pause falls into the next minute's event-loop figures.
 *
 * The mix, open loop, per second: 20 mutations (createNetwork, fresh key), 50 tree queries, 20 mobile-ID
 * round trips over graphql-ws (subscribe, notification, event, complete), 10 notifications nobody waits for,
 * 5 graphql-sse round trips, 2 WebSocket connections and 2 SSE streams that give up before their event; and
 * 200 graphql-ws subscriptions held open the whole time on ids that never come.
 *
 * Options (after `npm run soak --`):
 *   --minutes <n>   how long (default 10)
 *   --db <store>    sqlite (default) or postgres (an embedded PostgreSQL)
 */
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { createClient } from 'graphql-ws';
import { request } from 'undici';
import WebSocket from 'ws';

import { API_KEY } from './lib/env.js';
import { Inspector } from './lib/inspector.js';
import { Operations, startLongRunGateway, stopAll, type Database, type Kind } from './lib/long-run.js';
import { SUBSCRIPTION } from './scenarios/fanout.js';

const { values: cli } = parseArgs({
  options: {
    minutes: { type: 'string', default: '10' },
    db: { type: 'string', default: 'sqlite' },
  },
});
const minutes = Number(cli.minutes);
if (!(minutes > 0)) throw new Error(`--minutes wants a positive number, got ${JSON.stringify(cli.minutes)}`);
if (cli.db !== 'sqlite' && cli.db !== 'postgres')
  throw new Error(`--db is sqlite or postgres, got ${JSON.stringify(cli.db)}`);

/** Requests per second by kind. */
const MIX: Partial<Record<Kind, number>> = {
  mutation: 20,
  query: 50,
  ws: 20,
  notification: 10,
  sse: 5,
  'ws-cancel': 2,
  'sse-cancel': 2,
};
const IDLE_SUBSCRIPTIONS = 200;
/** A kind with this many requests outstanding skips its next one (counted): the soak must not pile up work. */
const MAX_IN_FLIGHT = 64;

const started = Date.now();
const log = (line: string) =>
  process.stderr.write(`[${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s] ${line}\n`);

/** The values of the prom-client metrics we report (unlabelled series only). */
async function scrape(origin: string): Promise<Record<string, number>> {
  const res = await request(`${origin}/metrics`);
  const text = await res.body.text();
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const m = /^(gateway_(?:process|nodejs)_\w+) ([\d.e+-]+)$/.exec(line);
    if (m) out[m[1]!] = Number(m[2]);
  }
  return out;
}

/** Least-squares slope of y over x. */
function slope(xs: number[], ys: number[]): number {
  const n = xs.length;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += (xs[i]! - mx) * (ys[i]! - my);
    den += (xs[i]! - mx) ** 2;
  }
  return den === 0 ? NaN : num / den;
}

interface Minute {
  minute: number;
  rssMb: number;
  heapUsedMb: number;
  liveMb: number;
  heapTotalMb: number;
  externalMb: number;
  lagP50Ms: number;
  lagP99Ms: number;
  lagMaxMs: number;
  done: number;
  failed: number;
  skipped: number;
  load1: number;
}

async function main(): Promise<void> {
  const database = cli.db as Database;
  log(
    `soak: ${minutes} min on ${database}; mix per second ${JSON.stringify(MIX)}, ${IDLE_SUBSCRIPTIONS} idle subscriptions`,
  );
  const gw = await startLongRunGateway(database, { inspect: true });
  const insp = await Inspector.connect(gw.inspectPort!);
  const live = async () => {
    await insp.collectGarbage();
    return (await insp.evaluate<number>('process.memoryUsage().heapUsed')) / 2 ** 20;
  };
  const ops = await Operations.prepare(gw.origin);
  const idle = createClient({
    url: `${gw.origin.replace(/^http/, 'ws')}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: { authorization: `Bearer ${API_KEY}` },
    retryAttempts: 0,
  });
  const idleErrors: string[] = [];
  const disposers = Array.from({ length: IDLE_SUBSCRIPTIONS }, (_, i) =>
    idle.subscribe(
      { query: SUBSCRIPTION, variables: { authReqId: `soak-idle-${i}` } },
      { next: () => undefined, error: (e) => idleErrors.push(String(e)), complete: () => undefined },
    ),
  );
  const rows: Minute[] = [];
  let done = 0;
  let failed = 0;
  let skipped = 0;
  const failures = new Map<string, number>();
  const skippedByKind = new Map<Kind, number>();
  const inFlight = new Map<Kind, number>();
  const fire = (kind: Kind) => {
    const n = inFlight.get(kind) ?? 0;
    if (n >= MAX_IN_FLIGHT) {
      skipped += 1;
      skippedByKind.set(kind, (skippedByKind.get(kind) ?? 0) + 1);
      return;
    }
    inFlight.set(kind, n + 1);
    ops
      .run(kind)
      .then(
        () => (done += 1),
        (err: unknown) => {
          failed += 1;
          const key = `${kind}: ${(err as Error).message.slice(0, 120)}`;
          failures.set(key, (failures.get(key) ?? 0) + 1);
        },
      )
      .finally(() => inFlight.set(kind, (inFlight.get(kind) ?? 1) - 1));
  };
  try {
    const first = await scrape(gw.origin);
    log(
      `before the mix: RSS ${(first.gateway_process_resident_memory_bytes! / 2 ** 20).toFixed(1)} MB, heap used ${(first.gateway_nodejs_heap_size_used_bytes! / 2 ** 20).toFixed(1)} MB`,
    );
    // Open loop in 100 ms ticks: each kind owes rate × elapsed requests.
    const owed = new Map<Kind, number>();
    const t0 = performance.now();
    let last = t0;
    const ticker = setInterval(() => {
      const now = performance.now();
      for (const [kind, rate] of Object.entries(MIX) as Array<[Kind, number]>) {
        let due = (owed.get(kind) ?? 0) + (rate * (now - last)) / 1000;
        for (; due >= 1; due -= 1) fire(kind);
        owed.set(kind, due);
      }
      last = now;
    }, 100);
    try {
      for (let minute = 1; minute <= minutes; minute++) {
        await sleep(t0 + minute * 60_000 - performance.now());
        const m = await scrape(gw.origin);
        const row: Minute = {
          minute,
          rssMb: m.gateway_process_resident_memory_bytes! / 2 ** 20,
          heapUsedMb: m.gateway_nodejs_heap_size_used_bytes! / 2 ** 20,
          liveMb: await live(),
          heapTotalMb: m.gateway_nodejs_heap_size_total_bytes! / 2 ** 20,
          externalMb: m.gateway_nodejs_external_memory_bytes! / 2 ** 20,
          lagP50Ms: m.gateway_nodejs_eventloop_lag_p50_seconds! * 1000,
          lagP99Ms: m.gateway_nodejs_eventloop_lag_p99_seconds! * 1000,
          lagMaxMs: m.gateway_nodejs_eventloop_lag_max_seconds! * 1000,
          done,
          failed,
          skipped,
          load1: os.loadavg()[0]!,
        };
        done = failed = skipped = 0;
        rows.push(row);
        log(
          `minute ${minute}: RSS ${row.rssMb.toFixed(1)} MB, heap used ${row.heapUsedMb.toFixed(1)} / ${row.heapTotalMb.toFixed(1)} MB (${row.liveMb.toFixed(1)} MB live after a full GC), external ${row.externalMb.toFixed(1)} MB, ` +
            `event-loop delay p50 ${row.lagP50Ms.toFixed(1)} p99 ${row.lagP99Ms.toFixed(1)} max ${row.lagMaxMs.toFixed(1)} ms; ${row.done} done, ${row.failed} failed, ${row.skipped} skipped; load ${row.load1.toFixed(2)}`,
        );
      }
    } finally {
      clearInterval(ticker);
    }
  } finally {
    for (const dispose of disposers) dispose();
    await idle.dispose();
    await sleep(2_000);
    await ops.close();
    insp.close();
    await gw.stop();
  }
  const xs = rows.map((r) => r.minute);
  const rssSlope = slope(
    xs,
    rows.map((r) => r.rssMb),
  );
  const heapSlope = slope(
    xs,
    rows.map((r) => r.heapUsedMb),
  );
  const liveSlope = slope(
    xs,
    rows.map((r) => r.liveMb),
  );
  const later = rows.filter((r) => r.minute > 1);
  const laterSlope = (pick: (r: Minute) => number) =>
    later.length > 1
      ? slope(
          later.map((r) => r.minute),
          later.map(pick),
        )
      : NaN;
  const f = (x: number, d = 1) => x.toFixed(d);
  const out = [
    `Soak of ${new Date(started).toISOString().slice(0, 16).replace('T', ' ')} UTC · ${minutes} min · ${database} · Node ${process.version} · ${os.cpus().length} cores, not pinned`,
    '',
    `Mix per second: ${Object.entries(MIX)
      .map(([k, v]) => `${v} ${k}`)
      .join(', ')}; ${IDLE_SUBSCRIPTIONS} graphql-ws subscriptions held open.`,
    '',
    '| minute | RSS MB | heap used MB | live after full GC MB | heap total MB | external MB | event-loop delay p50 / p99 / max ms | requests done | failed | skipped | load average (1 min) |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...rows.map(
      (r) =>
        `| ${r.minute} | ${f(r.rssMb)} | ${f(r.heapUsedMb)} | ${f(r.liveMb)} | ${f(r.heapTotalMb)} | ${f(r.externalMb)} | ${f(r.lagP50Ms)} / ${f(r.lagP99Ms)} / ${f(r.lagMaxMs)} | ${r.done} | ${r.failed} | ${r.skipped} | ${f(r.load1, 2)} |`,
    ),
    '',
    `Slope (least squares, MB/min) over minutes 1–${minutes}: RSS ${f(rssSlope, 2)}, heap used ${f(heapSlope, 2)}, live after full GC ${f(liveSlope, 3)}; ` +
      `over minutes 2–${minutes}: RSS ${f(
        laterSlope((r) => r.rssMb),
        2,
      )}, heap used ${f(
        laterSlope((r) => r.heapUsedMb),
        2,
      )}, live after full GC ${f(
        laterSlope((r) => r.liveMb),
        3,
      )}.`,
    ...(skippedByKind.size
      ? [
          '',
          `Skipped (${MAX_IN_FLIGHT} of the kind outstanding): ${[...skippedByKind].map(([k, n]) => `${n} ${k}`).join(', ')}.`,
        ]
      : []),
    ...(failures.size ? ['', 'Failures:', ...[...failures].map(([k, n]) => `- ${n} × ${k}`)] : []),
    ...(idleErrors.length
      ? ['', `Idle subscriptions that ended with an error: ${idleErrors.length} (${idleErrors[0]})`]
      : []),
  ];
  process.stdout.write(`${out.join('\n')}\n`);
}

for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.once(signal, () => void stopAll().finally(() => process.exit(130)));
main().catch(async (err: unknown) => {
  process.stderr.write(`soak failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  await stopAll();
  process.exit(1);
});
