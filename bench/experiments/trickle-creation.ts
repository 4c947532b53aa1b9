/**
 * A durable creation at a fixed rate against the same at saturation (docs/decisions/092): scenario 2's
 * `createNetwork` (FULL, the bench's upstream stub, a fresh key each time) on gateways side by side, one per variant
 * (`--variant name:dir=/path/to/dist,K=V`, as compiled-mutation-gateways.ts takes them; without `dir`, this tree's
 * dist/, `npm run build` first). After a warm-up, every round runs one block per rate on each gateway (the order of
 * the gateways turned by one each round): `--rates 400,1300` open loop (requests leave on a fixed schedule, latency
 * counted from the scheduled time) and `closed` (16 in flight). Per block: the CPU per creation of each of the
 * gateway's threads, grouped by name (/proc/<pid>/task/<tid>/schedstat and comm: the main thread, libuv's pool, the
 * checkpoint worker, V8's helpers), and p50/p99. Prints each variant's median per rate and thread group, and per
 * round the difference from the first variant. `node=--flag+--flag` among a variant's settings: node's options.
 * `--variant base:durable=1` (after a gateway) adds the durable baseline; with `node=…` among its settings, under those
 * node options (more than one baseline may run, each with its own data dir: docs/decisions/115).
 *
 * `--pin` places the processes as the bench does (bench/lib/processes.ts: the gateways and the baseline on the last
 * core; the upstream stub and this process on core 0). `--tail DIR`: the tail's anatomy. Each gateway runs with
 * tail-hooks.mjs preloaded (a timeline of its WAL syncs, checkpoints, GC pauses and late event-loop turns, in
 * DIR/<name>.log), every open-loop creation's scheduled and answered times are kept, and at the end, per gateway and
 * rate, the creations at or over the p99 are set against that timeline: how many overlapped each kind of event, against
 * the share of all creations that did, and the overlapped events' median length. The WAL restart's holds are found
 * in the timeline whatever the restart size (the last checkpoint before the WAL's size falls, from the answer before
 * it), with their parts, how many a second, and the p99 of the creations that overlapped none. `--syscalls` (with
 * --tail, as root): every fsync and fdatasync of each gateway during the rounds, under `perf record`, to split a
 * hold's copy from SQLite's two syncs.
 *
 * `--idle S`: the gateways idle S seconds before each round after the first, so that a host that reclaims idle file
 * pages has done so when the round starts (docs/decisions/145). Every block also says what the gateway read from the
 * disk meanwhile (/proc/<pid>/io `read_bytes`: pages the kernel's cache no longer held).
 *
 * `--timeline`: per open-loop block, the slowest creation scheduled in each 500 ms and the server's CPU in each 500 ms
 * (where a periodic stall falls: decision 136). `--stop-at S [--stop-ms MS]`: each open-loop block stops the server
 * (SIGSTOP) S seconds in for MS ms (default 1,000), to watch how fast its backlog drains.
 *
 *   npx tsx bench/experiments/trickle-creation.ts [--rounds 8] [--seconds 4] [--rates 400,1300,closed] [--pin]
 *     [--tail /tmp/tail [--syscalls]] [--timeline] [--stop-at S [--stop-ms MS]] [--idle S]
 *     [--variant main:dir=/work/main/dist --variant this: …]
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';

import { startNodeArgs } from '../lib/build.js';
import { closedLoop, openLoop } from '../lib/cpu.js';
import { API_KEY, gatewayEnv } from '../lib/env.js';
import { durableBaselineArgs, seedDurableBaseline } from '../lib/mutation-references.js';
import { freePort, ioField, pin, placement, spawnNode } from '../lib/processes.js';
import { parseVariants } from '../lib/variants.js';
import { createNetworkBody } from '../scenarios/mutation.js';

const { values: cli } = parseArgs({
  options: {
    rounds: { type: 'string', default: '8' },
    seconds: { type: 'string', default: '4' },
    rates: { type: 'string', default: '400,1300,closed' },
    inflight: { type: 'string', default: '16' },
    variant: { type: 'string', multiple: true },
    trace: { type: 'string' },
    pin: { type: 'boolean', default: false },
    tail: { type: 'string' },
    syscalls: { type: 'boolean', default: false },
    out: { type: 'string', default: '/tmp/trickle-creation' },
    timeline: { type: 'boolean', default: false },
    'stop-at': { type: 'string' },
    'stop-ms': { type: 'string', default: '1000' },
    idle: { type: 'string', default: '0' },
  },
});
const rounds = Number(cli.rounds);
const seconds = Number(cli.seconds);
const inflight = Number(cli.inflight);
const rates = cli.rates.split(',').map((r) => (r === 'closed' ? 'closed' : Number(r)));
const place = cli.pin ? placement() : null;
if (place?.driver) pin(process.pid, place.driver);
if (cli.tail) fs.mkdirSync(cli.tail, { recursive: true });
const TAIL_HOOKS = path.join(path.dirname(fileURLToPath(import.meta.url)), 'tail-hooks.mjs');
/** With --tail: every open-loop creation's scheduled and answered time (ms since the epoch), by gateway and rate. */
const answered = new Map<string, Array<[number, number, number]>>();

