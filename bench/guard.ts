/**
 * `npm run bench:guard -- --against <git ref>`: is the working tree slower than `<ref>` on a hot path?
 *
 * The ref (default HEAD~1) is unpacked with `git archive` into a temporary folder that reuses this checkout's
 * node_modules, and the working tree's sources are copied into another; each is compiled to JavaScript beside its
 * sources (esbuild, ~0.3 s), so that the gateways start without tsx (decision 125). Each side (the working tree and the
 * ref) runs as four gateway processes (--pairs) with the same upstream stub and the same requests, their databases in
 * memory (/dev/shm). The gateways run V8's baseline tier by default (no optimising compiler, `--tier`; see TIERS): a
 * process of it keeps little luck of its own (up to ~2.5 % on Node 26, which the four pairs average out: decision 114),
 * where an optimised one keeps up to 5 % for its life. First every gateway warms every path (16 in flight, on both
 * cores). Then, on the server's core, a round drives one pair, its two sides in turns of one operation each (decision
 * 144), from a full collection on both, and the pairs take turns. What is compared is the gateway's **CPU time per
 * operation** (every thread of its process, from /proc), which a shared machine disturbs far less than throughput.
 * Before each measured round the guard waits until nothing else uses the machine; when that does not come, it says so
 * and exits 3 rather than give a verdict.
 * It prints a table (µs per operation on each side, the per-round ratios' mean without the highest and the lowest
 * eighth of the rounds, from five rounds on, at least one each way, and its spread: the larger of twice its standard
 * error and the pairs' half range, narrower as rounds are added) and exits 1 when a path is slower by more than its
 * spread plus the tier's tolerance (2 %, 3 % optimised); 2 when it could not measure; 3 when it has no verdict: the
 * machine stayed busy, or a path, after the sets of rounds it had time for, was neither slower nor "same" (its ratio
 * plus its spread under 1.05: a 5 % loss ruled out; baseline tier, decision 114). Once every path has its first set, a
 * path that is not slower takes more rounds, half a set at a time and up to four sets in all, until its ratio's
 * standard error is ±0.6 % (decision 125), while they still fit in 72 s of run (LIMIT_S, decision 132): about 60 s on 2
 * cores when the host is quiet, and never over 75 s unless the machine is busy. On a quiet machine the same tree reads
 * within ±2 % on every path and a tree planted with 5 % more CPU per request is flagged on every path (decision 084;
 * test/bench/guard.test.ts).
 *
 * Options: --against <ref> (`.` measures the working tree against itself), --tree <ref> (measure that commit in the
 * working tree's place: a bisection between two commits), --tier baseline|optimizing, --rounds <n> (default 8
 * baseline, 6 optimizing), --pairs <n> (default 4),
 * --quiet-wait <s> (how long to wait for a quiet machine, default 20), --paths a,b, --node-arg <flag> (repeatable:
 * a Node or V8 flag for every gateway of both sides, e.g. `--node-arg=--single-threaded`),
 * --env NAME=VALUE[,NAME=VALUE] (the working tree's side only: an off switch or a setting against the same code, with
 * `--against .`), --ref-env (the same for the ref's side), --concurrency <n> (operations in flight while measuring,
 * default 1), --quick (half the operations: shorter, noisier), --json <file> (the figures, for tests), --profile <dir>
 * (each side's V8 CPU profile in <dir>/tree and <dir>/ref, for bench/profile-summary.ts).
 * BENCH_GUARD_SLOWDOWN=<path>:<percent>[,…] makes the working tree's side spend that much more CPU than the ref's on
 * those paths (bench/lib/guard-hooks.ts): only the guard's test sets it.
 */
