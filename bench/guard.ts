/**
 * `npm run bench:guard -- --against <git ref>`: is the working tree slower than `<ref>` on a hot path?
 *
 * The ref (default HEAD~1) is unpacked with `git archive` into a temporary folder that reuses this checkout's
 * node_modules. One gateway process per side (the working tree and the ref), both on the same core, the same
 * upstream stub, the same requests; the sides take turns, round after round (ABBA, so drift falls on both). What is
 * compared is the gateway's **CPU time per operation** (every thread of its process, from /proc), which a shared
 * machine disturbs far less than throughput. Paths:
 *
 *   mutation   createNetwork with a fresh idempotency key (scenario 1's request)
 *   tree       the project tree of 50 resources (scenario 3's query)
 *   intake     a positive mobile-ID notification, nobody waiting (scenario 4's request)
 *   delivery   a notification with its one subscriber waiting on graphql-ws: intake, matching, execution, the frame
 *
 * It prints a table (µs per operation on each side, the median of the per-round ratios, and their spread:
 * half their range, from five rounds on without the highest and the lowest)
 * and exits 1 when a path is slower by more than its spread plus 3 %; 2 when it could not measure.
 *
 * Options: --against <ref> (`.` measures the working tree against itself), --tree <ref> (measure that commit in the
 * working tree's place: a bisection between two commits), --rounds <n> (default 6), --paths a,b,
 * --env NAME=VALUE[,NAME=VALUE] (the working tree's side only: an off switch or a setting against the same code, with
 * `--against .`), --ref-env (the same for the ref's side), --concurrency <n> (operations in flight, default 16),
 * --quick (fewer operations per round: the guard's own test), --json <file> (the figures, for tests), --profile <dir>
 * (each side's V8 CPU profile in <dir>/tree and <dir>/ref, for bench/profile-summary.ts).
 * BENCH_GUARD_SLOWDOWN=<path>:<percent> makes the working tree's side spend that much more CPU on one path
 * (bench/lib/guard-slowdown.ts): only the guard's test sets it.
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

import { closedLoop, processCpu } from './lib/cpu.js';
import { API_KEY, gatewayEnv, NOTIFICATION_TOKEN } from './lib/env.js';
import { graphql } from './lib/harness.js';
import { freePort, pin, placement, ROOT, spawnNode, type Proc } from './lib/processes.js';
import { median } from './lib/stats.js';
import { SUBSCRIPTION } from './scenarios/fanout.js';
import { CREATE_NETWORK } from './scenarios/mutation.js';
import { PROJECT_TREE, seedTree } from './scenarios/query.js';
import { notificationBody, WEBHOOK_PATH } from './scenarios/webhook.js';

const PATHS = ['mutation', 'tree', 'intake', 'delivery'] as const;
type PathName = (typeof PATHS)[number];
/** Operations in flight at once on every path (--concurrency): the same on both sides, so group commit shares the same way. */
let CONCURRENCY = 16;
/** Operations per round and path: about 0.3–0.6 s of one core each, so that the whole guard stays under 75 s. */
const OPS: Record<PathName, number> = { mutation: 800, tree: 1200, intake: 1200, delivery: 800 };
/** A path is slower when its ratio exceeds 1 by more than its spread plus this. */
const TOLERANCE = 0.03;

const { values: cli } = parseArgs({
  options: {
    against: { type: 'string', default: 'HEAD~1' },
    tree: { type: 'string', default: '.' },
    rounds: { type: 'string', default: '6' },
    paths: { type: 'string' },
    quick: { type: 'boolean', default: false },
    json: { type: 'string' },
    profile: { type: 'string' },
    env: { type: 'string' },
    'ref-env': { type: 'string' },
    concurrency: { type: 'string' },
  },
});

function fail(message: string): never {
  process.stderr.write(`bench:guard: ${message}\n`);
  process.exit(2);
}

const rounds = Number(cli.rounds);
if (!Number.isInteger(rounds) || rounds < 2)
  fail(`--rounds wants a whole number ≥ 2, got ${JSON.stringify(cli.rounds)}`);
