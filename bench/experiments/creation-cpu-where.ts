/**
 * Where a durable creation's CPU goes, on the build `npm start` runs (docs/decisions/081): the gateway from dist/
 * (`npm run build` first), unpinned, SQLITE_SYNCHRONOUS=FULL, data on the bench's disk, the bench's upstream stub,
 * scenario 1's createNetwork with a fresh key each time, a closed loop of `--inflight`. After a warm-up block, per
 * block of `--n`: the CPU of the whole process per creation (/proc schedstat, every thread) and of its main thread,
 * and the bytes it wrote: /proc/<pid>/io `write_bytes` (the kernel's count of pages dirtied: over the WAL written ahead,
 * decision 141, it reads ~3 times what reaches the disk) and `wchar` (the bytes its write calls passed), and the disk's
 * own count of sectors written (/proc/diskstats, every process's writes to the device under the data directory).
 * With `--perf <file>`, `perf record -g` samples the gateway's threads over the measured blocks (the gateway then runs
 * with --perf-basic-prof-only-functions so that perf names its JavaScript); read it with `perf report -i <file>`.
 * perf counts on-CPU samples per thread; the V8 sampler (`--cpu-prof`) charges to the main thread the moments it
 * was preempted (a woken peer of a loopback write, libuv's pool thread), which is why its figures are not used here.
 *
 * With `--strace <file>`, `strace -c -f` counts the system calls of the gateway's threads over one more block of `--n`
 * (written to the file; divide by `--n` for calls per creation). Its overhead slows that block, so it is not timed.
 *
 * With `--baseline`, the same for the durable baseline (bench/servers/durable-baseline.ts, run through tsx, FULL) in
 * place of the gateway.
 *
 *   npx tsx bench/experiments/creation-cpu-where.ts [--rounds 4] [--n 3000] [--inflight 16] [--perf /tmp/creation.data]
 *     [--strace /tmp/creation.strace] [--baseline] [--env NAME=VALUE[,NAME=VALUE]]
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';

import { closedLoop, mainThreadCpu, processCpu } from '../lib/cpu.js';
import { API_KEY, envPairs, gatewayEnv } from '../lib/env.js';
import { graphql } from '../lib/harness.js';
import { durableBaselineArgs, seedDurableBaseline } from '../lib/mutation-references.js';
import { freePort, ioField, ROOT, spawnNode } from '../lib/processes.js';
import { CREATE_NETWORK } from '../scenarios/mutation.js';

const { values: cli } = parseArgs({
  options: {
    rounds: { type: 'string', default: '4' },
    n: { type: 'string', default: '3000' },
    inflight: { type: 'string', default: '16' },
    perf: { type: 'string' },
    baseline: { type: 'boolean', default: false },
    strace: { type: 'string' },
    env: { type: 'string' },
  },
});
/** `--env NAME=VALUE[,NAME=VALUE]`: more of the gateway's variables (SQLITE_WAL_RESTART_FRAMES=4096, …). */
const extraEnv = envPairs(cli.env);
const rounds = Number(cli.rounds);
const n = Number(cli.n);
const inflight = Number(cli.inflight);
if (!fs.existsSync(path.join(ROOT, 'dist/src/main.js'))) throw new Error('no dist/src/main.js: run `npm run build`');

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'creation-cpu-where-'));
const stub = await spawnNode('upstream', {
  script: 'bench/servers/upstream.ts',
  cpus: null,
  readiness: { line: true },
});
const nodeArgs = cli.perf ? ['--perf-basic-prof-only-functions'] : [];
let origin: string;
let pid: number;
let requestPath: string;
let body: string;
let stop: () => Promise<void>;
if (cli.baseline) {
  // The baseline's arguments as bench/breakdown.ts gives them (FULL is its default), its data in this run's directory.
  const baseline = await spawnNode('durable baseline', {
    script: 'bench/servers/durable-baseline.ts',
    cwd: ROOT,
    cpus: null,
    nodeArgs,
    args: durableBaselineArgs(String(stub.ready.url), root),
    readiness: { line: true },
    timeoutMs: 60_000,
  });
  origin = String(baseline.ready.url);
  pid = baseline.child.pid!;
  stop = () => baseline.stop();
  const projectId = randomUUID();
  await seedDurableBaseline(origin, projectId);
  requestPath = '/mutation';
  body = JSON.stringify({
    query: CREATE_NETWORK,
    variables: { input: { projectId, title: 'where-net' }, key: '{{uuid}}' },
  });
} else {
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  const gateway = await spawnNode('gateway', {
    script: 'dist/src/main.js',
    cwd: ROOT,
    cpus: null,
    nodeArgs,
    env: {
      ...gatewayEnv({ port, dataDir: root, stubUrl: String(stub.ready.url) }),
      SQLITE_SYNCHRONOUS: 'FULL',
      ...extraEnv,
    },
    readiness: { url: `${origin}/readyz` },
    timeoutMs: 60_000,
  });
  pid = gateway.child.pid!;
  stop = () => gateway.stop();
  const project = await graphql<{ createProject: { project: { id: string } } }>(
    origin,
    API_KEY,
    'mutation($input: CreateProjectInput!) { createProject(input: $input) { project { id } } }',
    { input: { name: 'where', description: 'creation-cpu-where' } },
  );
  requestPath = '/graphql';
  body = JSON.stringify({
    query: CREATE_NETWORK,
    variables: { input: { projectId: project.createProject.project.id, title: 'where-net' }, key: '{{uuid}}' },
  });
}
const pool = new Pool(origin, { connections: Math.max(inflight, 64) });
async function one(): Promise<void> {
  const res = await pool.request({
    method: 'POST',
    path: requestPath,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
    body: body.replace('{{uuid}}', randomUUID()),
  });
  const text = await res.body.text();
  if (res.statusCode !== 200 || text.includes('"errors"')) throw new Error(`${res.statusCode} ${text}`);
}

