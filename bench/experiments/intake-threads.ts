/**
 * Where the CPU of one mobile-ID notification at a time goes, thread by thread (docs/decisions/080).
 *
 * Starts the gateway (`node --import tsx src/main.ts`, the bench's environment, SQLITE_SYNCHRONOUS=FULL, its data
 * directory under `--dir`, by default the system's temporary directory on the local disk as in `bench:breakdown`)
 * with `--inspect` on loopback, and the hand-written webhook of bench/servers/baseline.ts beside it, both on the
 * server core when `taskset` is there. After a warm-up, rounds interleaved: the gateway without the profiler, the
 * gateway with V8's sampling profiler running at 100 µs as `bench:breakdown` runs it, the baseline; each round sends
 * `--n` notifications one at a time (scenario 4's success notifications, fresh auth_req_ids) and reads every
 * thread's CPU from /proc/<pid>/task/<tid>/schedstat before and after. A thread is named by what it did in a last,
 * labelling round run under `strace -f` (which system calls on which files; the counts per notification are printed
 * too), and the rest by elimination (main thread = the pid; threads with no file calls: V8's platform workers, the
 * inspector, the profiler's sampler).
 *
 *   npx tsx bench/experiments/intake-threads.ts [--n 2000] [--rounds 4] [--dir /tmp] [--env NAME=VALUE,...] [--no-strace]
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';

import { envPairs, gatewayEnv, NOTIFICATION_TOKEN } from '../lib/env.js';
import { Inspector } from '../lib/inspector.js';
import { freePort, placement, spawnNode, waitUntilIdle, type Proc } from '../lib/processes.js';
import { notificationBody, WEBHOOK_PATH } from '../scenarios/webhook.js';

const { values: cli } = parseArgs({
  options: {
    n: { type: 'string', default: '2000' },
    rounds: { type: 'string', default: '4' },
    dir: { type: 'string', default: os.tmpdir() },
    env: { type: 'string' },
    'no-strace': { type: 'boolean', default: false },
    'no-baseline': { type: 'boolean', default: false },
    perf: { type: 'string' },
    warm: { type: 'string', default: '2000' },
    block: { type: 'boolean', default: false },
  },
});
const N = Number(cli.n);
const ROUNDS = Number(cli.rounds);
const EXTRA_ENV = envPairs(cli.env);
const template = notificationBody();
const headers = {
  'content-type': 'application/json',
  authorization: `Bearer ${NOTIFICATION_TOKEN}`,
  'x-mobileid-request-id': 'bench',
};

/** CPU nanoseconds of every thread of `pid`, by tid. */
function threads(pid: number): Map<number, number> {
  const out = new Map<number, number>();
  for (const task of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      out.set(Number(task), Number(fs.readFileSync(`/proc/${pid}/task/${task}/schedstat`, 'utf8').split(' ')[0]));
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return out;
}

interface Side {
  name: string;
  proc: Proc;
  pool: Pool;
  path: string;
  inspector?: Inspector;
  profile?: boolean;
}

async function send(side: Side, count: number): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < count; i++) {
    const res = await side.pool.request({
      method: 'POST',
      path: side.path,
      headers,
      body: template.replace('{{uuid}}', randomUUID()),
    });
    const text = await res.body.text();
    if (res.statusCode !== 204) throw new Error(`${side.name}: ${res.statusCode} ${text}`);
  }
  return (performance.now() - t0) / count;
}

/** One round: µs per notification of each thread, and the wall time per notification. */
async function round(side: Side): Promise<{ perTid: Map<number, number>; wallUs: number }> {
  await waitUntilIdle(side.proc.pid, 3_000);
  if (side.profile) {
    await side.inspector!.send('Profiler.enable');
    await side.inspector!.send('Profiler.setSamplingInterval', { interval: 100 });
    await side.inspector!.send('Profiler.start');
  }
  const before = threads(side.proc.pid);
  const wallMs = await send(side, N);
  const after = threads(side.proc.pid);
  if (side.profile) await side.inspector!.send('Profiler.stop');
  const perTid = new Map<number, number>();
  for (const [tid, ns] of after) perTid.set(tid, (ns - (before.get(tid) ?? 0)) / 1e3 / N);
  return { perTid, wallUs: wallMs * 1e3 };
}