const paths = (cli.paths ? cli.paths.split(',').map((s) => s.trim()) : [...PATHS]) as PathName[];
for (const p of paths)
  if (!PATHS.includes(p)) fail(`--paths: unknown path ${JSON.stringify(p)} (known: ${PATHS.join(', ')})`);
const opsScale = cli.quick ? 0.5 : 1;
if (cli.concurrency !== undefined) {
  CONCURRENCY = Number(cli.concurrency);
  if (!Number.isInteger(CONCURRENCY) || CONCURRENCY < 1)
    fail(`--concurrency wants a whole number ≥ 1, got ${JSON.stringify(cli.concurrency)}`);
}
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

const slowdown = (() => {
  const raw = process.env.BENCH_GUARD_SLOWDOWN;
  if (!raw) return null;
  const m = /^(\w+):(\d+(?:\.\d+)?)$/.exec(raw);
  if (!m || !PATHS.includes(m[1] as PathName))
    fail(`BENCH_GUARD_SLOWDOWN wants <path>:<percent> (paths: ${PATHS.join(', ')}), got ${JSON.stringify(raw)}`);
  return { path: m[1] as PathName, share: Number(m[2]) / 100 };
})();

const started = Date.now();
const log = (line: string) =>
  process.stderr.write(`[${((Date.now() - started) / 1000).toFixed(0).padStart(3)} s] ${line}\n`);

/** Every gateway process of the guard, so that a round starts only once both sides are quiet. */
const gatewayPids: number[] = [];

/**
 * Until every gateway uses under 5 % of a core for two 50 ms samples in a row (at most `maxMs`): a side's round
 * must not start while the other side still finishes its own (a checkpoint, the last commits), on the same core.
 */
async function settle(maxMs = 3_000): Promise<void> {
  const deadline = performance.now() + maxMs;
  let quiet = 0;
  while (quiet < 2 && performance.now() < deadline) {
    const before = gatewayPids.map(processCpu);
    await sleep(50);
    quiet = gatewayPids.every((pid, i) => processCpu(pid) - before[i]! < 0.0025) ? quiet + 1 : 0;
  }
}