/** CPU seconds and times scheduled in (schedstat's third field: a wake-up each) of every thread of `pid`, by tid. */
function threads(pid: number): Map<string, { name: string; s: number; runs: number }> {
  const out = new Map<string, { name: string; s: number; runs: number }>();
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      const name = fs.readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
      const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ');
      out.set(tid, { name: tid === String(pid) ? 'main' : name, s: Number(stat[0]) / 1e9, runs: Number(stat[2]) });
    } catch {
      // ended meanwhile
    }
  }
  return out;
}

/**
 * Node names none of its threads, so they are told apart once, after the warm-up: the main thread (tid = pid); a
 * thread that waits in epoll is a worker thread's event loop (the checkpoint worker); of those that wait on a futex,
 * the four made first are V8's platform workers (GC helpers, concurrent compilers), made at start-up, and the later
 * ones libuv's pool (made on its first use: the WAL's fdatasync).
 */
const groups = new Map<string, string>();
function classify(pid: number): void {
  const futexWaiters: number[] = [];
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    if (tid === String(pid)) groups.set(tid, 'main');
    else {
      const wchan = fs.readFileSync(`/proc/${pid}/task/${tid}/wchan`, 'utf8');
      if (wchan.includes('epoll')) groups.set(tid, 'worker');
      else futexWaiters.push(Number(tid));
    }
  }
  futexWaiters.sort((a, b) => a - b);
  futexWaiters.forEach((tid, i) => groups.set(String(tid), i < 4 ? 'V8' : 'libuv'));
}

type Threads = ReturnType<typeof threads>;
function cpuByGroup(before: Threads, after: Threads) {
  const out: Record<string, number> = {};
  const runs: Record<string, number> = {};
  for (const [tid, a] of after) {
    const g = groups.get(tid) ?? 'other';
    out[g] = (out[g] ?? 0) + a.s - (before.get(tid)?.s ?? 0);
    runs[g] = (runs[g] ?? 0) + a.runs - (before.get(tid)?.runs ?? 0);
  }
  return { out, runs };
}

const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
};

/** The CPU of every thread of `pid` in each `ms` from now, as a share of one core; call the result to stop. */
function cpuEvery(pid: number, ms: number): () => number[] {
  const shares: number[] = [];
  let last = threads(pid);
  const timer = setInterval(() => {
    const now = threads(pid);
    let s = 0;
    for (const [tid, t] of now) s += t.s - (last.get(tid)?.s ?? 0);
    shares.push(s / (ms / 1000));
    last = now;
  }, ms);
  return () => (clearInterval(timer), shares);
}

/** `--stop-at`: the server stopped (SIGSTOP) `atMs` into the block for `forMs`, to watch its backlog drain. */
function freeze(pid: number, atMs: number, forMs: number): void {
  setTimeout(() => {
    process.kill(pid, 'SIGSTOP');
    setTimeout(() => process.kill(pid, 'SIGCONT'), forMs);
  }, atMs);
}

/** `--timeline`: the slowest creation scheduled in each 500 ms of a block, and the server's CPU over each 500 ms. */
function timeline(block: Array<[number, number, number]>, cpu: number[]): string {
  const slowest: number[] = [];
  const t0 = block.reduce((m, t) => Math.min(m, t[0]), Infinity);
  for (const [due, end] of block) {
    const b = Math.floor((due - t0) / 500);
    slowest[b] = Math.max(slowest[b] ?? 0, end - due);
  }
  const ms = Array.from(slowest, (x) => Math.round(x ?? 0)).join(' ');
  return `slowest ms per 500 ms ${ms}; CPU ${cpu.map((c) => `${Math.round(c * 100)}%`).join(' ')}`;
}

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'trickle-creation-'));
const stub = await spawnNode('upstream', {
  script: 'bench/servers/upstream.ts',
  cpus: place?.driver ?? null,
  readiness: { line: true },
});