import { execFileSync, execSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import WebSocket from 'ws';

import { compileBeside, compileModule, startNodeArgs } from './lib/build.js';
import { closedLoop, processCpu } from './lib/cpu.js';
import { API_KEY, gatewayEnv, NOTIFICATION_TOKEN } from './lib/env.js';
import { rowOf, settled, type Figures, type GuardRow } from './lib/guard-verdict.js';
import { graphql } from './lib/harness.js';
import {
  describeOthers,
  freePort,
  othersSince,
  pin,
  placement,
  ROOT,
  spawnNode,
  waitForQuiet,
  type Others,
  type Placement,
  type Proc,
} from './lib/processes.js';
import { median } from './lib/stats.js';
import { SUBSCRIPTION } from './scenarios/fanout.js';
import { CREATE_NETWORK } from './scenarios/mutation.js';
import { PROJECT_TREE, seedTree } from './scenarios/query.js';
import { notificationBody, WEBHOOK_PATH } from './scenarios/webhook.js';

const PATHS = ['mutation', 'tree', 'intake', 'delivery'] as const;
type PathName = (typeof PATHS)[number];
/**
 * Operations in flight at once in a side's turn on every path while measuring (--concurrency), the same on both
 * sides. One by default: each operation then pays its own commit and its own wake-ups, so what a side costs does not
 * depend on how the scheduler happened to batch its requests (with 16 in flight, group commits and reads per wake-up
 * moved a round's ratio by 5–8 %).
 */
let CONCURRENCY = 1;
/** Operations in flight in the warm-up, where only throughput matters. */
const WARMUP_CONCURRENCY = 16;
/**
 * Warm-up operations a gateway and path before any round: V8 keeps optimising the path's functions for thousands of
 * requests (the mutation's CPU per operation falls from ~1.9 ms to ~0.7 ms over its first 8,000; with
 * --no-opt it holds still from the first), and a side still warming in a round moves its ratio.
 */
const WARMUP_OPS: Record<PathName, number> = { mutation: 6000, tree: 4000, intake: 4000, delivery: 3000 };
/** Operations per round and path at most: about 0.3–0.6 s of one core each on a fast host. */
const OPS: Record<PathName, number> = { mutation: 400, tree: 800, intake: 600, delivery: 400 };
/**
 * A measured round's CPU a side, at most (half with --quick): on a host that runs a path slower than
 * OPS assumes, its rounds take fewer operations, sized from the ref's cost in the unmeasured rounds, so that the guard
 * stays under 75 s however fast the host is that hour (the same code read 1.2–1.8× apart in CPU per operation over
 * one afternoon, and the guard 63–85 s with fixed counts).
 */
const ROUND_CPU_S = 0.4;
/**
 * Seconds of the guard's run (from its process's start, less any wait for a quiet machine before the first round) by
 * which every path's first set of measured rounds should end: with 1 in flight a round's wall time is its operations'
 * whole latency (the driver, the upstream stub, the disk's syncs), which a slow host stretches more than the CPU that
 * ROUND_CPU_S bounds. So each path's rounds also take no more operations than fit in what is left of this budget,
 * shared among the paths still to measure, at the wall time per operation its unmeasured rounds took (the 2026-12-01
 * host ran the guard 79–93 s with the CPU bound alone). What is left to LIMIT_S, ~17 s, is for the rounds taken again
 * (decision 132).
 */
const BUDGET_S = 54;
/**
 * Seconds of the run by which the last rounds end, whatever the host's noise: a path not read to PRECISION takes more
 * rounds only while half a set (at its last rounds' pace) fits before this. With the ~1 s the guard takes to
 * stop its processes, `npm run bench:guard` stays under 75 s unless the machine is busy (its waits are not counted).
 */
const LIMIT_S = 72;
/** Each path's measured operations per round on this host (see ROUND_CPU_S), set after its unmeasured rounds. */
const roundOps = new Map<PathName, number>();
/**
 * Which of V8's compilers the gateways run with (--tier), and what that tier needs.
 * - `baseline` (default): V8's interpreter and its baseline compiler only (`--no-turbofan --no-maglev`). No function is
 *   optimised, so a process's cost holds still after a short warm-up (the caches, the heap, SQLite's pages) and no
 *   process has a luck of its own from what its optimising compiler happened to decide and when: two processes of the
 *   same code read within about 1 % of each other on Node 20 (up to ~2.5 % on Node 26: decision 114), where optimised
 *   processes read up to 5 % apart for their whole life (decision 084). The young generation has the fixed size a busy
 *   process grows it to (16 MB a semi-space, V8's largest by default), so that no process keeps a luck of its own from
 *   when V8 grew it, and each round starts from a full collection on both sides (`--expose-gc`, asked through
 *   bench/lib/guard-hooks.ts, not counted), so that an old-generation collection does not fall into one side's round
 *   and not the other's (it moved single rounds by 13–25 %); the scavenges a round's own garbage causes are counted
 *   (decision 085: on Node 26, without the fixed size, pairs of processes read up to 3.3 % apart for their whole life).
 *   The JavaScript costs about 1.5 times what it costs optimised; native work (SQLite, the system calls, hashing, JSON)
 *   costs the same, so a loss in native work reads smaller here by up to that factor.
 * - `optimizing`: V8 as `npm start` runs it: the production cost, with each process's luck (decision 075).
 */
const TIERS = {
  baseline: {
    nodeArgs: ['--no-turbofan', '--no-maglev', '--min-semi-space-size=16', '--max-semi-space-size=16'],
    warm: 0.15,
    ops: 0.7,
    rounds: 8,
    tolerance: 0.02,
    sees: 0.05,
    precision: 0.006,
    gcBeforeRound: true,
  },
  optimizing: {
    nodeArgs: [],
    warm: 1,
    ops: 1,
    rounds: 6,
    tolerance: 0.03,
    sees: Number.POSITIVE_INFINITY,
    precision: Number.POSITIVE_INFINITY,
    gcBeforeRound: false,
  },
} as const;
type TierName = keyof typeof TIERS;
/** Other processes' CPU (in cores) above which the machine is too busy for a verdict. */
const BUSY = 0.15;
/**
 * Pairs of gateway processes (one a side), taking the rounds in turn (--pairs). Four: even in the baseline tier a
 * process on Node 26 keeps a luck of its own of up to ~2.5 % against another of the same code, and with two pairs
 * one run of the suite read the same tree 2.2 % apart (both pairs on the same side of 1); with four, three runs of
 * the same tree on Node 26 kept the table within ±0.4 % of 1 on every path, each pair taking two rounds, one in each
 * order (decision 114). Each gateway of the baseline tier then warms up with 60 % of the operations it did with two
 * pairs, so that the guard stays near its former length (about 55 s on a fast hour of this machine, 75 s on a slow
 * one).
 */
let PAIRS = 4;
const loadAverage = () =>
  os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

const { values: cli } = parseArgs({
  options: {
    against: { type: 'string', default: 'HEAD~1' },
    tree: { type: 'string', default: '.' },
    tier: { type: 'string', default: 'baseline' },
    rounds: { type: 'string' },
    paths: { type: 'string' },
    quick: { type: 'boolean', default: false },
    json: { type: 'string' },
    profile: { type: 'string' },
    env: { type: 'string' },
    'ref-env': { type: 'string' },
    concurrency: { type: 'string' },
    pairs: { type: 'string' },
    'quiet-wait': { type: 'string', default: '20' },
    'node-arg': { type: 'string', multiple: true },
  },
});

function fail(message: string): never {
  process.stderr.write(`bench:guard: ${message}\n`);
  process.exit(2);
}

if (!Object.hasOwn(TIERS, cli.tier!))
  fail(`--tier wants ${Object.keys(TIERS).join(' or ')}, got ${JSON.stringify(cli.tier)}`);
const TIER = TIERS[cli.tier as TierName];
/** A path is slower when its ratio exceeds 1 by more than its spread plus this. */
const TOLERANCE = TIER.tolerance;
/**
 * The loss a verdict of "same" rules out (decision 114): a path reads "same" only when its ratio plus its spread stays
 * under 1 + this. A path still between after MAX_SETS sets of rounds has no verdict ("unresolved", exit 3).
 */
const SEES = TIER.sees;
/**
 * The standard error a path's ratio is read to unless it reads slower (decision 125): a path neither slower nor read
 * that closely takes more rounds, half a set at a time, all read together, up to MAX_SETS sets, so that a same tree
 * reads within the tolerance of 1 on a noisy host too; such a host costs time instead (2–5 s a path and half set),
 * until LIMIT_S leaves no room for more (the guard then says which path it read less closely). The optimising tier
 * claims no 5 % and no precision (its processes keep a luck of their own), so it never measures again.
 */
const PRECISION = TIER.precision;
/** Sets of `--rounds` rounds a path takes at most (see PRECISION). */
const MAX_SETS = 4;
const rounds = Number(cli.rounds ?? TIER.rounds);
if (!Number.isInteger(rounds) || rounds < 2)
  fail(`--rounds wants a whole number ≥ 2, got ${JSON.stringify(cli.rounds)}`);
const paths = (cli.paths ? cli.paths.split(',').map((s) => s.trim()) : [...PATHS]) as PathName[];
for (const p of paths)
  if (!PATHS.includes(p)) fail(`--paths: unknown path ${JSON.stringify(p)} (known: ${PATHS.join(', ')})`);
const opsScale = (cli.quick ? 0.5 : 1) * TIER.ops;
const warmScale = (cli.quick ? 0.5 : 1) * TIER.warm;
if (cli.concurrency !== undefined) {
  CONCURRENCY = Number(cli.concurrency);
  if (!Number.isInteger(CONCURRENCY) || CONCURRENCY < 1)
    fail(`--concurrency wants a whole number ≥ 1, got ${JSON.stringify(cli.concurrency)}`);
}
if (cli.pairs !== undefined) {
  PAIRS = Number(cli.pairs);
  if (!Number.isInteger(PAIRS) || PAIRS < 1) fail(`--pairs wants a whole number ≥ 1, got ${JSON.stringify(cli.pairs)}`);
}
const VERDICT = { pairs: PAIRS, tolerance: TOLERANCE, sees: SEES };
const quietWaitMs = Number(cli['quiet-wait']) * 1000;
if (!Number.isFinite(quietWaitMs) || quietWaitMs < 0)
  fail(`--quiet-wait wants seconds ≥ 0, got ${JSON.stringify(cli['quiet-wait'])}`);
function envList(option: string, raw: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of raw ? raw.split(',') : []) {
    const m = /^([A-Z][A-Z0-9_]*)=(.*)$/.exec(pair.trim());
    if (!m) fail(`${option} wants NAME=VALUE[,NAME=VALUE], got ${JSON.stringify(pair)}`);
    out[m[1]!] = m[2]!;
  }
  return out;
}
const sideEnv = { tree: envList('--env', cli.env), ref: envList('--ref-env', cli['ref-env']) };

