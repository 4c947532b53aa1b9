import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * CPU placement: on a machine with two or more cores and `taskset`, the process under test (gateway or
 * baseline) gets the last core to itself and everything else (upstream stub, load generator, this
 * orchestrator) shares core 0. Without taskset nothing is pinned, and the README says so.
 */
export interface Placement {
  pinned: boolean;
  /** Core of the server under test. */
  server: string | null;
  /** Core of the upstream stub, the load generator and the orchestrator. */
  driver: string | null;
  description: string;
}

export function placement(): Placement {
  const cores = os.availableParallelism();
  let taskset = false;
  try {
    execFileSync('taskset', ['--version'], { stdio: 'ignore' });
    taskset = true;
  } catch {
    taskset = false;
  }
  if (!taskset || cores < 2) {
    return {
      pinned: false,
      server: null,
      driver: null,
      description: `not pinned (${taskset ? `${cores} core` : 'no taskset'})`,
    };
  }
  const server = String(cores - 1);
  return {
    pinned: true,
    server,
    driver: '0',
    description: `taskset: server under test (gateway, a baseline or a peer) on CPU ${server}; upstream stub, load generator and orchestrator on CPU 0`,
  };
}

/** Pins an already running process (all its threads) to `cpus`. */
export function pin(pid: number, cpus: string): void {
  execFileSync('taskset', ['-a', '-c', '-p', cpus, String(pid)], { stdio: 'ignore' });
}

const CLK_TCK = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
  } catch {
    return 100;
  }
})();

/** Until process `pid` uses under 10% of a core for two 100 ms samples in a row, or `maxMs` has passed. */
export async function waitUntilIdle(pid: number, maxMs: number): Promise<void> {
  const deadline = performance.now() + maxMs;
  let quiet = 0;
  await sleep(100);
  while (quiet < 2 && performance.now() < deadline) {
    const before = cpuSeconds(pid);
    await sleep(100);
    quiet = cpuSeconds(pid) - before < 0.01 ? quiet + 1 : 0;
  }
}

/** user + system CPU seconds a process has used so far (all threads), from /proc. */
export function cpuSeconds(pid: number): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // After "pid (comm) ", fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
  } catch {
    return NaN;
  }
}

/** Busy CPU seconds of the whole machine so far (every core, every process), from /proc/stat. */
export function machineBusySeconds(): number {
  try {
    const line = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
    const [user, nice, system, idle, iowait, irq, softirq, steal] = line
      .trim()
      .split(/\s+/)
      .slice(1)
      .map(Number) as number[];
    void idle;
    void iowait;
    return (user! + nice! + system! + irq! + softirq! + steal!) / CLK_TCK;
  } catch {
    return NaN;
  }
}

/** Resident set size in bytes, from /proc. */
export function rssBytes(pid: number): number {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
    return m ? Number(m[1]) * 1024 : NaN;
  } catch {
    return NaN;
  }
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

export interface Proc {
  readonly name: string;
  readonly pid: number;
  readonly child: ChildProcess;
  /** The JSON a bench server printed on its `READY ` line (empty for the gateway). */
  readonly ready: Record<string, unknown>;
  cpuSeconds(): number;
  rssBytes(): number;
  /** The last lines the process wrote to stderr (for error messages). */
  tail(): string;
  stop(): Promise<void>;
}

export interface SpawnOptions {
  /**
   * Script path relative to `cwd` (default: the repository root), run with `node --import tsx`; a `.js` script
   * (a build's output, as `npm start` runs it) is run by plain `node`.
   */
  script: string;
  cwd?: string;
  args?: string[];
  env?: Record<string, string>;
  /** `taskset -c` list; null runs unpinned. */
  cpus: string | null;
  nodeArgs?: string[];
  /** Open an IPC channel (the load generator). */
  ipc?: boolean;
  /**
   * How to know it is up: `line` waits for a `READY {json}` line on stdout; a URL polls it until it
   * answers 200.
   */
  readiness: { line: true } | { url: string };
  timeoutMs?: number;
}

/** Every process this benchmark started and has not stopped, for telling our CPU from other people's. */
const running = new Set<Proc>();

let killsOnExit = false;
/**
 * From the first process started on: whatever is still running when this process ends (a script that throws, one that
 * calls `process.exit` without stopping what it started, SIGINT or SIGTERM from `timeout`) is killed with it. Left
 * behind, a gateway pinned to the server core took a share of it from every later run.
 */
function killOnExit(): void {
  if (killsOnExit) return;
  killsOnExit = true;
  process.once('exit', () => {
    for (const p of running) p.child.kill('SIGKILL');
  });
  process.once('SIGINT', () => process.exit(130));
  process.once('SIGTERM', () => process.exit(143));
}

