/**
 * `npm run bench:breakdown`: where a mutation's, a tree query's and a mobile-ID notification's time goes, stage by
 * stage, in the gateway and in its baseline (the durable baseline for createNetwork, the hand-written SQLite reader
 * for the tree query, the hand-written webhook of bench/servers/baseline.ts for a notification).
 *
 * Each server runs as in the benchmark (its own process on the server core, the same stub upstream), with
 * `--inspect` on loopback. After a warm-up, the V8 sampling profiler runs over N operations only (started and
 * stopped through the inspector, so nothing else is in the window), and every sample of the main thread is given to
 * one stage: the innermost frame on its stack that a stage claims (src/store, kysely and better-sqlite3 frames
 * belong to whoever called them: the idempotency claim or the event log when the stack still shows it; kysely awaits
 * before it runs a statement, so past that await the caller is gone and the statement counts as "ledger and SQLite
 * statements"). A sample is main-thread time while not
 * idle, so a synchronous wait there (an fsync inside COMMIT) counts; the process's CPU from /proc over the same
 * window (every thread) is the last row.
 *
 * Options: --ops <n> (operations per measurement, default 4000), --no-write (print only; default writes the
 * tables into bench/README.md between the `breakdown` markers).
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { API_KEY, NOTIFICATION_TOKEN, UPSTREAM_TOKEN, gatewayEnv } from './lib/env.js';
import { closedLoop, processCpu } from './lib/cpu.js';
import { graphql } from './lib/harness.js';
import { Inspector } from './lib/inspector.js';
import { ROOT, freePort, pin, placement, spawnNode, waitUntilIdle, type Proc } from './lib/processes.js';
import { CREATE_NETWORK } from './scenarios/mutation.js';
import { PROJECT_TREE, seedTree } from './scenarios/query.js';
import { WEBHOOK_PATH, notificationBody } from './scenarios/webhook.js';

const { values: cli } = parseArgs({ options: { ops: { type: 'string', default: '4000' }, 'no-write': { type: 'boolean', default: false } } });
const OPS = Number(cli.ops);
const CONCURRENCY = 16;

interface Frame {
  functionName: string;
  url: string;
}
interface ProfileNode {
  id: number;
  callFrame: Frame;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

export const STAGES = [
  'HTTP read',
  'authentication',
  'plan lookup',
  'admission (scopes, cost, rate limit)',
  'variable coercion',
  'notification parse and checks',
  'sealing and digests',
  'event log write',
  'bus, matching and delivery',
  'resolver and execution',
  'idempotency claim',
  'upstream call',
  'ledger and SQLite statements',
  'SQLite commit (group commit, WAL sync)',
  'response',
  'metrics and tracing',
  'GC',
  'other (V8, timers, node internals)',
] as const;
type Stage = (typeof STAGES)[number];

/** A frame a stage claims at once. */
const CLAIMS: Array<[Stage, (f: Frame) => boolean]> = [
  ['GC', (f) => f.functionName === '(garbage collector)'],
  ['SQLite commit (group commit, WAL sync)', (f) => /^(fdatasync|fsync)$/.test(f.functionName) || (/sqlite-dialect/.test(f.url) && /commit|flush|sync/i.test(f.functionName)) || (/durable-baseline/.test(f.url) && f.functionName === 'flush')],
  ['metrics and tracing', (f) => /prom-client|@opentelemetry|pino|src\/metrics|src\/telemetry|src\/logger|execution\/tracing|server\/tracing/.test(f.url)],
  ['variable coercion', (f) => /^(coerceVariableValues|getVariableValues|coerceInputValue|coerceInputValueImpl)$/.test(f.functionName)],
  ['authentication', (f) => /server\/auth|server\/jwt-auth|src\/caller|mobile-id\/tokens/.test(f.url)],
  ['sealing and digests', (f) => /mobile-id\/sealing|src\/fingerprint|canonicalize/.test(f.url) || /^(Hmac|Hash|createCipherBase|Cipheriv|Decipheriv)$/.test(f.functionName)],
  ['notification parse and checks', (f) => /mobile-id\/(wire|verify|intake)|webhooks\/body|zod/.test(f.url) || (/servers\/baseline/.test(f.url) && f.functionName === 'webhook')],
  ['event log write', (f) => /events\/log/.test(f.url) || f.functionName === 'insertNotification'],
  ['bus, matching and delivery', (f) => /events\/(bus|index|stream)|graphql\/subscriptions|server\/ws/.test(f.url)],
  ['admission (scopes, cost, rate limit)', (f) => /execution\/(admit|scopes|limits|cost-formula)|src\/ratelimit/.test(f.url)],
  ['plan lookup', (f) => /execution\/prepare|server\/trusted-documents/.test(f.url) || (/server\/http-plans/.test(f.url) && /plan|lookup|prepare|document/i.test(f.functionName))],
  ['ledger and SQLite statements', (f) => /store\/idempotency/.test(f.url) && /complet|finish|done|record/i.test(f.functionName)],
  ['idempotency claim', (f) => /upstream\/idempotency|store\/idempotency/.test(f.url) || f.functionName === 'claimKey'],
  ['upstream call', (f) => /undici|upstream\/http|cloud\/client/.test(f.url)],
  ['ledger and SQLite statements', (f) => /store\/ledger|store\/provisionings/.test(f.url) || f.functionName === 'recordNetwork'],
  ['response', (f) => /execution\/present|node:_http_outgoing/.test(f.url) || (/server\/(http-plans|respond)|servers\/http/.test(f.url) && /^(send|answer|sendJson|respond)/.test(f.functionName))],
  ['resolver and execution', (f) => /src\/graphql\/|src\/cloud\/|graphql-jit|dataloader|graphql\/execution|execution\/run|execution\/shared|@apollo\/server/.test(f.url) || /^(mutation|query)$/.test(f.functionName)],
  ['HTTP read', (f) => /server\/(http|graphql|http-plans|respond)\.ts|servers\/http\.ts|node:_http_(incoming|server|common)/.test(f.url)],
];
/** Frames that belong to whoever called them: the storage layer (the ledger when no caller claims them). */
const STORAGE = (f: Frame) => /sqlite-dialect|store\/|kysely|better-sqlite3/.test(f.url);

