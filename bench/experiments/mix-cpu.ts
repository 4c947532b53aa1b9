/**
 * The realistic mix (bench scenario 7) in process: what one notification costs the gateway's process in CPU and in
 * GC, with each of its ~`n` waiting subscriptions waiting as long as in the bench. Each side of a comparison runs in
 * a fresh process of its own (`--side`): a built gateway (`dist`, as `npm start` runs it; SQLite, the sandbox
 * upstreams) in that process, and in a child process the clients: `n` graphql-ws connections with one pending
 * `mobileIdAuthentication` subscription each (scenario 7's), and the mobile identity service, which sends `rate`
 * notifications a second, each to the subscription that has waited longest; a connection whose subscription ended
 * with its result (`next`, `complete`) subscribes again on a fresh auth_req_id, at the back of the queue. So the
 * gateway's process runs only the gateway: per notification its intake, its one delivery and the next subscribe.
 *
 * After `warm` seconds (one turn of the queue at the defaults, so every waiting subscription was made by the mix) a
 * window of `window` seconds is measured in the gateway's process: its CPU (process.cpuUsage, every thread), its
 * main thread's (/proc, 10 ms ticks), V8's GC pauses by kind (PerformanceObserver 'gc' entries: scavenge,
 * mark-compact, incremental marking, weak callbacks) and their count, the RSS and the heap at the end, and the
 * clients' p50/p99 from the scheduled send to the `next`. Then the subscribe alone: the notifications stop, every
 * connection completes its subscription (counted until the bus has none), then subscribes again on a fresh id
 * (counted until the bus has `n`): the process's CPU per subscribe and per complete.
 *
 * The driver runs the sides in rounds, the order alternating, each round a fresh pair of processes: `--b-dist DIR`
 * (another build's dist/src, e.g. /work/main/dist/src), `--b-env NAME=VALUE` (this build with a switch flipped),
 * `--b-baseline` (the mix's floor, its work written by hand: bench/servers/mix-baseline.ts, decision 127), or
 * `--flags "--max-semi-space-size=16,--max-semi-space-size=64"` (this build under each set of node flags, comma
 * between sets, space within one). It prints each side's medians and ranges and, for two sides, the paired
 * differences (A − B) per notification.
 *
 *   npm run build && npx tsx bench/experiments/mix-cpu.ts [--n 10000] [--rate 1000] [--warm 10] [--window 20]
 *     [--rounds 4] [--b-dist /work/main/dist/src | --b-env NAME=VALUE | --b-baseline | --flags "A,B"]
 *
 * A side's settings are in its process's environment from the start too (GLIBC_TUNABLES, say), not in its clients'.
 * With `MIX_TIMELINE=FILE` each side writes its window's timeline, epoch ms: FILE holds every delivery's scheduled
 * time and latency (pairs), FILE.gateway the gateway's GC pauses and its event-loop turns more than 5 ms late,
 * FILE.clients the clients' own late turns (pairs), so that a tail can be set against what stalled and where. Each
 * side writes over the files of the one before: run one round of one side (`--rounds 1`, one set of `--flags`) to keep
 * the timeline of the side named.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import inspector from 'node:inspector/promises';
import os from 'node:os';
import path from 'node:path';
import { constants, PerformanceObserver } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { WebSocket } from 'ws';

import type { Gateway } from '../../src/gateway/options.js';
import { SUBSCRIPTION } from '../scenarios/fanout.js';
import { notificationBody } from '../scenarios/webhook.js';
import { startMixBaseline } from '../servers/mix-baseline.js';
import { API_KEY, builtGateway, clientSocket, TOKEN } from './in-process-gateway.js';

const { values: cli } = parseArgs({
  options: {
    n: { type: 'string', default: '10000' },
    rate: { type: 'string', default: '1000' },
    warm: { type: 'string', default: '10' },
    window: { type: 'string', default: '20' },
    rounds: { type: 'string', default: '4' },
    dist: { type: 'string', default: path.resolve(fileURLToPath(import.meta.url), '../../../dist/src') },
    'b-dist': { type: 'string' },
    'b-env': { type: 'string', multiple: true, default: [] },
    env: { type: 'string', multiple: true, default: [] },
    flags: { type: 'string' },
    /** With --side run directly: `perf record -D -1 --control fifo:CTL,ACK` counts the measured window only. */
    'perf-ctl': { type: 'string' },
    'perf-ack': { type: 'string' },
    /**
     * With --side run directly: V8's sampling heap profiler over the measured window, the objects that scavenges and
     * mark-compacts collected included (what the window allocated, not what it kept), written to this file as a
     * `.heapprofile` (sizes per allocation site: bench/experiments/allocation-sites.ts reads it).
     */
    'alloc-prof': { type: 'string' },
    /**
     * With --side run directly: V8's CPU profiler (100 µs sampling) over `--sub-cycles` cycles of the subscribe alone
     * (every subscription completed, then made again), after the measured ones, written to this file as a
     * `.cpuprofile`; to a file named `*.heapprofile`, the sampling heap profiler's allocations over those cycles.
     */
    'sub-prof': { type: 'string' },
    'sub-cycles': { type: 'string', default: '3' },
    /** Side B is the mix's floor written by hand (bench/servers/mix-baseline.ts) instead of a gateway. */
    'b-baseline': { type: 'boolean', default: false },
    /** Internal, with --side: this side serves the mix with bench/servers/mix-baseline.ts. */
    baseline: { type: 'boolean', default: false },
    /** Internal: this process is one side's gateway (with `--dist`, `--env`) and prints its figures as JSON. */
    side: { type: 'boolean', default: false },
    /** Internal: this process is the clients. */
    clients: { type: 'boolean', default: false },
    /** Internal, with --clients: the gateway's origin, for the notifications. */
    url: { type: 'string' },
  },
});