/**
 * The durable baseline (bench/servers/durable-baseline.ts, FULL) as one more variant (`--variant base:durable=1`): the
 * same durable work by hand, its WAL sync on the main thread, under `nodeArgs`, in a data dir of its own (`name`). Its
 * project is seeded with the id of `body`'s.
 */
async function durableBaseline(name: string, body: string, nodeArgs: string[]) {
  const dataDir = path.join(root, `durable-baseline-${name}`);
  fs.mkdirSync(dataDir);
  const child = await spawnNode(`durable baseline ${name}`, {
    script: 'bench/servers/durable-baseline.ts',
    nodeArgs,
    args: durableBaselineArgs(String(stub.ready.url), dataDir),
    cpus: place?.server ?? null,
    readiness: { line: true },
  });
  const url = String(child.ready.url);
  const projectId = (JSON.parse(body) as { variables: { input: { projectId: string } } }).variables.input.projectId;
  await seedDurableBaseline(url, projectId);
  return { child, origin: url, path: '/mutation' };
}

async function gateway(
  name: string,
  env: Record<string, string>,
  dist: string,
  durable = false,
  nodeArgs: string[] = [],
) {
  if (durable) return measured(name, await durableBaseline(name, await anyBody(), nodeArgs));
  const main = path.join(dist, 'src/main.js');
  if (!fs.existsSync(main)) throw new Error(`no ${main}: run \`npm run build\``);
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const dataDir = path.join(root, name);
  fs.mkdirSync(dataDir);
  const child = await spawnNode(`gateway ${name}`, {
    script: main,
    cwd: path.dirname(dist),
    cpus: place?.server ?? null,
    // As its checkout's npm start runs it (a variant's `node=--memory-reducer` undoes that checkout's default), when
    // the build sits in a checkout.
    nodeArgs: [
      ...(fs.existsSync(path.join(path.dirname(dist), 'package.json')) ? startNodeArgs(path.dirname(dist)) : []),
      ...nodeArgs,
      ...(cli.tail ? ['--import', TAIL_HOOKS] : []),
    ],
    env: {
      ...gatewayEnv({ port, dataDir, stubUrl: String(stub.ready.url) }),
      SQLITE_SYNCHRONOUS: 'FULL',
      ...env,
      ...(cli.tail ? { TAIL_LOG: path.join(cli.tail, `${name}.log`) } : {}),
    },
    readiness: { url: `${origin}/readyz` },
    timeoutMs: 60_000,
  });
  const body = await createNetworkBody(origin, 'trickle');
  bodyOfFirst ??= body;
  return measured(name, { child, origin, path: '/graphql' }, body);
}

let bodyOfFirst: string | undefined;
async function anyBody(): Promise<string> {
  if (!bodyOfFirst) throw new Error('give the durable baseline after a gateway variant (its project comes from one)');
  return bodyOfFirst;
}