function stageOf(stack: Frame[]): Stage {
  let storage = false;
  for (const f of stack) {
    const claimed = CLAIMS.find(([, test]) => test(f));
    if (claimed) {
      // A statement run for a stage that is not the storage's own (the resolver reading the ledger) is ledger work.
      if (storage && !['idempotency claim', 'ledger and SQLite statements', 'event log write', 'SQLite commit (group commit, WAL sync)'].includes(claimed[0])) return 'ledger and SQLite statements';
      return claimed[0];
    }
    if (STORAGE(f)) storage = true;
  }
  return storage ? 'ledger and SQLite statements' : 'other (V8, timers, node internals)';
}

/** Microseconds of main-thread time per stage in `profile` (idle samples left out). */
function attribute(profile: Profile): Map<Stage, number> {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const stageOfNode = new Map<number, Stage | null>();
  const out = new Map<Stage, number>();
  profile.samples.forEach((id, i) => {
    let stage = stageOfNode.get(id);
    if (stage === undefined) {
      const leaf = byId.get(id)!.callFrame.functionName;
      if (leaf === '(idle)') stage = null;
      else if (leaf === '(program)') stage = 'other (V8, timers, node internals)';
      else {
        const stack: Frame[] = [];
        for (let n: number | undefined = id; n !== undefined; n = parent.get(n)) stack.push(byId.get(n)!.callFrame);
        stage = stageOf(stack);
      }
      stageOfNode.set(id, stage);
    }
    const dt = profile.timeDeltas[i + 1] ?? profile.timeDeltas[i] ?? 0;
    if (stage) out.set(stage, (out.get(stage) ?? 0) + dt);
  });
  return out;
}

interface Server {
  name: string;
  proc: Proc;
  origin: string;
  inspector: Inspector;
}