/** BENCH_GUARD_SLOWDOWN=<path>:<percent>[,<path>:<percent>]: the working tree's extra CPU per request, by path. */
const slowdown = (() => {
  const raw = process.env.BENCH_GUARD_SLOWDOWN;
  const out = new Map<PathName, number>();
  for (const item of raw ? raw.split(',') : []) {
    const m = /^(\w+):(\d+(?:\.\d+)?)$/.exec(item.trim());
    if (!m || !PATHS.includes(m[1] as PathName))
      fail(`BENCH_GUARD_SLOWDOWN wants <path>:<percent>[,…] (paths: ${PATHS.join(', ')}), got ${JSON.stringify(raw)}`);
    out.set(m[1] as PathName, Number(m[2]) / 100);
  }
  return out;
})();

/** Seconds since the guard's process started (tsx compiles it first): the time printed. */
const lifeS = () => performance.now() / 1000;
/** Seconds spent in the quiet check before the first round: BUDGET_S and LIMIT_S do not count them. */
let waitedS = 0;
/** Seconds of the guard's run so far, as BUDGET_S and LIMIT_S count them. */
const runS = () => lifeS() - waitedS;
const log = (line: string) => process.stderr.write(`[${lifeS().toFixed(0).padStart(3)} s] ${line}\n`);

/**
 * Until the round's gateways use under 5 % of a core for two 25 ms samples in a row (at most `maxMs`): a round must
 * not start while its sides still finish the last one (a checkpoint, the last commits, the forced collection's
 * sweeping). The other pair's gateways only wait; what little they do falls on both sides alike, and the quiet check
 * counts it. Samples of 50 ms made it last 140 ms on average (decision 131).
 */
async function settle(gatewayPids: number[], maxMs = 3_000): Promise<void> {
  const sampleS = 0.025;
  const deadline = performance.now() + maxMs;
  let quiet = 0;
  while (quiet < 2 && performance.now() < deadline) {
    const before = gatewayPids.map(processCpu);
    await sleep(sampleS * 1000);
    quiet = gatewayPids.every((pid, i) => processCpu(pid) - before[i]! < 0.05 * sampleS) ? quiet + 1 : 0;
  }
}

/**
 * The ref unpacked beside node_modules, or for `.` a copy of the working tree's sources (what the gateway reads: src/,
 * schema/, package.json, tsconfig.json), each compiled in place (bench/lib/build.ts `compileBeside`): both sides then
 * run plain JavaScript from a folder of one name's length.
 */
interface Snapshot {
  dir: string;
  label: string;
  /** The gateway's entry, relative to `dir`: JavaScript, started without tsx. */
  script: string;
  cleanup(): void;
}