async function measured(
  name: string,
  target: { child: Awaited<ReturnType<typeof spawnNode>>; origin: string; path: string },
  body = bodyOfFirst!,
) {
  const { child, origin } = target;
  const pool = new Pool(origin, { connections: 256, pipelining: 1, keepAliveTimeout: 30_000 });
  const one = async (): Promise<void> => {
    const res = await pool.request({
      method: 'POST',
      path: target.path,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
      body: body.replace('{{uuid}}', randomUUID()),
    });
    const text = await res.body.text();
    if (res.statusCode !== 200 || text.includes('"errors"')) throw new Error(`${res.statusCode} ${text}`);
  };
  const pid = child.child.pid!;
  const block = async (rate: number | 'closed', kept = false) => {
    const n = rate === 'closed' ? Math.max(2000, Math.round(seconds * 2500)) : Math.round(rate * seconds);
    const before = threads(pid);
    const read0 = ioField(pid, 'read_bytes');
    let latencies: number[] = [];
    if (rate === 'closed') await closedLoop(n, inflight, one);
    else {
      let times: Array<[number, number, number]> | undefined;
      if (kept && cli.tail) {
        const key = `${name} ${rate}`;
        times = answered.get(key) ?? [];
        answered.set(key, times);
      }
      const from = times?.length ?? 0;
      const answers = (times ??= []);
      const busy = cli.timeline ? cpuEvery(pid, 500) : null;
      if (cli['stop-at'] !== undefined) freeze(pid, Number(cli['stop-at']) * 1000, Number(cli['stop-ms']));
      latencies = await openLoop(rate, n, one, answers);
      if (busy) console.log(`  ${name} ${rate}/s: ${timeline(answers.slice(from), busy())}`);
    }
    const { out: cpu, runs } = cpuByGroup(before, threads(pid));
    const perOp: Record<string, number> = {};
    const wakeups: Record<string, number> = {};
    for (const [g, w] of Object.entries(runs)) wakeups[g] = w / n;
    let total = 0;
    for (const [g, s] of Object.entries(cpu)) {
      perOp[g] = (s / n) * 1e6;
      total += perOp[g]!;
    }
    perOp.total = total;
    const readKiB = (ioField(pid, 'read_bytes') - read0) / 1024;
    return { n, perOp, wakeups, readKiB, p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
  };
  return { pid, block, stop: async () => (await pool.close(), await child.stop()) };
}

const variants = parseVariants(cli.variant, ['this:']).map(({ name, env, dist }) => {
  const { durable, node, ...rest } = env;
  return {
    name,
    env: rest,
    dist,
    durable: durable !== undefined,
    nodeArgs: node ? node.split('+') : [],
  };
});

type Figures = Awaited<ReturnType<Awaited<ReturnType<typeof gateway>>['block']>>;
const gws: Array<{ name: string; gw: Awaited<ReturnType<typeof gateway>>; figures: Map<string, Figures[]> }> = [];
for (const v of variants)
  gws.push({ name: v.name, gw: await gateway(v.name, v.env, v.dist, v.durable, v.nodeArgs), figures: new Map() });
console.log(
  `gateways: ${gws.map((g) => `${g.name} (pid ${g.gw.pid})`).join(', ')}; load ${os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
// Warm-up: V8's optimizing compiler and SQLite's page cache settle over a few thousand creations.
for (const g of gws) for (const rate of rates) await g.gw.block(rate);
await sleep(1000);
for (const g of gws) classify(g.gw.pid);
const perfs = cli.tail && cli.syscalls ? gws.map((g) => recordSyncs(g.name, g.gw.pid)) : [];
if (cli.trace) {
  // One block per rate and gateway under `perf record -g` or `strace -c -f`, written to --out, instead of the rounds.
  fs.mkdirSync(cli.out, { recursive: true });
  for (const g of gws)
    for (const rate of rates) {
      const file = path.join(cli.out, `${g.name}-${rate}.${cli.trace}.${cli.trace === 'perf' ? 'data' : 'txt'}`);
      // perf: CPU samples with call graphs; counts: every system call and context switch of each thread (perf stat
      // over tracepoints, cheap); strace: system calls counted by strace (slow: it changes what it counts).
      const pid = String(g.gw.pid);
      const [tool, args] =
        cli.trace === 'perf'
          ? ['perf', ['record', '-g', '-F', '1999', '-o', file, '-p', pid]]
          : cli.trace === 'counts'
            ? [
                'perf',
                [
                  'stat',
                  '--per-thread',
                  '-e',
                  [
                    'raw_syscalls:sys_enter',
                    'sched:sched_switch',
                    ...[
                      'epoll_pwait',
                      'futex',
                      'pwrite64',
                      'pread64',
                      'fdatasync',
                      'write',
                      'writev',
                      'read',
                      'fcntl',
                    ].map((c) => `syscalls:sys_enter_${c}`),
                  ].join(','),
                  '-o',
                  file,
                  '-p',
                  pid,
                ],
              ]
            : ['strace', ['-c', '-f', '-o', file, '-p', pid]];
      const tracer = spawn(tool, args, { stdio: 'ignore' });
      await sleep(1500);
      const f = await g.gw.block(rate);
      tracer.kill('SIGINT');
      await once(tracer, 'exit');
      console.log(
        `${g.name} ${rate}: ${f.n} creations, ${f.perOp.total!.toFixed(0)} µs per creation under ${cli.trace}; ${file}`,
      );
    }
  for (const g of gws) await g.gw.stop();
  await stub.stop();
  process.exit(0);
}
for (let r = 0; r < rounds; r++) {
  if (r > 0 && Number(cli.idle) > 0) {
    console.log(`idle ${cli.idle} s`);
    await sleep(Number(cli.idle) * 1000);
  }
  for (const rate of rates) {
    const order = gws.map((_, i) => gws[(i + r) % gws.length]!);
    for (const g of order) {
      const f = await g.gw.block(rate, true);
      const key = String(rate);
      g.figures.set(key, [...(g.figures.get(key) ?? []), f]);
    }
    console.log(
      `round ${r} ${rate}: ` +
        gws
          .map((g) => {
            const f = g.figures.get(String(rate))!.at(-1)!;
            const parts = Object.entries(f.perOp)
              .filter(([k]) => k !== 'total')
              .sort((a, b) => b[1] - a[1])
              .map(([k, v]) => `${k} ${v.toFixed(0)}`)
              .join(' ');
            const w = Object.entries(f.wakeups)
              .map(([k, v]) => `${k} ${v.toFixed(2)}`)
              .join(' ');
            return (
              `${g.name} ${f.perOp.total!.toFixed(0)} µs (${parts}; wake-ups per creation ${w}) ` +
              `p50 ${f.p50.toFixed(1)} p99 ${f.p99.toFixed(1)} ms, read from the disk ${f.readKiB.toFixed(0)} KiB`
            );
          })
          .join(' | ') +
        ` | load ${os.loadavg()[0]!.toFixed(2)}`,
    );
  }
}
const median = (xs: number[]) => [...xs].sort((p, q) => p - q)[Math.floor(xs.length / 2)]!;
const first = gws[0]!;
for (const rate of rates) {
  const key = String(rate);
  for (const g of gws) {
    const fs_ = g.figures.get(key)!;
    const groups = new Set(fs_.flatMap((f) => Object.keys(f.perOp)));
    const parts = [...groups].map((k) => `${k} ${median(fs_.map((f) => f.perOp[k] ?? 0)).toFixed(1)}`).join(', ');
    const wakes = [...new Set(fs_.flatMap((f) => Object.keys(f.wakeups)))]
      .map((k) => `${k} ${median(fs_.map((f) => f.wakeups[k] ?? 0)).toFixed(2)}`)
      .join(', ');
    const d = fs_.map((f, i) => f.perOp.total! - first.figures.get(key)![i]!.perOp.total!);
    console.log(
      `${rate} ${g.name}: median µs per creation ${parts}; wake-ups ${wakes}; p50 ${median(fs_.map((f) => f.p50)).toFixed(2)} p99 ${median(fs_.map((f) => f.p99)).toFixed(2)} ms (rounds ${Math.min(...fs_.map((f) => f.p99)).toFixed(1)}–${Math.max(...fs_.map((f) => f.p99)).toFixed(1)}); − ${first.name} by round: median ${median(d).toFixed(1)}, range ${Math.min(...d).toFixed(1)}–${Math.max(...d).toFixed(1)}`,
    );
  }
}
for (const p of perfs) await p.stop();
for (const g of gws) await g.gw.stop();
await stub.stop();
if (cli.tail) for (const g of gws) tailAnatomy(g.name, g.gw.pid, await restartFrames(g.name));
fs.rmSync(root, { recursive: true, force: true });
process.exit(0);

/**
 * The WAL's restart size of variant `name` as its build reads its settings (SQLITE_WAL_RESTART_FRAMES, or the build's
 * default); 16,384 for a build without that setting.
 */
async function restartFrames(name: string): Promise<number> {
  const v = variants.find((x) => x.name === name)!;
  const config = (await import(path.join(v.dist, 'src/config/index.js'))) as {
    loadConfig(env: Record<string, string>): { sqliteWalRestartFrames?: number };
  };
  return config.loadConfig(v.env).sqliteWalRestartFrames ?? 16_384;
}

/**
 * --syscalls: every fsync and fdatasync of the gateway `pid` under `perf record` (CLOCK_MONOTONIC, set on the
 * timeline by the hooks' "clock" lines), and which file each descriptor is; stop() writes DIR/<name>.syscalls.txt.
 */
function recordSyncs(name: string, pid: number) {
  const dir = cli.tail!;
  const fds: Record<string, string> = {};
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`))
    try {
      fds[fd] = fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      // closed meanwhile
    }
  fs.writeFileSync(path.join(dir, `${name}.fds.json`), JSON.stringify(fds));
  const data = path.join(dir, `${name}.perf.data`);
  const events = ['fsync', 'fdatasync'].flatMap((c) => [`syscalls:sys_enter_${c}`, `syscalls:sys_exit_${c}`]);
  const perf = spawn('perf', ['record', '-q', '-k', 'mono', '-e', events.join(','), '-p', String(pid), '-o', data], {
    stdio: 'ignore',
  });
  return {
    stop: async () => {
      perf.kill('SIGINT');
      await once(perf, 'exit');
      const text = spawn('perf', ['script', '-i', data, '-F', 'tid,time,event,trace'], {
        stdio: ['ignore', fs.openSync(path.join(dir, `${name}.syscalls.txt`), 'w'), 'ignore'],
      });
      await once(text, 'exit');
    },
  };
}

