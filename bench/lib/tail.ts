/**
 * Where a latency tail comes from: what the gateway's own /metrics say about a window (GC pauses and
 * event-loop delay, from prom-client's default metrics), and how long this disk takes to make an append
 * durable (fdatasync) at the same time.
 */
import fs from 'node:fs';
import path from 'node:path';
import { request } from 'undici';

import { Samples, type LatencySummary } from './stats.js';

/** The counters of one /metrics scrape that a window's anatomy needs. */
export interface RuntimeScrape {
  /** GC pauses: count, seconds, and how many took longer than 10 ms (the histogram's 0.01 bucket). */
  gcCount: number;
  gcSeconds: number;
  gcOver10ms: number;
  /**
   * Event-loop delay beyond prom-client's 10 ms sampling interval (its histogram records whole intervals: an idle
   * loop reads ~10 ms). prom-client resets the histogram at each scrape: these cover the time since the last one.
   */
  loopDelayP99Ms: number;
  loopDelayMaxMs: number;
}

/** Sums a metric's samples over every label set, from Prometheus text (`name{labels} value` lines). */
function sum(text: string, name: string, labelFilter?: (labels: string) => boolean): number {
  let total = 0;
  let seen = false;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    const labels = rest.startsWith('{') ? rest.slice(1, rest.indexOf('}')) : '';
    if (!(rest.startsWith('{') || rest.startsWith(' '))) continue;
    if (labelFilter && !labelFilter(labels)) continue;
    const value = Number(rest.slice(rest.lastIndexOf(' ') + 1));
    if (Number.isFinite(value)) {
      total += value;
      seen = true;
    }
  }
  return seen ? total : NaN;
}

/** prom-client's `eventLoopMonitoringPrecision` (the gateway keeps the default). */
const SAMPLING_MS = 10;
const beyondInterval = (seconds: number) => Math.max(0, seconds * 1000 - SAMPLING_MS);

export async function scrapeRuntime(origin: string): Promise<RuntimeScrape> {
  const res = await request(`${origin}/metrics`);
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`GET /metrics answered ${res.statusCode}`);
  const p = 'gateway_nodejs_';
  const count = sum(text, `${p}gc_duration_seconds_count`);
  return {
    gcCount: count,
    gcSeconds: sum(text, `${p}gc_duration_seconds_sum`),
    gcOver10ms: count - sum(text, `${p}gc_duration_seconds_bucket`, (l) => l.includes('le="0.01"')),
    loopDelayP99Ms: beyondInterval(sum(text, `${p}eventloop_lag_p99_seconds`)),
    loopDelayMaxMs: beyondInterval(sum(text, `${p}eventloop_lag_max_seconds`)),
  };
}

/** What happened between two scrapes (the second one's event-loop figures cover exactly that time). */
export function runtimeDelta(before: RuntimeScrape, after: RuntimeScrape): RuntimeScrape {
  return {
    gcCount: after.gcCount - before.gcCount,
    gcSeconds: after.gcSeconds - before.gcSeconds,
    gcOver10ms: after.gcOver10ms - before.gcOver10ms,
    loopDelayP99Ms: after.loopDelayP99Ms,
    loopDelayMaxMs: after.loopDelayMaxMs,
  };
}

/**
 * Appends 4 KiB to a file in `dir` and fdatasyncs it, every `everyMs` until `until` settles (or `count`
 * times back to back when no `until` is given): the time the disk takes to make a small append durable,
 * which is what each group commit of a FULL gateway waits for.
 */
export async function probeFdatasync(
  dir: string,
  options: { everyMs?: number; until?: Promise<unknown>; count?: number },
): Promise<LatencySummary> {
  const file = path.join(dir, `fdatasync-probe-${process.pid}.bin`);
  const fh = await fs.promises.open(file, 'w');
  const block = Buffer.alloc(4096, 1);
  const samples = new Samples();
  let stop = false;
  void options.until?.then(
    () => (stop = true),
    () => (stop = true),
  );
  try {
    for (let i = 0; options.until ? !stop : i < (options.count ?? 1000); i++) {
      await fh.write(block);
      const t0 = performance.now();
      await fh.datasync();
      samples.push(performance.now() - t0);
      if (options.everyMs) await new Promise((r) => setTimeout(r, options.everyMs));
    }
  } finally {
    await fh.close();
    await fs.promises.rm(file, { force: true });
  }
  return samples.summary();
}