async function snapshot(ref: string): Promise<Snapshot> {
  const compiled = async (dir: string, label: string) => {
    const cleanup = () => fs.rmSync(dir, { recursive: true, force: true });
    try {
      fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
      return { dir, label, script: await compileBeside(dir), cleanup };
    } catch (err) {
      cleanup();
      throw err;
    }
  };
  if (ref === '.') {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-guard-'));
    for (const part of ['src', 'schema', 'package.json', 'tsconfig.json'])
      fs.cpSync(path.join(ROOT, part), path.join(dir, part), { recursive: true });
    return compiled(dir, 'working tree');
  }
  let sha: string;
  try {
    sha = execFileSync('git', ['-C', ROOT, 'rev-parse', '--verify', '--quiet', `${ref}^{commit}`], {
      encoding: 'utf8',
    }).trim();
  } catch {
    fail(`--against ${ref}: no such commit in this repository`);
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-guard-'));
  execSync(`git -C ${JSON.stringify(ROOT)} archive ${sha} | tar -x -C ${JSON.stringify(dir)}`);
  return compiled(dir, `${ref} (${sha.slice(0, 7)})`);
}

/** A path's measured rounds so far, its row from them, and what plants on a round. */
interface Taken {
  p: PathName;
  byRound: Figures[];
  row?: GuardRow;
  /** The wall time of a round in its last run of rounds. */
  roundS: number;
  /** More rounds would have ended after LIMIT_S. */
  outOfTime?: boolean;
  plant: (round: Figures) => void;
}

interface Side {
  name: 'tree' | 'ref';
  label: string;
  proc: Proc;
  origin: string;
  pool: Pool;
  /** µs of CPU the slowdown adds per request of each path (working tree only, when BENCH_GUARD_SLOWDOWN is set). */
  burnUs: Map<PathName, number>;
  treeBody: string;
  mutationBody: string;
}

async function startSide(
  name: Side['name'],
  index: number,
  code: Snapshot,
  /** bench/lib/guard-hooks.ts compiled (`compileModule`), loaded into every gateway. */
  hooks: string,
  stubUrl: string,
  root: string,
  cpus: string | null,
  /** Called with the gateway's process as soon as it runs, so that it is stopped whatever happens next. */
  started: (proc: Proc) => void,
): Promise<Side> {
  // Names of one length on both sides: the folder is in the gateway's environment, and a side whose environment is
  // a byte longer read 0.5–1.5 % cheaper on Node 26 in most runs (decision 085).
  const dataDir = path.join(root, `${index}${name === 'tree' ? 't' : 'r'}`);
  // The port is free when asked for and taken when the gateway listens, seconds later: meanwhile another process's
  // connection may take it (eight gateways start at once), so a start that finds it taken starts again on another.
  for (let attempt = 1; ; attempt++) {
    fs.rmSync(dataDir, { recursive: true, force: true });
    fs.mkdirSync(dataDir);
    const port = await freePort();
    const origin = `http://127.0.0.1:${port}`;
    let proc: Proc;
    try {
      proc = await spawnNode(`gateway ${index + 1} (${code.label})`, {
        script: code.script,
        cwd: code.dir,
        cpus,
        nodeArgs: [
          ...startNodeArgs(code.dir),
          '--import',
          pathToFileURL(hooks).href,
          ...(cli.profile ? ['--cpu-prof', '--cpu-prof-dir', path.resolve(cli.profile, name)] : []),
          ...TIER.nodeArgs,
          ...(TIER.gcBeforeRound ? ['--expose-gc'] : []),
          ...(cli['node-arg'] ?? []),
        ],
        // The WAL not written ahead (docs/decisions/141): eight gateways writing ~300 MB each at start would take
        // seconds of the guard's 75 and GB of disk writes a run; the guard reads the CPU a path's code costs.
        env: {
          ...gatewayEnv({ port, dataDir, stubUrl }),
          SQLITE_SYNCHRONOUS: 'FULL',
          SQLITE_WAL_PREALLOCATE: 'false',
          ...sideEnv[name],
        },
        readiness: { url: `${origin}/readyz` },
        timeoutMs: 60_000,
      });
    } catch (err) {
      if (attempt < 3 && /EADDRINUSE/.test(String(err))) continue;
      throw err;
    }
    started(proc);
    return sideOf(name, code.label, proc, origin);
  }
}

/** A started gateway as a side: its pool, a project to create networks in, and a seeded tree to query. */
async function sideOf(name: Side['name'], label: string, proc: Proc, origin: string): Promise<Side> {
  const pool = new Pool(origin, { connections: Math.max(CONCURRENCY, WARMUP_CONCURRENCY), pipelining: 1 });
  const project = await graphql<{ createProject: { project: { id: string } } }>(
    origin,
    API_KEY,
    'mutation($input: CreateProjectInput!) { createProject(input: $input) { project { id } } }',
    { input: { name: 'guard', description: 'bench:guard' } },
  );
  const projectId = project.createProject.project.id;
  return {
    name,
    label,
    proc,
    origin,
    pool,
    burnUs: new Map(),
    treeBody: JSON.stringify({ query: PROJECT_TREE, variables: { id: await seedTree(origin) } }),
    mutationBody: JSON.stringify({
      query: CREATE_NETWORK,
      variables: { input: { projectId, title: 'guard-net' }, key: '{{uuid}}' },
    }),
  };
}

const GRAPHQL_HEADERS = { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` };
const WEBHOOK_HEADERS = {
  'content-type': 'application/json',
  authorization: `Bearer ${NOTIFICATION_TOKEN}`,
  'x-mobileid-request-id': 'guard',
};
const NOTIFICATION = notificationBody();

async function post(
  side: Side,
  p: PathName,
  urlPath: string,
  headers: Record<string, string>,
  body: string,
  expect: number,
): Promise<void> {
  // With a planted slowdown every request of either side carries the header (0: no spin), so that the header's own
  // cost (its parsing, the gateway reading it) falls on both: on the working tree's side alone it read 1 %.
  const burn = slowdown.size > 0 ? { 'x-guard-burn-us': String(Math.round(side.burnUs.get(p) ?? 0)) } : {};
  const res = await side.pool.request({ method: 'POST', path: urlPath, headers: { ...headers, ...burn }, body });
  const text = await res.body.text();
  if (res.statusCode !== expect || (expect === 200 && text.includes('"errors"'))) {
    throw new Error(`${side.label}: ${p} answered ${res.statusCode}: ${text.slice(0, 300)}`);
  }
}

interface Subscribers {
  ids: string[];
  delivered(id: string): Promise<void>;
  close(): void;
}

/** `count` graphql-ws subscriptions, each waiting for its own auth_req_id, spread over `connections` connections. */
async function waitingSubscribers(side: Side, count: number, connections: number): Promise<Subscribers> {
  const wsUrl = `${side.origin.replace(/^http/, 'ws')}/graphql`;
  const sockets = await Promise.all(
    Array.from(
      { length: connections },
      () =>
        new Promise<WebSocket>((resolve, reject) => {
          const ws = new WebSocket(wsUrl, 'graphql-transport-ws', {
            headers: { authorization: `Bearer ${API_KEY}` },
            perMessageDeflate: false,
          });
          ws.once('error', reject);
          ws.on('open', () => ws.send(JSON.stringify({ type: 'connection_init', payload: {} })));
          ws.on('message', function ack(data) {
            if ((JSON.parse(String(data)) as { type: string }).type === 'connection_ack') {
              ws.off('message', ack);
              resolve(ws);
            }
          });
        }),
    ),
  );
  const waiting = new Map<string, { resolve(): void; reject(err: Error): void }>();
  const arrived = new Set<string>();
  for (const ws of sockets) {
    ws.on('message', (data) => {
      const msg = JSON.parse(String(data)) as { type: string; id?: string; payload?: unknown };
      if (msg.type === 'ping') ws.send(JSON.stringify({ type: 'pong' }));
      if (msg.id === undefined || (msg.type !== 'next' && msg.type !== 'error')) return;
      const w = waiting.get(msg.id);
      if (msg.type === 'error' || (msg.payload as { errors?: unknown }).errors) {
        const err = new Error(`${side.label}: subscription ${msg.id}: ${JSON.stringify(msg.payload).slice(0, 300)}`);
        if (w) w.reject(err);
        else throw err;
        return;
      }
      if (w) w.resolve();
      else arrived.add(msg.id);
    });
  }
  const ids = Array.from({ length: count }, () => randomUUID());
  ids.forEach((id, i) => {
    sockets[i % sockets.length]!.send(
      JSON.stringify({ id, type: 'subscribe', payload: { query: SUBSCRIPTION, variables: { authReqId: id } } }),
    );
  });
  return {
    ids,
    delivered: (id) =>
      arrived.delete(id)
        ? Promise.resolve()
        : new Promise<void>((resolve, reject) => waiting.set(id, { resolve, reject })),
    close: () => sockets.forEach((ws) => ws.terminate()),
  };
}

/** One operation of path `p` on one side; `i` numbers the side's operations (delivery: which subscriber). */
function operation(side: Side, p: PathName, i: number, subs?: Subscribers): Promise<void> {
  if (p === 'delivery') {
    const id = subs!.ids[i]!;
    const done = subs!.delivered(id);
    return post(side, p, WEBHOOK_PATH, WEBHOOK_HEADERS, NOTIFICATION.replace('{{uuid}}', id), 204).then(() => done);
  }
  if (p === 'mutation')
    return post(side, p, '/graphql', GRAPHQL_HEADERS, side.mutationBody.replace('{{uuid}}', randomUUID()), 200);
  if (p === 'tree') return post(side, p, '/graphql', GRAPHQL_HEADERS, side.treeBody, 200);
  return post(side, p, WEBHOOK_PATH, WEBHOOK_HEADERS, NOTIFICATION.replace('{{uuid}}', randomUUID()), 204);
}

/** Where the gateways start and warm up: both cores (nothing is measured yet, so they may share the driver's too). */
const bothCores = (place: Placement) => (place.pinned ? `${place.driver},${place.server}` : null);

/**
 * Every side warms every path before the first round, all at once and on both cores (where they started), then goes
 * to the server's core for the rounds.
 */
async function warmUp(sides: Side[], place: Placement): Promise<void> {
  try {
    for (const p of paths) {
      const count = Math.round(WARMUP_OPS[p] * warmScale);
      await Promise.all(
        sides.map(async (side) => {
          const subs =
            p === 'delivery'
              ? await waitingSubscribers(side, count + WARMUP_CONCURRENCY, WARMUP_CONCURRENCY)
              : undefined;
          try {
            await closedLoop(count, WARMUP_CONCURRENCY, (i) => operation(side, p, i, subs));
          } finally {
            subs?.close();
          }
        }),
      );
    }
  } finally {
    if (place.pinned) for (const side of sides) pin(side.proc.pid, place.server!);
  }
}

/** The machine stayed busy: the guard stops its gateways and exits 3, without a verdict. */
class MachineBusy extends Error {}

/**
 * Waits until nothing but the guard's own processes uses the machine (under `BUSY` of a core besides ours); when
 * that does not come within a while, the guard says so and exits 3: a figure taken beside someone else's work is
 * no verdict.
 */
async function quiet(): Promise<void> {
  const other = await waitForQuiet({ threshold: BUSY, sampleMs: 100, maxWaitMs: quietWaitMs });
  if (other.cores >= BUSY) {
    throw new MachineBusy(
      `the machine stays busy (other processes use ${(other.cores * 100).toFixed(0)} % of a core: ${describeOthers(other)}; load average ${loadAverage()}): no verdict; run it again on a quiet machine`,
    );
  }
}

/**
 * One round of one path: the two sides of a pair take turns, a step at a time, on the same core. A step is
 * `CONCURRENCY` operations of one side at once (one, by default), and the side that goes first changes every step, so
 * that each side's operations always follow the other's: whatever disturbs that core (the host, the driver) falls on
 * both sides within a millisecond, and falls out of their ratio, and neither side's operations ever run beside the
 * other's. Both sides running at once, as the guard did until decision 144, let one side's cost move the other's:
 * a side made 5 % slower changed how the two interleaved on the core, and the planted 5 % read 1.022-1.095 on the
 * webhook paths from run to run (on CI once 1.027 on all four pairs alike), where two identical trees read within
 * ±1 %; in turns it read 1.047-1.072 on every path. Each side completes `count` operations. Returns each side's CPU
 * seconds per operation.
 */
async function round(sides: Side[], p: PathName, opsShare = 1): Promise<number[]> {
  for (let attempt = 1; ; attempt++) {
    const measured = await measureRound(sides, p, opsShare);
    if (measured.other.cores < BUSY) return measured.perOp;
    const share = `${(measured.other.cores * 100).toFixed(0)} % of a core (${describeOthers(measured.other)})`;
    if (attempt === ROUND_ATTEMPTS)
      throw new MachineBusy(
        `other processes used ${share} during ${ROUND_ATTEMPTS} rounds of ${p} in a row (load average ${loadAverage()}): no verdict; run it again on a quiet machine`,
      );
    disturbedRounds += 1;
    log(`${p}: other processes used ${share} during a round: measured again`);
  }
}

/** The share of a round's operations that the unmeasured round of each pair and path runs. */
const UNMEASURED_SHARE = 0.25;

/** A round taken while other processes used the machine is measured again: at most this many attempts a round. */
const ROUND_ATTEMPTS = 3;
/** Rounds measured again because the machine was busy meanwhile (printed with the table). */
let disturbedRounds = 0;

/** A measured round's start: a full collection on both sides, both settled, and the machine quiet. */
async function ready(sides: Side[]): Promise<void> {
  const headers = {
    ...(TIER.gcBeforeRound ? { 'x-guard-gc': '1' } : {}),
    ...(slowdown.size > 0 ? { 'x-guard-calibrate': '1' } : {}),
  };
  const collected =
    Object.keys(headers).length > 0
      ? Promise.all(
          sides.map(async (side) => {
            const res = await side.pool.request({ method: 'GET', path: '/readyz', headers });
            await res.body.dump();
          }),
        )
      : Promise.resolve();
  await Promise.all([collected.then(() => settle(sides.map((side) => side.proc.pid))), quiet()]);
}

/**
 * One round as `round` describes it, and what the rest of the machine used meanwhile (in cores): the quiet check
 * before a round cannot see a process that starts during it.
 */
async function measureRound(sides: Side[], p: PathName, share: number): Promise<{ perOp: number[]; other: Others }> {
  const count = Math.round((roundOps.get(p) ?? OPS[p] * opsScale) * share);
  // The subscriptions are opened before the measurement: delivery counts what a waiting app's result costs.
  const subs =
    p === 'delivery'
      ? await Promise.all(sides.map((side) => waitingSubscribers(side, count + CONCURRENCY, CONCURRENCY)))
      : [];
  try {
    // A measured round's gateways collect their garbage and settle while the rest of the machine is checked (its
    // figure leaves the guard's own processes out): both only watch, for 100 ms or more. With a planted slowdown each
    // gateway first times the hash it spins with (bench/lib/guard-hooks.ts), in either tier. An unmeasured round
    // (share < 1) only sizes the rounds and gives a first cost to plant on: it starts at once, which saves a quarter
    // of a second a round (decision 131). What else used the machine during it is still checked, as for any round.
    if (share === 1) await ready(sides);
    const others = othersSince();
    const started = sides.map((side) => processCpu(side.proc.pid));
    const done = sides.map(() => 0);
    for (let step = 0; done.some((n) => n < count); step++) {
      for (const s of step % 2 === 0 ? [0, 1] : [1, 0]) {
        const side = sides[s]!;
        const n = Math.min(CONCURRENCY, count - done[s]!);
        await Promise.all(Array.from({ length: n }, () => operation(side, p, done[s]!++, subs[s])));
      }
    }
    const perOp = sides.map((side, s) => (processCpu(side.proc.pid) - started[s]!) / count);
    return { perOp, other: others() };
  } finally {
    for (const s of subs) s.close();
  }
}

function render(rows: GuardRow[], refLabel: string, treeLabel: string): string {
  const us = (v: number) => v.toFixed(1);
  return [
    `| path | ${refLabel}, µs/op | ${treeLabel}, µs/op | ratio | spread | verdict |`,
    '|---|---:|---:|---:|---:|---|',
    ...rows.map(
      (r) =>
        `| ${r.path} | ${us(r.refUs)} | ${us(r.treeUs)} | ${r.ratio.toFixed(3)} | ±${(r.spread * 100).toFixed(1)} % | ${r.slower ? '**slower**' : r.unresolved ? 'unresolved' : r.ratio < 1 - r.spread - TOLERANCE ? 'faster' : 'same'} |`,
    ),
  ].join('\n');
}

/**
 * Where the sides keep their databases: memory (/dev/shm) where there is one. The guard counts CPU, and a disk's
 * stalls change how commits group (a slow fsync lets more requests share it), which moved a side's CPU per
 * operation by up to 15 % from round to round; on tmpfs SQLite still syncs as configured, at no cost.
 */
function dataParent(): string {
  try {
    fs.accessSync('/dev/shm', fs.constants.W_OK);
    return '/dev/shm';
  } catch {
    return os.tmpdir();
  }
}

async function main(): Promise<void> {
  const place = placement();
  if (place.pinned) pin(process.pid, place.driver!);
  const load = loadAverage();
  const quietAt = lifeS();
  await quiet();
  waitedS = lifeS() - quietAt;
  const ref = await snapshot(cli.against!);
  const own = await snapshot(cli.tree!).catch((err: unknown) => {
    ref.cleanup();
    throw err;
  });
  const withEnv = (label: string, env: Record<string, string>) =>
    Object.keys(env).length
      ? `${label} ${Object.entries(env)
          .map(([k, v]) => `${k}=${v}`)
          .join(' ')}`
      : label;
  own.label = withEnv(own.label, sideEnv.tree);
  ref.label = withEnv(ref.label, sideEnv.ref);
  const root = fs.mkdtempSync(path.join(dataParent(), 'gateway-guard-data-'));
  const procs: Proc[] = [];
  const sides: Side[] = [];
  try {
    const hooks = path.join(root, 'guard-hooks.mjs');
    await compileModule(path.join(ROOT, 'bench', 'lib', 'guard-hooks.ts'), hooks);
    const stub = await spawnNode('upstream', {
      script: 'bench/servers/upstream.ts',
      cpus: place.driver,
      readiness: { line: true },
    });
    procs.push(stub);
    const stubUrl = String(stub.ready.url);
    log(`${own.label} against ${ref.label}, ${cli.tier} tier; ${place.description}; load average ${load}`);
    // PAIRS gateways a side: one process of the same code can run a few per cent apart from another (JIT
    // decisions, memory layout) for its whole life, so the rounds go to the pairs in turn and the spread counts
    // how far the pairs disagree.
    // Which side of a pair starts, and is warmed, first alternates from pair to pair, as the order a round serves
    // them in alternates from round to round: whatever that order does falls on both sides.
    // Each gateway is in `procs` from the moment it runs, and every start settles before a failed one is reported:
    // a start that fails (its port taken three times, say) leaves none of the others running.
    const start = (name: Side['name'], i: number) =>
      name === 'tree'
        ? startSide('tree', i, own, hooks, stubUrl, root, bothCores(place), (p) => procs.push(p))
        : startSide('ref', i, ref, hooks, stubUrl, root, bothCores(place), (p) => procs.push(p));
    const starting = Array.from({ length: PAIRS }, (_, i): [Promise<Side>, Promise<Side>] => {
      if (i % 2 === 0) {
        const tree = start('tree', i);
        return [tree, start('ref', i)];
      }
      const refSide = start('ref', i);
      return [start('tree', i), refSide];
    });
    const failed = (await Promise.allSettled(starting.flat())).find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    const pairs = await Promise.all(starting.map((pair) => Promise.all(pair)));
    pairs.forEach((pair, i) => sides.push(...(i % 2 === 0 ? pair : [...pair].reverse())));
    log(`${sides.length} gateways up`);
    await warmUp(sides, place);
    log(`warm: ${paths.map((p) => `${Math.round(WARMUP_OPS[p] * warmScale)} ${p}`).join(', ')} operations a gateway`);
    const taken: Taken[] = [];
    /**
     * `n` more rounds of a path, the pairs in turn; each round plants on the ref's cost in it. Which side the driver
     * serves first alternates from round to round of a pair, and half the pairs start with the other side, so that
     * the driver's order falls on both sides in every run of PAIRS rounds (a set taken again is half a set).
     */
    async function measureRounds(t: Taken, n: number): Promise<void> {
      const at = performance.now();
      for (let i = 0; i < n; i++) {
        const r = t.byRound.length;
        const pair = r % PAIRS;
        const [tree, refSide] = pairs[pair]!;
        const [s, f] =
          (Math.floor(r / PAIRS) + (pair < PAIRS / 2 ? 0 : 1)) % 2 === 0
            ? await round([tree, refSide], t.p)
            : (await round([refSide, tree], t.p)).reverse();
        const figures = { tree: s! * 1e6, ref: f! * 1e6, pair };
        t.byRound.push(figures);
        t.plant(figures);
      }
      t.roundS = (performance.now() - at) / 1000 / n;
      t.row = rowOf(t.p, t.byRound, VERDICT);
    }
    for (const p of paths) {
      // The planted slowdown (BENCH_GUARD_SLOWDOWN) is a share of what the ref's side of the same pair cost in the
      // round before: the working tree's side really costs that share more than the ref, however the cost drifts.
      const burn = slowdown.get(p);
      const plant = (pair: Side[], refSeconds: number) => {
        if (burn) pair[0]!.burnUs.set(p, refSeconds * 1e6 * burn);
      };
      // One unmeasured round a pair, a quarter of a measured one: the path at the measured concurrency, and a first
      // cost to plant on (each measured round plants on the one before it).
      const refCosts: number[] = [];
      const unmeasuredAt = performance.now();
      for (const pair of pairs) {
        const refSeconds = (await round(pair, p, UNMEASURED_SHARE))[1]!;
        refCosts.push(refSeconds);
        plant(pair, refSeconds);
      }
      const unmeasuredOps = pairs.length * 2 * Math.round(OPS[p] * opsScale * UNMEASURED_SHARE);
      const wallPerOp = (performance.now() - unmeasuredAt) / 1000 / unmeasuredOps;
      const pathsLeft = paths.length - paths.indexOf(p);
      const leftS = Math.max(0, BUDGET_S - runS()) / pathsLeft;
      roundOps.set(
        p,
        Math.min(
          OPS[p] * opsScale,
          (ROUND_CPU_S * (cli.quick ? 0.5 : 1)) / median(refCosts),
          // What fits in this path's share of the budget, but never under a quarter of the path's largest round:
          // fewer operations than that read too wide to see 5 %, and the guard then says so rather than rushing.
          Math.max((OPS[p] * opsScale) / 4, leftS / (rounds * 2 * wallPerOp)),
        ),
      );
      const t: Taken = { p, byRound: [], roundS: 0, plant: (f) => plant(pairs[f.pair]!, f.ref / 1e6) };
      taken.push(t);
      await measureRounds(t, rounds);
    }
    // Then a path not read closely enough takes half a set of rounds more, the paths without a verdict first and then
    // the least closely read, while those rounds fit before LIMIT_S.
    const halfSet = Math.max(1, Math.round(rounds / 2));
    for (;;) {
      const due = taken
        .filter((t) => !settled(t.row!, PRECISION) && t.byRound.length < rounds * MAX_SETS && !t.outOfTime)
        .sort((a, b) => Number(b.row!.unresolved) - Number(a.row!.unresolved) || b.row!.error - a.row!.error);
      const t = due[0];
      if (!t) break;
      const row = t.row!;
      const why = row.unresolved
        ? `neither more than ${TOLERANCE * 100} % slower nor ${SEES * 100} % ruled out`
        : `read to ±${(row.error * 100).toFixed(2)} %, not ±${(PRECISION * 100).toFixed(1)} %`;
      t.outOfTime = runS() + halfSet * t.roundS > LIMIT_S;
      log(
        `${t.p}: ${row.ratio.toFixed(3)} ± ${(row.spread * 100).toFixed(1)} % after ${t.byRound.length} rounds, ${why}${t.outOfTime ? `; no time left for ${halfSet} more rounds` : `: ${halfSet} more rounds`}`,
      );
      if (!t.outOfTime) await measureRounds(t, halfSet);
    }
    const rows = taken.map((t) => t.row!);
    // Each round's ratio, and each pair's median: what a wide spread came from.
    rows.forEach((row, i) =>
      log(
        `${row.path}: working tree ${row.treeUs.toFixed(1)} µs/op, ref ${row.refUs.toFixed(1)} µs/op, ${Math.round(roundOps.get(taken[i]!.p)!)} operations a round; ratio ${row.ratio.toFixed(3)} read to ±${(row.error * 100).toFixed(2)} %; ratios by round ${taken[i]!.byRound.map((f) => (f.tree / f.ref).toFixed(3)).join(' ')}, by pair ${row.pairRatios.map((r) => r.toFixed(3)).join(' ')}`,
      ),
    );
    // The paths whose rounds were taken more than once (see PRECISION).
    const remeasured = rows.filter((r) => r.treeRounds.length > rounds).map((r) => `${r.path} ${r.treeRounds.length}`);
    const elapsed = lifeS();
    const table = render(rows, ref.label, own.label);
    process.stdout.write(
      `\nbench:guard — gateway CPU per operation (${cli.tier} tier), ${rounds} rounds, the sides in turns of ${CONCURRENCY} operation${CONCURRENCY === 1 ? '' : 's'}, ${PAIRS} pairs of processes in turn; load average ${load} at start; ${disturbedRounds} rounds measured again${remeasured.length ? `; rounds taken again (see PRECISION): ${remeasured.join(', ')}` : ''}; ${elapsed.toFixed(0)} s${waitedS >= 1 ? ` (${waitedS.toFixed(0)} s of them waiting for a quiet machine)` : ''}\n\n${table}\n\n`,
    );
    if (cli.json)
      fs.writeFileSync(
        cli.json,
        JSON.stringify(
          {
            against: ref.label,
            tree: own.label,
            tier: cli.tier,
            load,
            rows,
            precision: PRECISION,
            elapsed,
            slowdown: Object.fromEntries(slowdown),
          },
          null,
          2,
        ),
      );
    const slower = rows.filter((r) => r.slower);
    const unresolved = rows.filter((r) => r.unresolved);
    if (slower.length)
      process.stdout.write(
        `${own.label} slower than ${ref.label} by more than its spread plus ${TOLERANCE * 100} %: ${slower.map((r) => r.path).join(', ')}\n`,
      );
    if (unresolved.length)
      process.stdout.write(
        `no verdict on ${unresolved.map((r) => `${r.path} (${r.ratio.toFixed(3)} ± ${(r.spread * 100).toFixed(1)} % after ${r.treeRounds.length} rounds)`).join(', ')}: neither more than ${TOLERANCE * 100} % slower nor a ${SEES * 100} % loss ruled out; run it again on a quiet machine\n`,
      );
    if (!slower.length && !unresolved.length)
      process.stdout.write(
        `${own.label}: no path slower than ${ref.label} beyond its spread plus ${TOLERANCE * 100} %\n`,
      );
    // A verdict stands without the precision; what it says less of is how near 1 a same tree reads.
    const rough = rows.filter((r) => !settled(r, PRECISION) && !r.unresolved);
    if (rough.length)
      process.stdout.write(
        `in the rounds the guard had time for, the host's noise left ${rough.map((r) => `${r.path} read to ±${(r.error * 100).toFixed(2)} % (${r.treeRounds.length} rounds)`).join(', ')}, not ±${(PRECISION * 100).toFixed(1)} %\n`,
      );
    // A path proven slower is the verdict that matters most; otherwise a path without one leaves the run without one.
    process.exitCode = slower.length ? 1 : unresolved.length ? 3 : 0;
  } finally {
    for (const s of sides) await s.pool.close().catch(() => undefined);
    // The gateways together (each closes its database and connections), then the stub they called.
    await Promise.all(procs.slice(1).map((p) => p.stop().catch(() => undefined)));
    await procs[0]?.stop().catch(() => undefined);
    fs.rmSync(root, { recursive: true, force: true });
    ref.cleanup();
    own.cleanup();
  }
}

main().catch((err: unknown) => {
  if (err instanceof MachineBusy) {
    process.stderr.write(`bench:guard: ${err.message}\n`);
    process.exit(3);
  }
  process.stderr.write(
    `bench:guard could not measure: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exit(2);
});