/** Runs `count` notifications under `strace -f` and returns, per tid, the calls made per notification by name and file. */
async function label(side: Side, count: number): Promise<Map<number, Map<string, number>>> {
  const out = path.join(os.tmpdir(), `intake-threads-${side.proc.pid}.strace`);
  const strace = spawn(
    'strace',
    [
      '-f',
      '-qq',
      '-y',
      '-e',
      'trace=fdatasync,fsync,pwrite64,pread64,write,writev,read,fcntl,futex,openat',
      '-o',
      out,
      '-p',
      String(side.proc.pid),
    ],
    { stdio: 'ignore' },
  );
  await new Promise((r) => setTimeout(r, 1_000));
  await send(side, count);
  await new Promise((r) => setTimeout(r, 300));
  strace.kill('SIGINT');
  await new Promise((r) => strace.once('exit', r));
  const perTid = new Map<number, Map<string, number>>();
  for (const line of fs.readFileSync(out, 'utf8').split('\n')) {
    const m = /^(\d+)\s+(\w+)\((?:\d+<([^>]*)>)?/.exec(line);
    if (!m) continue;
    const tid = Number(m[1]);
    let file = m[3] ?? '';
    if (file.startsWith('TCP') || file.startsWith('socket')) file = 'socket';
    else if (file.startsWith('anon_inode') || file.startsWith('pipe')) file = file.replace(/:\[\d+\]/, '');
    else file = path.basename(file);
    const key = `${m[2]}${file ? ` ${file}` : ''}`;
    const calls = perTid.get(tid) ?? new Map<string, number>();
    calls.set(key, (calls.get(key) ?? 0) + 1 / count);
    perTid.set(tid, calls);
  }
  fs.rmSync(out, { force: true });
  return perTid;
}

const place = placement();
const root = fs.mkdtempSync(path.join(cli.dir!, 'intake-threads-'));
const procs: Proc[] = [];
try {
  const gwPort = await freePort();
  const inspectPort = await freePort();
  fs.mkdirSync(path.join(root, 'gateway'));
  const gateway = await spawnNode('gateway', {
    script: 'src/main.ts',
    env: {
      ...gatewayEnv({ port: gwPort, dataDir: path.join(root, 'gateway'), stubUrl: 'http://127.0.0.1:9' }),
      SQLITE_SYNCHRONOUS: 'FULL',
      ...EXTRA_ENV,
    },
    cpus: place.server,
    nodeArgs: [`--inspect=127.0.0.1:${inspectPort}`],
    readiness: { url: `http://127.0.0.1:${gwPort}/readyz` },
    timeoutMs: 60_000,
  });
  procs.push(gateway);
  const inspector = await Inspector.connect(inspectPort);
  const gwPool = new Pool(`http://127.0.0.1:${gwPort}`, { connections: 1 });
  const sides: Side[] = [
    { name: 'gateway', proc: gateway, pool: gwPool, path: WEBHOOK_PATH },
    { name: 'gateway, profiler at 100 µs', proc: gateway, pool: gwPool, path: WEBHOOK_PATH, inspector, profile: true },
  ];
  if (!cli['no-baseline']) {
    fs.mkdirSync(path.join(root, 'baseline'));
    const baseline = await spawnNode('baseline', {
      script: 'bench/servers/baseline.ts',
      args: [
        '--upstream',
        'http://127.0.0.1:9',
        '--token',
        'x',
        '--data-dir',
        path.join(root, 'baseline'),
        '--synchronous',
        'FULL',
        '--notification-token',
        NOTIFICATION_TOKEN,
      ],
      cpus: place.server,
      readiness: { line: true },
    });
    procs.push(baseline);
    sides.push({
      name: 'baseline',
      proc: baseline,
      pool: new Pool(String(baseline.ready.url), { connections: 1 }),
      path: '/webhook',
    });
  }
  for (const s of sides) await send(s, Number(cli.warm)); // warm-up
  const results = new Map<string, Array<{ perTid: Map<number, number>; wallUs: number }>>();
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 ? [...sides].reverse() : sides;
    for (const s of order) {
      const res = await round(s);
      (results.get(s.name) ?? results.set(s.name, []).get(s.name)!).push(res);
      const total = [...res.perTid.values()].reduce((a, b) => a + b, 0);
      const main = res.perTid.get(s.proc.pid) ?? 0;
      console.log(
        `round ${r} ${s.name}: process ${total.toFixed(1)} µs/notification, main thread ${main.toFixed(1)}, others ${(total - main).toFixed(1)}; wall ${res.wallUs.toFixed(0)} µs`,
      );
    }
  }
  if (cli.perf) {
    // One more round of the gateway without the profiler under `perf record -g` (call graphs of every thread, kernel
    // included), written to --perf <file> for `perf report --sort tid,sym`.
    const perf = spawn('perf', ['record', '-g', '-o', cli.perf, '-p', String(gateway.pid)], { stdio: 'ignore' });
    await new Promise((r) => setTimeout(r, 1_000));
    await send(sides[0]!, N);
    perf.kill('SIGINT');
    await new Promise((r) => perf.once('exit', r));
  }
  if (cli.block) {
    // One more round of each process without the profiler, counting the block layer's requests its threads issue
    // (perf's block:block_rq_issue tracepoint, the whole machine, filtered by pid): data writes, flushes, metadata.
    for (const s of sides.filter((x) => !x.profile)) {
      const file = path.join(os.tmpdir(), `intake-threads-${s.proc.pid}.block`);
      const perf = spawn('perf', ['record', '-q', '-e', 'block:block_rq_issue', '-a', '-o', file], { stdio: 'ignore' });
      await new Promise((r) => setTimeout(r, 1_500));
      await send(s, N);
      perf.kill('SIGINT');
      await new Promise((r) => perf.once('exit', r));
      const text = execFileSync('perf', ['script', '-i', file, '-F', 'pid,tid,comm,trace'], {
        maxBuffer: 1 << 28,
      }).toString();
      const kinds = new Map<string, number>();
      for (const line of text.split('\n')) {
        const m = /\s(\d+)\/(\d+)\s+\d+,\d+\s+(\S+)\s+(\d+)/.exec(line);
        if (!m || Number(m[1]) !== s.proc.pid) continue;
        const key = `${m[2] === String(s.proc.pid) ? 'main' : m[2]} ${m[3]} ${m[4]} bytes`;
        kinds.set(key, (kinds.get(key) ?? 0) + 1 / N);
      }
      fs.rmSync(file, { force: true });
      console.log(
        `${s.name}: block requests issued per notification (tid, rwbs, size): ${[...kinds]
          .sort((a, b) => b[1] - a[1])
          .map(([k, c]) => `${k}: ${c.toFixed(3)}`)
          .join('; ')}`,
      );
    }
  }
  const labels = new Map<string, Map<number, Map<string, number>>>();
  if (!cli['no-strace']) {
    for (const s of sides.filter((x) => !x.profile)) labels.set(s.name, await label(s, 500));
  }
  for (const s of sides) {
    const rs = results.get(s.name)!;
    const tids = [...new Set(rs.flatMap((x) => [...x.perTid.keys()]))].sort((a, b) => a - b);
    console.log(
      `\n${s.name} (pid ${s.proc.pid}): µs per notification by thread, each round; wall per notification ${rs.map((x) => x.wallUs.toFixed(0)).join(' / ')} µs`,
    );
    const calls = labels.get(s.name.startsWith('gateway') ? 'gateway' : s.name);
    for (const tid of tids) {
      const v = rs.map((x) => x.perTid.get(tid) ?? 0);
      if (Math.max(...v) < 0.5) continue;
      const what = calls?.get(tid);
      const desc = what
        ? [...what]
            .filter(([k, c]) => c >= 0.01 && !k.startsWith('futex'))
            .sort((a, b) => b[1] - a[1])
            .map(([k, c]) => `${k} ${c.toFixed(2)}`)
            .join(', ')
        : '';
      console.log(
        `  ${tid === s.proc.pid ? 'main' : tid}: ${v.map((x) => x.toFixed(1)).join(' / ')}${desc ? `   [${desc}]` : ''}`,
      );
    }
    const totals = rs.map((x) => [...x.perTid.values()].reduce((a, b) => a + b, 0));
    console.log(`  process: ${totals.map((x) => x.toFixed(1)).join(' / ')}`);
  }
  if (labels.size) {
    for (const [name, perTid] of labels) {
      console.log(`\n${name}: system calls per notification, threads not shown above`);
      for (const [tid, calls] of perTid) {
        const shown = results.get(name)!.some((x) => (x.perTid.get(tid) ?? 0) >= 0.5);
        if (shown) continue;
        console.log(`  ${tid}: ${[...calls].map(([k, c]) => `${k} ${c.toFixed(2)}`).join(', ')}`);
      }
    }
  }
} finally {
  for (const p of procs) await p.stop();
  fs.rmSync(root, { recursive: true, force: true });
}
process.exit(0);