/**
 * --tail: per rate, the creations at or over the p99 of `name`'s open-loop blocks against its timeline (tail-hooks.mjs):
 * for each kind of event, the share of those creations that overlapped one (against the share of all creations), and
 * the median length of the longest one each overlapped.
 *
 * A "hold" is the span during which new write transactions waited for the WAL's restart (src/store/sqlite-dialect.ts,
 * WalCheckpointer): from the answer of the checkpoint that decided it (the WAL at or past `restartFrames`, the
 * variant's SQLITE_WAL_RESTART_FRAMES or 16,384) to the answer of the next one, the last before the WAL's size (each
 * answer's frames) fell. A restart after an idle moment (between blocks: a checkpoint copied everything and no write
 * came meanwhile) held nothing and is not one. Its parts: the
 * wait for the open group's commit (and that group's WAL sync), the checkpoint request's wait for the worker, the
 * worker's wal_checkpoint (the copy; with --syscalls, SQLite's syncs of the WAL and of the database file in it apart),
 * the answer's wait for the main thread, and after it the first COMMIT on the main thread (it writes and syncs the new
 * WAL header).
 */
function tailAnatomy(name: string, pid: number, restartFrames: number): void {
  const file = path.join(cli.tail!, `${name}.log`);
  if (!fs.existsSync(file)) return;
  const events = new Map<string, Array<[number, number]>>();
  const checkpoints: Array<{ start: number; end: number; frames: number | null; asked: number }> = [];
  const copies: Array<[number, number]> = [];
  const commits: Array<[number, number]> = [];
  const clocks: number[] = [];
  // The old generation's gains between samples (its falls are collections): promoted bytes over the log's span.
  let promoted = 0;
  let lastOld: number | null = null;
  let span: [number, number] | null = null;
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (!line) continue;
    const [kind, start, end, extra, more] = JSON.parse(line) as [string, number, number, unknown, unknown];
    if (kind === 'heap') {
      if (lastOld !== null && end > lastOld) promoted += end - lastOld;
      lastOld = end;
      span = span ? [span[0], start] : [start, start];
      continue;
    }
    if (kind === 'clock') {
      clocks.push(end - start);
      continue;
    }
    if (kind === 'checkpoint')
      checkpoints.push({ start, end, frames: typeof extra === 'number' ? extra : null, asked: Number(more ?? start) });
    if (kind === 'copy') copies.push([start, end]);
    if (kind === 'commit') commits.push([start, end]);
    const k = kind === 'gc' ? `gc ${String(extra)}` : kind === 'sync' && end - start > 5 ? 'sync > 5 ms' : kind;
    if (!events.has(k)) events.set(k, []);
    events.get(k)!.push([start, end]);
  }
  checkpoints.sort((a, b) => a.end - b.end);
  copies.sort((a, b) => a[0] - b[0]);
  commits.sort((a, b) => a[0] - b[0]);
  const holds: Array<{ start: number; asked: number; end: number; copy?: [number, number]; frames: number }> = [];
  for (let i = 1; i + 1 < checkpoints.length; i++) {
    const [before, hold, after] = [checkpoints[i - 1]!, checkpoints[i]!, checkpoints[i + 1]!];
    if (hold.frames === null || after.frames === null || after.frames >= hold.frames) continue;
    if (before.frames === null || before.frames < restartFrames) continue;
    const copy = copies.find(([s, e]) => s >= hold.asked - 1 && e <= hold.end + 1);
    holds.push({ start: before.end, asked: hold.asked, end: hold.end, copy, frames: hold.frames });
  }
  events.set(
    'hold',
    holds.map((h) => [h.start, h.end]),
  );
  if (span && span[1] > span[0])
    console.log(
      `tail ${name}: the old generation gained ${(((promoted / (span[1] - span[0])) * 1e3) / 2 ** 20).toFixed(2)} MiB/s ` +
        `over ${((span[1] - span[0]) / 1e3).toFixed(0)} s (warm-up and every rate), ` +
        `${events.get('gc mark-compact')?.length ?? 0} mark-compacts`,
    );
  holdParts(name, pid, holds, copies, commits, clocks);
  /** The longest event of `list` overlapping [from, to], or 0. */
  const longest = (list: Array<[number, number]>, from: number, to: number): number => {
    let lo = 0;
    let hi = list.length;
    // The first event that ends after `from`: events are short, so look back a little from the first starting at `from`.
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (list[mid]![0] < from) lo = mid + 1;
      else hi = mid;
    }
    let best = 0;
    for (let i = Math.max(0, lo - 64); i < list.length && list[i]![0] <= to; i++)
      if (list[i]![1] >= from) best = Math.max(best, list[i]![1] - list[i]![0]);
    return best;
  };
  for (const rate of rates) {
    const all = answered.get(`${name} ${rate}`);
    if (!all?.length) continue;
    const p99 = percentile(
      all.map(([due, end]) => end - due),
      99,
    );
    const slow = all.filter(([due, end]) => end - due >= p99);
    const early = (xs: typeof all, s: number) => ((xs.filter((x) => x[2] < s).length / xs.length) * 100).toFixed(0);
    const holdList = events.get('hold')!;
    const clear = all.filter(([due, end]) => longest(holdList, due, end) === 0).map(([due, end]) => end - due);
    // The holds inside this rate's measured blocks (a block: from its first creation's schedule to its last answer).
    const blocks = new Map<number, [number, number]>();
    for (const [due, end, at] of all) {
      const first = due - at * 1e3;
      const b = blocks.get(first) ?? [due, end];
      blocks.set(first, [Math.min(b[0], due), Math.max(b[1], end)]);
    }
    const seconds = [...blocks.values()].reduce((t, [s, e]) => t + (e - s) / 1e3, 0);
    const inBlocks = holdList.filter(([s]) => [...blocks.values()].some(([from, to]) => s >= from && s <= to)).length;
    const rows = [...events.keys()].sort().map((kind) => {
      const list = events.get(kind)!;
      const hit = (set: Array<[number, number, number]>) =>
        set.map(([due, end]) => longest(list, due, end)).filter((x) => x > 0);
      const inSlow = hit(slow);
      const inAll = hit(all);
      return `${kind}: ${((inSlow.length / slow.length) * 100).toFixed(0)} % of the slow (${((inAll.length / all.length) * 100).toFixed(1)} % of all), median ${inSlow.length ? median(inSlow).toFixed(1) : '–'} ms, ${list.length} in all`;
    });
    console.log(
      `tail ${name} ${rate}/s: ${all.length} creations, p99 ${p99.toFixed(1)} ms, ${slow.length} at or over it, of which ` +
        `${early(slow, 0.25)} % sent in a block's first 0.25 s and ${early(slow, 1)} % in its first second (of all: ` +
        `${early(all, 0.25)} and ${early(all, 1)} %); ${inBlocks} holds in ${seconds.toFixed(0)} s of these blocks ` +
        `(${(inBlocks / seconds).toFixed(2)}/s); the p99 of the ${clear.length} creations that overlapped no hold ` +
        `${percentile(clear, 99).toFixed(1)} ms (p50 ${percentile(clear, 50).toFixed(1)}); the events each overlapped:\n  ${rows.join('\n  ')}`,
    );
  }
}