interface SideResult {
  /** Scheduled in the window (`delivered` of them arrived in it); every per-notification figure is per delivered. */
  notifications: number;
  cpuUs: number;
  mainUs: number;
  gc: Record<string, { ms: number; count: number }>;
  /** CPU µs per notification by thread name (the main thread as `main`), over the window. */
  threads: Record<string, number>;
  rssMb: number;
  heapUsedMb: number;
  p50: number;
  p99: number;
  delivered: number;
  subscribeUs: number;
  completeUs: number;
}

/** NAME=VALUE pairs; the value is everything after the first `=` (GLIBC_TUNABLES=glibc.malloc.mxfast=0). */
const env = (pairs: string[]): Record<string, string> =>
  Object.fromEntries(
    pairs.map((p) => {
      const at = p.indexOf('=');
      if (at < 1) throw new Error(`--env and --b-env want NAME=VALUE, got ${JSON.stringify(p)}`);
      return [p.slice(0, at), p.slice(at + 1)];
    }),
  );

/** The driver's environment, which a side hands its clients (see runSide). */
const driverEnv: NodeJS.ProcessEnv = process.env.MIX_DRIVER_ENV
  ? (JSON.parse(process.env.MIX_DRIVER_ENV) as NodeJS.ProcessEnv)
  : process.env;

// ---------------------------------------------------------------------------------------------------------------
// The clients (a child of a side's process).

interface Conn {
  ws: WebSocket;
  seq: number;
  id: string;
  authReqId: string;
  scheduledAt: number;
  /** Subscribing again after the `complete` (false while the subscribe-alone phase completes them). */
  again: boolean;
}