await closedLoop(n, inflight, one);
const perf = cli.perf
  ? spawn('perf', ['record', '-F', '2000', '-g', '-p', String(pid), '-o', cli.perf], { stdio: 'ignore' })
  : null;
if (perf) await sleep(1000);
for (let r = 0; r < rounds; r++) {
  const cpu0 = processCpu(pid);
  const main0 = mainThreadCpu(pid);
  const io0 = ioField(pid, 'write_bytes');
  const wchar0 = ioField(pid, 'wchar');
  const disk0 = diskSectorsWritten();
  await closedLoop(n, inflight, one);
  const cpu = ((processCpu(pid) - cpu0) / n) * 1e6;
  const main = ((mainThreadCpu(pid) - main0) / n) * 1e6;
  const written = (ioField(pid, 'write_bytes') - io0) / n;
  const wchar = (ioField(pid, 'wchar') - wchar0) / n;
  const disk = ((diskSectorsWritten() - disk0) * 512) / n;
  console.log(
    `block ${r}: ${cpu.toFixed(0)} µs per creation, main thread ${main.toFixed(0)} µs, ${written.toFixed(0)} B written` +
      ` (${wchar.toFixed(0)} B through write calls; the disk wrote ${disk.toFixed(0)} B, every process's)`,
  );
}
if (perf) {
  perf.kill('SIGINT');
  await new Promise((resolve) => perf.once('exit', resolve));
}
if (cli.strace) {
  const strace = spawn('strace', ['-c', '-f', '-p', String(pid), '-o', cli.strace], { stdio: 'ignore' });
  await sleep(1000);
  await closedLoop(n, inflight, one);
  strace.kill('SIGINT');
  await new Promise((resolve) => strace.once('exit', resolve));
  console.log(`strace: ${n} creations counted in ${cli.strace}`);
}
await pool.close();
await stop();
await stub.stop();
fs.rmSync(root, { recursive: true, force: true });
process.exit(0);

/** Sectors written to the device that holds the data directory (/proc/diskstats; every process's writes). */
function diskSectorsWritten(): number {
  const device = fs.statSync(root).dev;
  const [major, minor] = [Math.floor(device / 256) & 0xfff, (device & 0xff) | ((device >> 12) & 0xfff00)];
  for (const line of fs.readFileSync('/proc/diskstats', 'utf8').split('\n')) {
    const f = line.trim().split(/\s+/);
    if (Number(f[0]) === major && Number(f[1]) === minor) return Number(f[9]);
  }
  return NaN;
}