/** One task of the machine, from `/proc/<pid>/stat`. */
interface Task {
  name: string;
  parent: number;
  /** A kernel thread (writeback, block I/O, memory monitoring): the kernel's work, often done for ours. */
  kernel: boolean;
  /** CPU seconds of the task and of the children it has reaped (so a short-lived process is not lost). */
  cpu: number;
  /** When it started (clock ticks after boot): a pid reused meanwhile is another task. */
  born: string;
}

const PF_KTHREAD = 0x00200000;

/** Every task on the machine, by pid. */
function tasks(): Map<number, Task> {
  const out = new Map<number, Task>();
  let names: string[];
  try {
    names = fs.readdirSync('/proc');
  } catch {
    return out;
  }
  for (const entry of names) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    let stat: string;
    try {
      stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    const close = stat.lastIndexOf(')');
    // After "pid (comm) ", fields[0] is field 3 (state): ppid 4, flags 9, utime 14, stime 15, cutime 16, cstime 17,
    // starttime 22.
    const f = stat.slice(close + 2).split(' ');
    const parent = Number(f[1]);
    out.set(pid, {
      name: stat.slice(stat.indexOf('(') + 1, close),
      parent,
      kernel: (Number(f[6]) & PF_KTHREAD) !== 0 || pid === 2 || parent === 2,
      cpu: (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / CLK_TCK,
      born: f[19]!,
    });
  }
  return out;
}

/** This process and all it started, at any depth (a gateway's esbuild service, a stopped gateway still exiting). */
function ours(all: Map<number, Task>): Set<number> {
  const mine = new Set([process.pid]);
  for (const p of running) mine.add(p.pid);
  for (let grew = true; grew;) {
    grew = false;
    for (const [pid, task] of all)
      if (!mine.has(pid) && mine.has(task.parent)) {
        mine.add(pid);
        grew = true;
      }
  }
  return mine;
}

/** What the rest of the machine used over a while, in cores. */
export interface Others {
  /** Other people's processes: the figure a measurement is judged by. */
  cores: number;
  /** Kernel threads (writeback, block I/O, memory reclaim): often work done for ours, and not charged to a process. */
  kernel: number;
  /** Busy time charged to no task (interrupts and softirqs taken while a core idled). */
  unattributed: number;
  /** The busiest other processes, for a message: `name (pid) 12 %`, or `name (pid) script.js 12 %`. */
  top: string[];
}

/**
 * What a busy process runs, for the message: its first argument that is a file's path, by file name only (`forks.js`
 * for a test runner's worker), never its other arguments, which may carry a secret. Empty when it has none or is gone.
 */
function scriptOf(pid: number): string {
  try {
    const args = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').slice(1);
    // A file's path: no option, and not the code of `node -e` (which has spaces or other characters).
    const script = args.find((a) => /^[\w.@+/-]+$/.test(a) && !a.startsWith('-') && /[/.]/.test(a));
    return script ? ` ${path.basename(script).slice(0, 40)}` : '';
  } catch {
    return '';
  }
}

/** `Others` as a message says it. */
export function describeOthers(o: Others): string {
  const pct = (cores: number) => `${(cores * 100).toFixed(0)} %`;
  return `${o.top.length > 0 ? o.top.join(', ') : 'none'}; kernel threads ${pct(o.kernel)}, no task ${pct(o.unattributed)}`;
}

/**
 * Starts counting what the rest of the machine (every process but this one and those it started, at any depth)
 * uses; the function returned says how much since then, in cores. A kernel thread's time (the disk's writeback of
 * our own commits) and time charged to no task are counted apart: neither is charged to a process measured, and
 * neither is someone else's work.
 */
export function othersSince(): () => Others {
  const busy0 = machineBusySeconds();
  const before = tasks();
  const t0 = performance.now();
  return () => {
    const busy = machineBusySeconds() - busy0;
    const after = tasks();
    const wall = (performance.now() - t0) / 1000;
    const mine = ours(after);
    for (const pid of ours(before)) mine.add(pid);
    let charged = 0;
    let kernel = 0;
    const people: { label: string; pid: number; cpu: number }[] = [];
    for (const [pid, task] of after) {
      const was = before.get(pid);
      // A pid seen only now started during the while (or reused one that ended: counted whole, the safe side).
      const cpu = Math.max(0, task.cpu - (was?.born === task.born ? was.cpu : 0));
      charged += cpu;
      if (mine.has(pid)) continue;
      if (task.kernel) kernel += cpu;
      else if (cpu > 0) people.push({ label: `${task.name} (${pid})`, pid, cpu });
    }
    const cores = people.reduce((sum, p) => sum + p.cpu, 0) / wall;
    people.sort((a, b) => b.cpu - a.cpu);
    for (const p of people.slice(0, 3)) p.label += scriptOf(p.pid);
    return {
      cores,
      kernel: kernel / wall,
      unattributed: Math.max(0, busy - charged) / wall,
      top: people.slice(0, 3).map((p) => `${p.label} ${((p.cpu / wall) * 100).toFixed(0)} %`),
    };
  };
}

/**
 * Waits until the rest of the machine (other people's processes) uses less than `threshold` cores,
 * sampled over `sampleMs`, for at most `maxWaitMs`; returns the last sample. The machine is shared, and a
 * figure taken beside someone's test run says little.
 */
export async function waitForQuiet(
  options: { threshold?: number; sampleMs?: number; maxWaitMs?: number } = {},
): Promise<Others> {
  const threshold = options.threshold ?? 0.3;
  const sampleMs = options.sampleMs ?? 300;
  const started = performance.now();
  const deadline = started + Math.min(options.maxWaitMs ?? 5_000, quietBudgetMs);
  try {
    for (;;) {
      const others = othersSince();
      await sleep(sampleMs);
      const other = others();
      if (other.cores < threshold || performance.now() > deadline) return other;
    }
  } finally {
    quietBudgetMs = Math.max(0, quietBudgetMs - Math.max(0, performance.now() - started - sampleMs));
  }
}

/** Waiting for quiet beyond one sample costs the suite time: at most this much in all, so it stays under 10 minutes. */
let quietBudgetMs = 60_000;

export async function spawnNode(name: string, options: SpawnOptions): Promise<Proc> {
  const loader = options.script.endsWith('.js') ? [] : ['--import', 'tsx'];
  const nodeArgs = [...loader, ...(options.nodeArgs ?? []), options.script, ...(options.args ?? [])];
  const [cmd, args] =
    options.cpus === null ? ['node', nodeArgs] : ['taskset', ['-c', options.cpus, 'node', ...nodeArgs]];
  const child = spawn(cmd, args as string[], {
    cwd: options.cwd ?? ROOT,
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe', ...(options.ipc ? (['ipc'] as const) : [])],
  });
  const errLines: string[] = [];
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    errLines.push(chunk);
    if (errLines.length > 50) errLines.shift();
  });
  let exited: { code: number | null; signal: string | null } | null = null;
  const exit = new Promise<void>((resolve) =>
    child.once('exit', (code, signal) => {
      exited = { code, signal };
      resolve();
    }),
  );
  const tail = () => errLines.join('').split('\n').slice(-20).join('\n');
  const timeoutMs = options.timeoutMs ?? 30_000;

  let ready: Record<string, unknown> = {};
  const failed = () => new Error(`${name} exited before it was ready (${JSON.stringify(exited)}):\n${tail()}`);
  if ('line' in options.readiness) {
    ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
      let buffer = '';
      const timer = setTimeout(
        () => reject(new Error(`${name} was not ready within ${timeoutMs} ms:\n${tail()}`)),
        timeoutMs,
      );
      child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
        buffer += chunk;
        const m = /^READY (.*)$/m.exec(buffer);
        if (m) {
          clearTimeout(timer);
          resolve(JSON.parse(m[1]!) as Record<string, unknown>);
        }
      });
      void exit.then(() => {
        clearTimeout(timer);
        reject(failed());
      });
    });
  } else {
    child.stdout!.resume();
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (exited) throw failed();
      try {
        const res = await fetch(options.readiness.url);
        if (res.status === 200) break;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`${name} was not ready within ${timeoutMs} ms:\n${tail()}`);
      await sleep(100);
    }
  }
  const pid = child.pid!;
  const proc: Proc = {
    name,
    pid,
    child,
    ready,
    cpuSeconds: () => cpuSeconds(pid),
    rssBytes: () => rssBytes(pid),
    tail,
    async stop() {
      running.delete(proc);
      if (exited) return;
      child.kill('SIGTERM');
      // The 10 s limit's timer is cleared once the child is gone: left running, it kept the caller's process alive
      // for those 10 s after its work was done.
      let limit: NodeJS.Timeout | undefined;
      const killed = await Promise.race([
        exit.then(() => true),
        new Promise<boolean>((resolve) => (limit = setTimeout(() => resolve(false), 10_000))),
      ]);
      clearTimeout(limit);
      if (!killed) {
        child.kill('SIGKILL');
        await exit;
      }
    },
  };
  running.add(proc);
  killOnExit();
  return proc;
}

/**
 * A field of /proc/<pid>/io, every thread: `write_bytes` (the pages the process dirtied, counted as bytes), `wchar`
 * (the bytes its write calls passed, cached or not) or `read_bytes` (what it had read from the disk, not the cache).
 */
export function ioField(of: number, field: string): number {
  const line = fs.readFileSync(`/proc/${of}/io`, 'utf8').match(new RegExp(`^${field}: (\\d+)$`, 'm'));
  return Number(line?.[1] ?? NaN);
}