function clients(): void {
  const [a, b, c] = JSON.stringify({
    id: '\u0000',
    type: 'subscribe',
    payload: { query: SUBSCRIPTION, variables: { authReqId: '\u0001' } },
  }).split(/\\u0000|\\u0001/) as [string, string, string];
  const conns: Conn[] = [];
  /** Connections whose subscription no notification has targeted yet, oldest first (a queue over an array). */
  let queue: Conn[] = [];
  let head = 0;
  let latencies: number[] | null = null;
  /** MIX_TIMELINE=FILE: each delivery of the window's scheduled time and latency (ms), written to FILE as JSON. */
  let timeline: number[] | null = null;
  /** With MIX_TIMELINE, the clients' own event-loop turns more than 5 ms late (epoch ms), written to FILE.clients. */
  const clientLate: number[] = [];
  if (process.env.MIX_TIMELINE) {
    let last = performance.now();
    setInterval(() => {
      const now = performance.now();
      if (timeline && now - last > 7) clientLate.push(performance.timeOrigin + last, now - last - 2);
      last = now;
    }, 2).unref();
  }
  let delivered = 0;
  let completes = 0;
  /** Connections closed by the gateway before their ack and opened again. */
  let reopened = 0;
  /** The clients are closing their connections (a close then is theirs). */
  let closing = false;
  const subscribe = (conn: Conn): void => {
    conn.seq += 1;
    conn.id = String(conn.seq);
    conn.authReqId = `mix-${randomUUID()}`;
    conn.ws.send(a + conn.id + b + conn.authReqId + c);
    queue.push(conn);
  };
  const say = (m: unknown): void => void process.send!(m);
  process.on(
    'message',
    async (m: {
      open?: string;
      n?: number;
      mix?: { rate: number; warm: number; window: number };
      complete?: true;
      subscribe?: true;
      close?: true;
    }) => {
      if (m.open) {
        const url = m.open;
        const n = m.n!;
        /**
         * A connection the gateway closes before its ack is opened again (up to five times): graphql-ws closes one
         * whose `connection_init` it has not read within 3 s (4408), which a loaded machine opening 250 at a time
         * meets; waiting for its ack would wait for ever (decision 103's stall, fanout-ab's clients). A connection
         * closed after its ack is said on stderr (its subscription is lost to the mix).
         */
        const open = (): Promise<void> =>
          new Promise((resolve, reject) => {
            const attempt = (k: number): void => {
              let acknowledged = false;
              const ws = clientSocket(
                url,
                () => {
                  acknowledged = true;
                  conns.push(conn);
                  subscribe(conn);
                  resolve();
                },
                (text) => {
                  if (text.startsWith(`{"id":"${conn.id}","type":"next"`)) {
                    if (latencies !== null) {
                      latencies.push(performance.now() - conn.scheduledAt);
                      timeline?.push(performance.timeOrigin + conn.scheduledAt, performance.now() - conn.scheduledAt);
                    }
                    delivered++;
                  } else if (text.startsWith(`{"id":"${conn.id}","type":"complete"`)) {
                    completes++;
                    if (conn.again) subscribe(conn);
                  } else if (text.startsWith('{"id"')) say({ unexpected: text.slice(0, 200) });
                },
                // A socket error is followed by its close (below).
                (err) => process.stderr.write(`mix clients: ${err.message}\n`),
              );
              const conn: Conn = { ws, seq: 0, id: '', authReqId: '', scheduledAt: 0, again: true };
              ws.on('close', (code, reason) => {
                if (acknowledged) {
                  if (!closing) say({ unexpected: `closed by the gateway: ${code} ${String(reason)}` });
                  return;
                }
                reopened++;
                if (k < 5) attempt(k + 1);
                else reject(new Error(`a connection closed before its ack ${k} times (${code} ${String(reason)})`));
              });
            };
            attempt(1);
          });
        for (let i = 0; i < n; i += 250) await Promise.all(Array.from({ length: Math.min(250, n - i) }, open));
        if (reopened > 0)
          process.stderr.write(`mix clients: ${reopened} connections closed before their ack, opened again\n`);
        say('opened');
        return;
      }
      if (m.mix) {
        const { rate, warm, window } = m.mix;
        const url = cli.url!;
        const pool = new Pool(url, { connections: 32, pipelining: 1 });
        const body = notificationBody();
        const parts = body.split('{{uuid}}') as [string, string];
        const headers = { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` };
        const started = performance.now();
        let sent = 0;
        let errors = 0;
        let phase: 'warm' | 'window' | 'done' = 'warm';
        await new Promise<void>((resolve) => {
          const tick = setInterval(() => {
            const now = performance.now();
            const elapsed = (now - started) / 1000;
            if (phase === 'warm' && elapsed >= warm) {
              phase = 'window';
              latencies = [];
              if (process.env.MIX_TIMELINE) timeline = [];
              delivered = 0;
              say('window-start');
            } else if (phase === 'window' && elapsed >= warm + window) {
              phase = 'done';
              clearInterval(tick);
              const l = latencies!.sort((x, y) => x - y);
              latencies = null;
              if (timeline) {
                fs.writeFileSync(process.env.MIX_TIMELINE!, JSON.stringify(timeline));
                fs.writeFileSync(`${process.env.MIX_TIMELINE!}.clients`, JSON.stringify(clientLate));
              }
              timeline = null;
              const q = (p: number) => l[Math.min(l.length - 1, Math.floor(p * l.length))] ?? NaN;
              say({ window: { delivered: l.length, p50: q(0.5), p99: q(0.99), errors } });
              resolve();
              return;
            }
            const due = Math.floor(elapsed * rate);
            while (sent < due && head < queue.length) {
              const conn = queue[head++]!;
              conn.scheduledAt = now;
              sent++;
              pool
                .request({
                  path: '/webhooks/mobile-id',
                  method: 'POST',
                  headers,
                  body: parts[0] + conn.authReqId + parts[1],
                })
                .then(
                  (res) => {
                    if (res.statusCode !== 204) errors++;
                    return res.body.dump();
                  },
                  () => void errors++,
                );
            }
            if (head > 50_000) {
              queue = queue.slice(head);
              head = 0;
            }
          }, 5);
        });
        await new Promise((r) => setTimeout(r, 1000));
        await pool.close();
        return;
      }
      if (m.complete) {
        for (const conn of conns) {
          conn.again = false;
          conn.ws.send(`{"id":"${conn.id}","type":"complete"}`);
        }
        queue = [];
        head = 0;
        return;
      }
      if (m.subscribe) {
        for (const conn of conns) {
          conn.again = true;
          subscribe(conn);
        }
        return;
      }
      if (m.close) {
        closing = true;
        // A socket the gateway closed already gets no second 'close' event: waiting for one would never end.
        await Promise.all(
          conns.map((c) =>
            c.ws.readyState === c.ws.CLOSED
              ? undefined
              : new Promise<void>((r) => (c.ws.once('close', () => r()), c.ws.close())),
          ),
        );
        say('closed');
      }
    },
  );
}

// ---------------------------------------------------------------------------------------------------------------
// One side: the gateway in this process.

/** The main thread's CPU in µs (/proc, 10 ms ticks). */
function mainThreadUs(): number {
  const stat = fs.readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1e6) / 100;
}

/** Every thread's CPU in µs by its name (/proc/self/task/<tid>/stat: comm, utime + stime, 10 ms ticks). */
function threadsUs(): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of fs.readdirSync('/proc/self/task')) {
    let stat: string;
    try {
      stat = fs.readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
    } catch {
      continue; // a thread that ended
    }
    const name = tid === String(process.pid) ? 'main' : stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    out.set(name, (out.get(name) ?? 0) + ((Number(fields[11]) + Number(fields[12])) * 1e6) / 100);
  }
  return out;
}

const GC_KINDS: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'scavenge',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'mark-compact',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weak-callbacks',
};

/**
 * Starts V8's sampling heap profiler (a sample every ~4 KiB allocated; V8's default is 32 KiB), the objects the GC
 * collects kept in its samples; returns what stops it and gives the profile.
 */
async function allocationSampling(): Promise<() => Promise<unknown>> {
  const session = new inspector.Session();
  session.connect();
  await session.post('HeapProfiler.enable');
  await session.post('HeapProfiler.startSampling', {
    samplingInterval: 4096,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  return async () => {
    const { profile } = await session.post('HeapProfiler.stopSampling');
    session.disconnect();
    return profile;
  };
}

/** perf's control and acknowledgement FIFOs, opened at the first use (perf opens its ends when it starts). */
let perfFds: [number, number | undefined] | undefined;
/** Tells perf to count (`enable`) or stop (`disable`), and waits for its acknowledgement. */
function perfControl(command: 'enable' | 'disable'): void {
  if (!cli['perf-ctl']) return;
  perfFds ??= [fs.openSync(cli['perf-ctl'], 'w'), cli['perf-ack'] ? fs.openSync(cli['perf-ack'], 'r') : undefined];
  fs.writeSync(perfFds[0], `${command}\n`);
  if (perfFds[1] !== undefined) fs.readSync(perfFds[1], Buffer.alloc(5));
}

/** What a side serves the mix with: the built gateway, or with `--baseline` the mix's floor written by hand. */
async function target(): Promise<{ url: string; subscribers(): number; close(): Promise<void> }> {
  if (cli.baseline) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mix-baseline-'));
    const baseline = await startMixBaseline({
      dataDir: dir,
      apiKey: API_KEY,
      notificationToken: TOKEN,
      query: SUBSCRIPTION,
    });
    return {
      url: baseline.url,
      subscribers: () => baseline.subscribers(),
      close: async () => {
        await baseline.close();
        fs.rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  const gw: Gateway = await builtGateway('mix-cpu', env(cli.env!), cli.dist!);
  return { url: gw.url, subscribers: () => gw.services.events.bus.subscribers('mobile-id'), close: () => gw.close() };
}

async function side(): Promise<void> {
  const n = Number(cli.n);
  if (cli['perf-ctl']) process.stderr.write(`mix side: pid ${process.pid}\n`);
  const gw = await target();
  // The clients run under the driver's own environment: a process-wide setting a side starts under (GLIBC_TUNABLES,
  // say) is the gateway's alone.
  const child: ChildProcess = fork(fileURLToPath(import.meta.url), ['--clients', '--url', gw.url], {
    execArgv: ['--import', 'tsx'],
    env: driverEnv,
  });
  const said = (word: string): Promise<unknown> =>
    new Promise((resolve) => {
      const on = (m: unknown) => {
        if (m !== word && !(typeof m === 'object' && m !== null && word in m)) return;
        child.off('message', on);
        resolve(m);
      };
      child.on('message', on);
    });
  child.on('message', (m) => {
    if (typeof m === 'object' && m !== null && 'unexpected' in m) process.stderr.write(`${JSON.stringify(m)}\n`);
  });
  const subscribers = () => gw.subscribers();
  const until = async (ok: () => boolean) => {
    while (!ok()) await new Promise((r) => setTimeout(r, 2));
  };

  const opened = said('opened');
  child.send({ open: gw.url, n });
  await opened;
  await until(() => subscribers() >= n);

  let gc: Record<string, { ms: number; count: number }> | null = null;
  const observer = new PerformanceObserver((list) => {
    if (gc === null) return;
    for (const e of list.getEntries()) {
      const kind = GC_KINDS[(e as unknown as { detail: { kind: number } }).detail.kind] ?? 'other';
      const row = (gc[kind] ??= { ms: 0, count: 0 });
      row.ms += e.duration;
      row.count++;
      events?.push({ at: performance.timeOrigin + e.startTime, ms: e.duration, what: kind });
    }
  });
  /** MIX_TIMELINE: the gateway's GC pauses and event-loop turns more than 5 ms late, in the window (epoch ms). */
  let events: { at: number; ms: number; what: string }[] | null = null;
  let lastTick = performance.now();
  const lag = process.env.MIX_TIMELINE
    ? setInterval(() => {
        const now = performance.now();
        if (events && now - lastTick > 7)
          events.push({ at: performance.timeOrigin + lastTick, ms: now - lastTick - 2, what: 'late turn' });
        lastTick = now;
      }, 2)
    : undefined;
  observer.observe({ entryTypes: ['gc'] });

  const windowStart = said('window-start');
  const windowEnd = said('window');
  child.send({ mix: { rate: Number(cli.rate), warm: Number(cli.warm), window: Number(cli.window) } });
  await windowStart;
  gc = {};
  if (process.env.MIX_TIMELINE) events = [];
  perfControl('enable');
  const allocs = cli['alloc-prof'] ? await allocationSampling() : null;
  const threads0 = threadsUs();
  const cpu0 = process.cpuUsage();
  const main0 = mainThreadUs();
  const w = ((await windowEnd) as { window: { delivered: number; p50: number; p99: number; errors: number } }).window;
  const used = process.cpuUsage(cpu0);
  const mainUs = mainThreadUs() - main0;
  const threads1 = threadsUs();
  perfControl('disable');
  if (allocs) fs.writeFileSync(cli['alloc-prof']!, JSON.stringify(await allocs()));
  const windowGc = gc as Record<string, { ms: number; count: number }>;
  gc = null;
  if (events) fs.writeFileSync(`${process.env.MIX_TIMELINE}.gateway`, JSON.stringify(events));
  events = null;
  clearInterval(lag);
  const mem = process.memoryUsage();
  // Per notification delivered in the window (the same as sent while the gateway keeps up; fewer when it falls behind).
  const notifications = Math.max(1, w.delivered);
  const scheduled = Number(cli.rate) * Number(cli.window);

  // The subscribe alone: wait for the mix's last notifications, complete every subscription, then subscribe again.
  await new Promise((r) => setTimeout(r, 1500));
  const c0 = process.cpuUsage();
  child.send({ complete: true });
  await until(() => subscribers() === 0);
  const completeCpu = process.cpuUsage(c0);
  await new Promise((r) => setTimeout(r, 200));
  const s0 = process.cpuUsage();
  child.send({ subscribe: true });
  await until(() => subscribers() >= n);
  const subscribeCpu = process.cpuUsage(s0);
  if (cli['sub-prof']) {
    // A `.heapprofile` file: where the cycles allocate (allocation-sites.ts reads it); else where their CPU goes.
    const heap = cli['sub-prof'].endsWith('.heapprofile');
    const session = new inspector.Session();
    session.connect();
    const stopAllocs = heap ? await allocationSampling() : null;
    if (!heap) {
      await session.post('Profiler.enable');
      await session.post('Profiler.setSamplingInterval', { interval: 100 });
      await session.post('Profiler.start');
    }
    for (let i = 0; i < Number(cli['sub-cycles']); i++) {
      child.send({ complete: true });
      await until(() => subscribers() === 0);
      child.send({ subscribe: true });
      await until(() => subscribers() >= n);
    }
    const profile = stopAllocs ? await stopAllocs() : (await session.post('Profiler.stop')).profile;
    fs.writeFileSync(cli['sub-prof'], JSON.stringify(profile));
    session.disconnect();
  }

  const result: SideResult = {
    notifications: scheduled,
    cpuUs: (used.user + used.system) / notifications,
    mainUs: mainUs / notifications,
    gc: Object.fromEntries(
      Object.entries(windowGc).map(([k, v]) => [k, { ms: (v.ms * 1000) / notifications, count: v.count }]),
    ),
    threads: Object.fromEntries(
      [...threads1].map(([k, v]) => [k, (v - (threads0.get(k) ?? 0)) / notifications]).filter(([, v]) => v !== 0),
    ),
    rssMb: mem.rss / 2 ** 20,
    heapUsedMb: mem.heapUsed / 2 ** 20,
    p50: w.p50,
    p99: w.p99,
    delivered: w.delivered,
    subscribeUs: (subscribeCpu.user + subscribeCpu.system) / n,
    completeUs: (completeCpu.user + completeCpu.system) / n,
  };
  process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
  const closed = said('closed');
  child.send({ close: true });
  await closed;
  child.kill();
  await gw.close();
  process.exit(0);
}

// ---------------------------------------------------------------------------------------------------------------
// The driver.

interface SideSpec {
  name: string;
  dist: string;
  env: string[];
  flags: string[];
  /** The mix's floor (bench/servers/mix-baseline.ts) instead of a gateway. */
  baseline?: boolean;
}

function runSide(s: SideSpec): Promise<SideResult> {
  const args = [
    '--side',
    '--dist',
    s.dist,
    '--n',
    cli.n!,
    '--rate',
    cli.rate!,
    '--warm',
    cli.warm!,
    '--window',
    cli.window!,
  ];
  for (const e of s.env) args.push('--env', e);
  if (s.baseline) args.push('--baseline');
  return new Promise((resolve, reject) => {
    const p = fork(fileURLToPath(import.meta.url), args, {
      execArgv: [...s.flags, '--import', 'tsx'],
      // The side's process starts with its settings in its environment too, for those the C library or V8 read at
      // start (GLIBC_TUNABLES); the driver's own is kept for the clients (MIX_DRIVER_ENV).
      // NODE_ENV production, as npm start makes it (src/config/node-env.ts) before graphql-js loads.
      env: { ...process.env, NODE_ENV: 'production', ...env(s.env), MIX_DRIVER_ENV: JSON.stringify(process.env) },
      stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    });
    let out = '';
    p.stdout!.on('data', (d) => (out += String(d)));
    p.on('exit', (code) => {
      const line = out.split('\n').find((l) => l.startsWith('RESULT '));
      if (line) resolve(JSON.parse(line.slice(7)) as SideResult);
      else reject(new Error(`side ${s.name} exited ${code}: ${out.slice(-500)}`));
    });
  });
}

const median = (v: number[]) => {
  const s = [...v].sort((x, y) => x - y);
  return s[Math.floor(s.length / 2)]!;
};
const f1 = (x: number) => x.toFixed(1);

async function driver(): Promise<void> {
  const sides: SideSpec[] = [{ name: 'A', dist: cli.dist!, env: cli.env!, flags: [] }];
  if (cli['b-dist']) sides.push({ name: 'B', dist: cli['b-dist'], env: cli.env!, flags: [] });
  else if (cli['b-baseline']) sides.push({ name: 'B', dist: 'the floor', env: [], flags: [], baseline: true });
  else if (cli['b-env']!.length)
    sides.push({ name: 'B', dist: cli.dist!, env: [...cli.env!, ...cli['b-env']!], flags: [] });
  else if (cli.flags) {
    sides.length = 0;
    cli.flags.split(',').forEach((set, i) =>
      sides.push({
        name: String.fromCharCode(65 + i),
        dist: cli.dist!,
        env: cli.env!,
        flags: set.split(' ').filter(Boolean),
      }),
    );
  }
  const results: SideResult[][] = sides.map(() => []);
  const rounds = Number(cli.rounds);
  for (let r = 0; r < rounds; r++) {
    const order = sides.map((_, i) => i);
    if (r % 2 === 1) order.reverse();
    for (const i of order) {
      const res = await runSide(sides[i]!);
      results[i]!.push(res);
      const gcUs = Object.values(res.gc).reduce((s, g) => s + g.ms, 0);
      process.stdout.write(
        `round ${r} ${sides[i]!.name}: cpu ${f1(res.cpuUs)} µs/notification (main ${f1(res.mainUs)}), gc ${f1(gcUs)} µs ` +
          `(${Object.entries(res.gc)
            .map(([k, g]) => `${k} ${f1(g.ms)} µs ×${g.count}`)
            .join(', ')}), subscribe ${f1(res.subscribeUs)} µs, complete ${f1(res.completeUs)} µs, ` +
          `rss ${f1(res.rssMb)} MB, heap ${f1(res.heapUsedMb)} MB, p50 ${f1(res.p50)} p99 ${f1(res.p99)} ms, ` +
          `delivered ${res.delivered}/${res.notifications}, threads ${Object.entries(res.threads)
            .map(([k, v]) => `${k} ${f1(v)}`)
            .join(', ')}, load ${os.loadavg()[0]!.toFixed(2)}\n`,
      );
    }
  }
  const stat = (get: (r: SideResult) => number) =>
    sides.map((_, i) => {
      const v = results[i]!.map(get);
      return `${f1(median(v))} (${f1(Math.min(...v))}–${f1(Math.max(...v))})`;
    });
  const gcOf = (kind?: string) => (r: SideResult) =>
    kind ? (r.gc[kind]?.ms ?? 0) : Object.values(r.gc).reduce((s, g) => s + g.ms, 0);
  const countOf = (kind: string) => (r: SideResult) => r.gc[kind]?.count ?? 0;
  const rows: Array<[string, (r: SideResult) => number]> = [
    ['CPU µs/notification', (r) => r.cpuUs],
    ['main thread µs/notification', (r) => r.mainUs],
    ['GC µs/notification', gcOf()],
    ['  scavenge µs', gcOf('scavenge')],
    ['  mark-compact µs', gcOf('mark-compact')],
    ['  incremental µs', gcOf('incremental')],
    ['scavenges per window', countOf('scavenge')],
    ['mark-compacts per window', countOf('mark-compact')],
    ['subscribe µs', (r) => r.subscribeUs],
    ['complete µs', (r) => r.completeUs],
    ['RSS MB', (r) => r.rssMb],
    ['heap used MB', (r) => r.heapUsedMb],
    ['p50 ms', (r) => r.p50],
    ['p99 ms', (r) => r.p99],
  ];
  let out = `\n${rounds} rounds, n ${cli.n}, ${cli.rate}/s, window ${cli.window} s; medians (range)\n`;
  out += `| | ${sides.map((s) => `${s.name} ${s.dist === cli.dist ? '' : s.dist} ${s.env.join(' ')} ${s.flags.join(' ')}`.trim()).join(' | ')} |${sides.length === 2 ? ' paired A − B: median (range) |' : ''}\n`;
  for (const [label, get] of rows) {
    out += `| ${label} | ${stat(get).join(' | ')} |`;
    if (sides.length === 2) {
      const d = results[0]!.map((r, k) => get(r) - get(results[1]![k]!));
      out += ` ${f1(median(d))} (${f1(Math.min(...d))}–${f1(Math.max(...d))}) |`;
    }
    out += '\n';
  }
  process.stdout.write(out);
}

if (cli.clients) clients();
else if (cli.side) await side();
else await driver();