/** The ref unpacked beside node_modules; `.` is the working tree itself. */
function snapshot(ref: string): { dir: string; label: string; cleanup(): void } {
  if (ref === '.') return { dir: ROOT, label: 'working tree', cleanup: () => undefined };
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
  fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
  return { dir, label: `${ref} (${sha.slice(0, 7)})`, cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

interface Side {
  name: 'tree' | 'ref';
  label: string;
  proc: Proc;
  origin: string;
  pool: Pool;
  /** µs of CPU the slowdown adds per request of its path (working tree only, when BENCH_GUARD_SLOWDOWN is set). */
  burnUs: number;
  treeBody: string;
  mutationBody: string;
}

async function startSide(
  name: Side['name'],
  label: string,
  checkout: string,
  stubUrl: string,
  root: string,
  cpus: string | null,
): Promise<Side> {
  const dataDir = path.join(root, name);
  fs.mkdirSync(dataDir);
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const burns = name === 'tree' && slowdown !== null;
  const proc = await spawnNode(`gateway (${label})`, {
    script: 'src/main.ts',
    cwd: checkout,
    cpus,
    nodeArgs: [
      ...(burns ? ['--import', pathToFileURL(path.join(ROOT, 'bench', 'lib', 'guard-slowdown.ts')).href] : []),
      ...(cli.profile ? ['--cpu-prof', '--cpu-prof-dir', path.resolve(cli.profile, name)] : []),
    ],
    env: { ...gatewayEnv({ port, dataDir, stubUrl }), SQLITE_SYNCHRONOUS: 'FULL', ...sideEnv[name] },
    readiness: { url: `${origin}/readyz` },
    timeoutMs: 60_000,
  });
  gatewayPids.push(proc.pid);
  const pool = new Pool(origin, { connections: CONCURRENCY, pipelining: 1 });
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
    burnUs: 0,
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
  const burn = side.burnUs > 0 && slowdown?.path === p ? { 'x-guard-burn-us': String(Math.round(side.burnUs)) } : {};
  const res = await side.pool.request({ method: 'POST', path: urlPath, headers: { ...headers, ...burn }, body });
  const text = await res.body.text();
  if (res.statusCode !== expect || (expect === 200 && text.includes('"errors"'))) {
    throw new Error(`${side.label}: ${p} answered ${res.statusCode}: ${text.slice(0, 300)}`);
  }
}

/** `count` graphql-ws subscriptions, each waiting for its own auth_req_id, spread over CONCURRENCY connections. */
async function waitingSubscribers(
  side: Side,
  count: number,
): Promise<{ ids: string[]; delivered(id: string): Promise<void>; close(): void }> {
  const wsUrl = `${side.origin.replace(/^http/, 'ws')}/graphql`;
  const sockets = await Promise.all(
    Array.from(
      { length: CONCURRENCY },
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

/** One round of one path on one side: the gateway's CPU seconds per operation. */
async function round(side: Side, p: PathName): Promise<number> {
  const count = Math.round(OPS[p] * opsScale);
  const pid = side.proc.pid;
  if (p === 'delivery') {
    // The subscriptions are opened before the measurement: it counts what a waiting app's result costs.
    const subs = await waitingSubscribers(side, count);
    await settle();
    const before = processCpu(pid);
    await closedLoop(count, CONCURRENCY, async (i) => {
      const id = subs.ids[i]!;
      const done = subs.delivered(id);
      await post(side, p, WEBHOOK_PATH, WEBHOOK_HEADERS, NOTIFICATION.replace('{{uuid}}', id), 204);
      await done;
    });
    const cpu = processCpu(pid) - before;
    subs.close();
    return cpu / count;
  }
  await settle();
  const before = processCpu(pid);
  if (p === 'mutation')
    await closedLoop(count, CONCURRENCY, () =>
      post(side, p, '/graphql', GRAPHQL_HEADERS, side.mutationBody.replace('{{uuid}}', randomUUID()), 200),
    );
  else if (p === 'tree')
    await closedLoop(count, CONCURRENCY, () => post(side, p, '/graphql', GRAPHQL_HEADERS, side.treeBody, 200));
  else
    await closedLoop(count, CONCURRENCY, () =>
      post(side, p, WEBHOOK_PATH, WEBHOOK_HEADERS, NOTIFICATION.replace('{{uuid}}', randomUUID()), 204),
    );
  return (processCpu(pid) - before) / count;
}

export interface GuardRow {
  path: PathName;
  /** µs per operation, median of the rounds. */
  refUs: number;
  treeUs: number;
  ratio: number;
  /** Half the range of the per-round ratios. */
  spread: number;
  slower: boolean;
  refRounds: number[];
  treeRounds: number[];
}

/** Half the range of the per-round ratios; from five rounds on, without the highest and the lowest (one odd round each way). */
function halfRange(ratios: number[]): number {
  const sorted = [...ratios].sort((a, b) => a - b);
  const kept = sorted.length >= 5 ? sorted.slice(1, -1) : sorted;
  return (kept[kept.length - 1]! - kept[0]!) / 2;
}

function render(rows: GuardRow[], refLabel: string, treeLabel: string): string {
  const us = (v: number) => v.toFixed(1);
  return [
    `| path | ${refLabel}, µs/op | ${treeLabel}, µs/op | ratio | spread | verdict |`,
    '|---|---:|---:|---:|---:|---|',
    ...rows.map(
      (r) =>
        `| ${r.path} | ${us(r.refUs)} | ${us(r.treeUs)} | ${r.ratio.toFixed(3)} | ±${(r.spread * 100).toFixed(1)} % | ${r.slower ? '**slower**' : r.ratio < 1 - r.spread - TOLERANCE ? 'faster' : 'same'} |`,
    ),
  ].join('\n');
}

async function main(): Promise<void> {
  const place = placement();
  if (place.pinned) pin(process.pid, place.driver!);
  const load = os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
  const ref = snapshot(cli.against!);
  const own = snapshot(cli.tree!);
  const withEnv = (label: string, env: Record<string, string>) =>
    Object.keys(env).length
      ? `${label} ${Object.entries(env)
          .map(([k, v]) => `${k}=${v}`)
          .join(' ')}`
      : label;
  own.label = withEnv(own.label, sideEnv.tree);
  ref.label = withEnv(ref.label, sideEnv.ref);
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-guard-data-'));
  const procs: Proc[] = [];
  const sides: Side[] = [];
  try {
    const stub = await spawnNode('upstream', {
      script: 'bench/servers/upstream.ts',
      cpus: place.driver,
      readiness: { line: true },
    });
    procs.push(stub);
    const stubUrl = String(stub.ready.url);
    log(`${own.label} against ${ref.label}; ${place.description}; load average ${load}`);
    const [tree, refSide] = await Promise.all([
      startSide('tree', own.label, own.dir, stubUrl, root, place.server),
      startSide('ref', ref.label, ref.dir, stubUrl, root, place.server),
    ]);
    sides.push(tree, refSide);
    procs.push(tree.proc, refSide.proc);
    const figures = new Map<string, number[]>();
    for (const p of paths) {
      // Warm-up, twice a round's operations: JIT and caches on both sides; the second gives the slowdown its size.
      for (const side of sides) {
        await round(side, p);
        // Delivery opens fresh connections and subscriptions every round: its cost settles later than the others'.
        if (p === 'delivery') await round(side, p);
        const warm = await round(side, p);
        if (side.name === 'tree' && slowdown?.path === p) side.burnUs = warm * 1e6 * slowdown.share;
      }
      for (let r = 0; r < rounds; r++) {
        const order = r % 2 === 0 ? [tree, refSide] : [refSide, tree];
        for (const side of order) {
          const key = `${side.name}:${p}`;
          figures.set(key, [...(figures.get(key) ?? []), (await round(side, p)) * 1e6]);
        }
      }
      log(
        `${p}: working tree ${median(figures.get(`tree:${p}`)!).toFixed(1)} µs/op, ref ${median(figures.get(`ref:${p}`)!).toFixed(1)} µs/op`,
      );
    }
    const rows: GuardRow[] = paths.map((p) => {
      const treeRounds = figures.get(`tree:${p}`)!;
      const refRounds = figures.get(`ref:${p}`)!;
      const ratios = treeRounds.map((t, i) => t / refRounds[i]!);
      // The ratio of each round's pair (the two sides one after the other), then their median: a drift over the
      // rounds (JIT, the ledger growing) falls on both sides of a pair and out of the ratio.
      const ratio = median(ratios);
      const spread = halfRange(ratios);
      return {
        path: p,
        refUs: median(refRounds),
        treeUs: median(treeRounds),
        ratio,
        spread,
        slower: ratio - 1 > spread + TOLERANCE,
        refRounds,
        treeRounds,
      };
    });
    const elapsed = (Date.now() - started) / 1000;
    const table = render(rows, ref.label, own.label);
    process.stdout.write(
      `\nbench:guard — gateway CPU per operation, ${rounds} alternating rounds, ${CONCURRENCY} in flight; load average ${load} at start; ${elapsed.toFixed(0)} s\n\n${table}\n\n`,
    );
    if (cli.json)
      fs.writeFileSync(
        cli.json,
        JSON.stringify({ against: ref.label, tree: own.label, load, rows, elapsed, slowdown }, null, 2),
      );
    const slower = rows.filter((r) => r.slower);
    if (slower.length) {
      process.stdout.write(
        `${own.label} slower than ${ref.label} by more than its spread plus ${TOLERANCE * 100} %: ${slower.map((r) => r.path).join(', ')}\n`,
      );
      process.exitCode = 1;
    } else
      process.stdout.write(
        `${own.label}: no path slower than ${ref.label} beyond its spread plus ${TOLERANCE * 100} %\n`,
      );
  } finally {
    for (const s of sides) await s.pool.close().catch(() => undefined);
    for (const p of procs.reverse()) await p.stop().catch(() => undefined);
    fs.rmSync(root, { recursive: true, force: true });
    ref.cleanup();
    own.cleanup();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(
    `bench:guard could not measure: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exit(2);
});