async function measure(server: Server, request: () => Promise<void>): Promise<{ stages: Map<Stage, number>; cpuUs: number }> {
  await closedLoop(Math.min(OPS, 2000), CONCURRENCY, request); // warm-up
  await waitUntilIdle(server.proc.pid, 5_000);
  await server.inspector.send('Profiler.enable');
  await server.inspector.send('Profiler.setSamplingInterval', { interval: 100 });
  await server.inspector.send('Profiler.start');
  const before = processCpu(server.proc.pid);
  await closedLoop(OPS, CONCURRENCY, request);
  const cpuUs = ((processCpu(server.proc.pid) - before) * 1e6) / OPS;
  const { profile } = await server.inspector.send<{ profile: Profile }>('Profiler.stop');
  const stages = new Map([...attribute(profile)].map(([s, us]) => [s, us / OPS]));
  return { stages, cpuUs };
}

async function start(name: string, script: string, args: string[], env: Record<string, string>, cpus: string | null, readiness: { url: string } | { line: true }): Promise<Server> {
  const inspectPort = await freePort();
  const proc = await spawnNode(name, { script, args, env, cpus, nodeArgs: [`--inspect=127.0.0.1:${inspectPort}`], readiness, timeoutMs: 60_000 });
  const origin = 'url' in readiness ? new URL(readiness.url).origin : String(proc.ready.url);
  return { name, proc, origin, inspector: await Inspector.connect(inspectPort) };
}

function table(title: string, columns: Array<{ name: string; m: { stages: Map<Stage, number>; cpuUs: number } }>): string {
  const us = (v: number | undefined) => (v === undefined || v < 0.05 ? '–' : v.toFixed(1));
  const shown = STAGES.filter((s) => columns.some((c) => (c.m.stages.get(s) ?? 0) >= 0.05));
  const lines = [
    `**${title}**: µs per operation of the main thread's time, sampled (${OPS} operations, ${CONCURRENCY} in flight). A sample is time the thread was not idle, so a synchronous wait on the main thread (the durable baseline's fsync inside its COMMIT) counts, while the gateway syncs the WAL on libuv's pool; the last row is the process's CPU from /proc.`, '', `| stage | ${columns.map((c) => c.name).join(' | ')} |`, `|---|${columns.map(() => '---:').join('|')}|`];
  for (const s of shown) lines.push(`| ${s} | ${columns.map((c) => us(c.m.stages.get(s))).join(' | ')} |`);
  const mainThread = columns.map((c) => [...c.m.stages.values()].reduce((a, b) => a + b, 0));
  lines.push(`| *main thread, sampled, in all* | ${mainThread.map((v) => us(v)).join(' | ')} |`);
  lines.push(`| **process CPU (/proc)** | ${columns.map((c) => `**${c.m.cpuUs.toFixed(1)}**`).join(' | ')} |`);
  return lines.join('\n');
}