/** The holds' parts (tailAnatomy), each as median, p90 and max over the holds of the whole log. */
function holdParts(
  name: string,
  pid: number,
  holds: Array<{ start: number; asked: number; end: number; copy?: [number, number]; frames: number }>,
  copies: Array<[number, number]>,
  commits: Array<[number, number]>,
  clocks: number[],
): void {
  if (!holds.length) return console.log(`holds ${name}: none`);
  // perf's syncs on the timeline: the worker thread's, by file (the WAL or the database).
  const syncs: Array<{ tid: number; start: number; end: number; file: string }> = [];
  const text = path.join(cli.tail!, `${name}.syscalls.txt`);
  if (fs.existsSync(text) && clocks.length) {
    const offset = median(clocks);
    const fds = JSON.parse(fs.readFileSync(path.join(cli.tail!, `${name}.fds.json`), 'utf8')) as Record<string, string>;
    const open = new Map<number, { start: number; fd: number }>();
    for (const line of fs.readFileSync(text, 'utf8').split('\n')) {
      const m = /^\s*(\d+)\s+([\d.]+):\s+syscalls:sys_(enter|exit)_f(?:data)?sync:\s*(?:fd: (0x[0-9a-f]+))?/.exec(line);
      if (!m) continue;
      const tid = Number(m[1]);
      const t = Number(m[2]) * 1e3 + offset;
      if (m[3] === 'enter') open.set(tid, { start: t, fd: Number(m[4]) });
      else {
        const o = open.get(tid);
        open.delete(tid);
        if (!o) continue;
        const target = fds[String(o.fd)] ?? '?';
        syncs.push({
          tid,
          start: o.start,
          end: t,
          file: target.endsWith('-wal') ? 'wal' : target.endsWith('.sqlite') || target.endsWith('.db') ? 'db' : target,
        });
      }
    }
  }
  // SQLite's own syncs: the worker's in a checkpoint, the main thread's at a restart (libuv's pool syncs the WAL after
  // each group commit: not these).
  const sqlite = (tid: number) => groups.get(String(tid)) !== 'libuv';
  const q = (xs: number[]) =>
    xs.length ? `${median(xs).toFixed(1)} / ${percentile(xs, 90).toFixed(1)} / ${Math.max(...xs).toFixed(1)}` : '–';
  const parts: Record<string, number[]> = {
    hold: [],
    group: [],
    queue: [],
    copy: [],
    'copy − syncs': [],
    'wal sync': [],
    'db sync': [],
    answer: [],
    'first commit': [],
    'header sync': [],
  };
  for (const h of holds) {
    parts.hold!.push(h.end - h.start);
    parts.group!.push(h.asked - h.start);
    if (h.copy) {
      parts.queue!.push(h.copy[0] - h.asked);
      parts.copy!.push(h.copy[1] - h.copy[0]);
      parts.answer!.push(h.end - h.copy[1]);
      if (syncs.length) {
        const inside = syncs.filter(
          (s) => s.start >= h.copy![0] - 0.2 && s.end <= h.copy![1] + 0.2 && s.tid !== pid && sqlite(s.tid),
        );
        const wal = inside.filter((s) => s.file === 'wal').reduce((t, s) => t + s.end - s.start, 0);
        const db = inside.filter((s) => s.file === 'db').reduce((t, s) => t + s.end - s.start, 0);
        parts['wal sync']!.push(wal);
        parts['db sync']!.push(db);
        parts['copy − syncs']!.push(h.copy[1] - h.copy[0] - wal - db);
      }
    }
    // The first COMMIT over 0.5 ms within 50 ms of the hold's end (the restart's header sync, if it took that long).
    const first = commits.find(([s]) => s >= h.end && s <= h.end + 50);
    parts['first commit']!.push(first ? first[1] - first[0] : 0);
    // The restart's header sync: SQLite's sync of the WAL in that COMMIT, on the main thread (--syscalls).
    if (syncs.length) {
      const header = syncs.find((s) => s.tid === pid && s.file === 'wal' && s.start >= h.end && s.start <= h.end + 50);
      parts['header sync']!.push(header ? header.end - header.start : 0);
    }
  }
  const others = copies.filter(([s]) => !holds.some((h) => h.copy?.[0] === s)).map(([s, e]) => e - s);
  console.log(
    `holds ${name}: ${holds.length} (WAL at ${median(holds.map((h) => h.frames))} frames), ms median / p90 / max ` +
      `(group: the wait for the open group's commit; queue: the request's wait for the worker; copy: its wal_checkpoint; ` +
      `answer: the answer's wait for the main thread; first commit, header sync: after the hold, on the main thread):\n  ` +
      Object.entries(parts)
        .filter(([, xs]) => xs.length)
        .map(([k, xs]) => `${k} ${q(xs)}`)
        .join('\n  ') +
      `\n  (the other checkpoints' wal_checkpoint: ${q(others)}, ${others.length})`,
  );
}