async function main(): Promise<void> {
  const place = placement();
  if (place.pinned) pin(process.pid, place.driver!);
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-breakdown-'));
  const procs: Proc[] = [];
  try {
    const stub = await spawnNode('upstream', { script: 'bench/servers/upstream.ts', cpus: place.driver, readiness: { line: true } });
    procs.push(stub);
    const stubUrl = String(stub.ready.url);
    const port = await freePort();
    const gwDir = path.join(root, 'gateway');
    fs.mkdirSync(gwDir);
    const gateway = await start('gateway', 'src/main.ts', [], { ...gatewayEnv({ port, dataDir: gwDir, stubUrl }), SQLITE_SYNCHRONOUS: 'FULL' }, place.server, { url: `http://127.0.0.1:${port}/readyz` });
    procs.push(gateway.proc);
    const durableDir = path.join(root, 'durable');
    fs.mkdirSync(durableDir);
    const durable = await start('durable baseline', 'bench/servers/durable-baseline.ts', ['--upstream', stubUrl, '--token', UPSTREAM_TOKEN, '--api-key', API_KEY, '--data-dir', durableDir, '--synchronous', 'FULL'], {}, place.server, { line: true });
    procs.push(durable.proc);

    const projectId = (await graphql<{ createProject: { project: { id: string } } }>(gateway.origin, API_KEY, 'mutation($input: CreateProjectInput!) { createProject(input: $input) { project { id } } }', { input: { name: 'breakdown', description: 'bench' } })).createProject.project.id;
    const treeId = await seedTree(gateway.origin);
    const baselineDir = path.join(root, 'baseline');
    fs.mkdirSync(baselineDir);
    const baseline = await start('baseline', 'bench/servers/baseline.ts', ['--upstream', stubUrl, '--token', UPSTREAM_TOKEN, '--gateway-db', path.join(gwDir, 'gateway.sqlite'), '--data-dir', baselineDir, '--synchronous', 'FULL', '--notification-token', NOTIFICATION_TOKEN], {}, place.server, { line: true });
    procs.push(baseline.proc);
    const seeded = await fetch(`${durable.origin}/seed`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ projectId }) });
    if (seeded.status !== 200) throw new Error(`durable baseline: seed answered ${seeded.status}`);

    const headers = { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` };
    const client = (origin: string, urlPath: string, body: () => string, expect = 200, h: Record<string, string> = headers) => {
      const pool = new Pool(origin, { connections: CONCURRENCY });
      return async () => {
        const res = await pool.request({ method: 'POST', path: urlPath, headers: h, body: body() });
        const text = await res.body.text();
        if (res.statusCode !== expect || text.includes('"errors"')) throw new Error(`${origin}${urlPath} answered ${res.statusCode}: ${text.slice(0, 200)}`);
      };
    };
    const notification = notificationBody();
    const webhookHeaders = { 'content-type': 'application/json', authorization: `Bearer ${NOTIFICATION_TOKEN}` };
    const mutationBody = () => JSON.stringify({ query: CREATE_NETWORK, variables: { input: { projectId, title: 'breakdown-net' }, key: randomUUID() } });
    const treeBody = JSON.stringify({ query: PROJECT_TREE, variables: { id: treeId } });

    process.stderr.write('mutation: gateway\n');
    const gwMutation = await measure(gateway, client(gateway.origin, '/graphql', mutationBody));
    process.stderr.write('mutation: durable baseline\n');
    const durableMutation = await measure(durable, client(durable.origin, '/mutation', mutationBody));
    process.stderr.write('tree query: gateway\n');
    const gwTree = await measure(gateway, client(gateway.origin, '/graphql', () => treeBody));
    process.stderr.write('tree query: baseline\n');
    const baseTree = await measure(baseline, client(baseline.origin, '/query', () => treeBody));
    process.stderr.write('intake: gateway\n');
    const gwIntake = await measure(gateway, client(gateway.origin, WEBHOOK_PATH, () => notification.replace('{{uuid}}', randomUUID()), 204, webhookHeaders));
    process.stderr.write('intake: baseline\n');
    const baseIntake = await measure(baseline, client(baseline.origin, '/webhook', () => notification.replace('{{uuid}}', randomUUID()), 204, webhookHeaders));

    const block = [
      `Run of ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC · Node ${process.version} · load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')} at the end · \`npm run bench:breakdown\``,
      '',
      table('createNetwork', [
        { name: 'gateway', m: gwMutation },
        { name: 'durable baseline', m: durableMutation },
      ]),
      '',
      table('tree query (50 resources)', [
        { name: 'gateway', m: gwTree },
        { name: 'baseline (SQLite by hand)', m: baseTree },
      ]),
      '',
      table('mobile-ID notification, nobody waiting', [
        { name: 'gateway', m: gwIntake },
        { name: 'baseline (one insert, its own commit)', m: baseIntake },
      ]),
    ].join('\n');
    process.stdout.write(`\n${block}\n`);
    if (!cli['no-write']) {
      const file = path.join(ROOT, 'bench', 'README.md');
      const text = fs.readFileSync(file, 'utf8');
      const [startMark, endMark] = ['<!-- breakdown:start -->', '<!-- breakdown:end -->'];
      if (!text.includes(startMark)) throw new Error(`bench/README.md has no ${startMark} marker`);
      fs.writeFileSync(file, text.replace(new RegExp(`${startMark}[\\s\\S]*?${endMark}`), `${startMark}\n${block}\n${endMark}`));
    }
  } finally {
    for (const p of procs.reverse()) await p.stop().catch(() => undefined);
    fs.rmSync(root, { recursive: true, force: true });
  }
}

main().then(() => process.exit(0), (err: unknown) => {
  process.stderr.write(`bench:breakdown failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
