/**
 * `npm run bench:breakdown`: where a mutation's, a tree query's and a mobile-ID notification's time goes, stage by
 * stage, in the gateway and in its baseline (the durable baseline for createNetwork, the hand-written SQLite reader
 * for the tree query, the hand-written webhook of bench/servers/baseline.ts for a notification).
 *
 * Each server runs as in the benchmark (its own process on the server core, the same stub upstream), with
 * `--inspect` on loopback; the gateway as `npm start` runs it, from tsc's build of this checkout (made first, into
 * dist/): under tsx every function the code makes per request also paid esbuild's `__name` call (~4 % of a
 * creation's main thread, read as "HTTP read" and "other"), which the shipped build does not make. After a warm-up,
 * the V8 sampling profiler runs over N operations only (started and stopped through the inspector, so nothing else
 * is in the window), and every sample of the main thread is given to one stage: the innermost frame on its stack
 * that a stage claims (src/store, kysely and better-sqlite3 frames
 * belong to whoever called them: the idempotency claim or the event log when the stack still shows it; kysely awaits
 * before it runs a statement, so past that await the caller is gone and the statement counts as "ledger and SQLite
 * statements"). A sample is main-thread time while not
 * idle, so a synchronous wait there (an fsync inside COMMIT) counts. The last two rows, the process's CPU from /proc
 * (every thread, and every thread but the main one), come from another window of N operations with the profiler off:
 * its sampler thread would otherwise be counted (docs/decisions/080).
 *
 * Options: --ops <n> (operations per measurement, default 4000), --no-write (print only; default writes the
 * tables into bench/breakdown.md between the `breakdown` markers), --concurrency <n> (operations in flight, default 16),
 * --only intake,delivery (some of mutation, tree, intake, delivery; default all: the written block needs all),
 * --env NAME=VALUE[,NAME=VALUE] (the gateway's environment: an off switch, say), --profiles DIR (each measured
 * window's V8 CPU profile written there, `<server>-<n>.cpuprofile`, to read by function).
 *
 * `delivery` (docs/decisions/062): the same notifications as `intake`, each to one of 2 × N graphql-ws subscriptions that
 * wait for it (16 connections of this process), each operation ending when its `next` has arrived; beside it the
 * same notifications with nobody waiting, in the same run, so that the difference is what one delivery costs.
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import WebSocket from 'ws';

import { buildGateway, startNodeArgs } from './lib/build.js';
import { closedLoop, mainThreadCpu, processCpu } from './lib/cpu.js';
import { API_KEY, envPairs, gatewayEnv, NOTIFICATION_TOKEN, UPSTREAM_TOKEN } from './lib/env.js';
import { graphql } from './lib/harness.js';
import { Inspector } from './lib/inspector.js';
import { durableBaselineArgs, seedDurableBaseline } from './lib/mutation-references.js';
import { freePort, pin, placement, ROOT, spawnNode, waitUntilIdle, type Proc } from './lib/processes.js';
import { SUBSCRIPTION } from './scenarios/fanout.js';
import { CREATE_NETWORK } from './scenarios/mutation.js';
import { PROJECT_TREE, seedTree } from './scenarios/query.js';
import { notificationBody, WEBHOOK_PATH } from './scenarios/webhook.js';

const { values: cli } = parseArgs({
  options: {
    ops: { type: 'string', default: '4000' },
    'no-write': { type: 'boolean', default: false },
    concurrency: { type: 'string', default: '16' },
    only: { type: 'string' },
    env: { type: 'string' },
    profiles: { type: 'string' },
  },
});
const OPS = Number(cli.ops);
const CONCURRENCY = Number(cli.concurrency);
const GATEWAY_ENV = envPairs(cli.env);
const ONLY = new Set(cli.only ? cli.only.split(',').map((x) => x.trim()) : ['mutation', 'tree', 'intake']);

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
  'bus (publish)',
  'matching (event stream, subscription iterator)',
  'resolver and execution',
  'opening sealed fields',
  'presenting (masking, warnings)',
  'encoding (payload JSON, frame)',
  'graphql-ws protocol (complete, bookkeeping)',
  'socket write (WebSocket frames)',
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
  [
    'SQLite commit (group commit, WAL sync)',
    (f) =>
      /^(fdatasync|fsync)$/.test(f.functionName) ||
      (/sqlite-dialect/.test(f.url) && /commit|flush|sync/i.test(f.functionName)) ||
      (/durable-baseline/.test(f.url) && f.functionName === 'flush'),
  ],
  [
    'opening sealed fields',
    (f) =>
      (/src\/secret\./.test(f.url) && f.functionName === 'open') ||
      f.functionName === 'Decipheriv' ||
      /mobile-id\/views/.test(f.url),
  ],
  [
    'encoding (payload JSON, frame)',
    (f) => /server\/ws\./.test(f.url) && /^(sendResult|write|frames)$/.test(f.functionName),
  ],
  ['presenting (masking, warnings)', (f) => /execution\/present/.test(f.url)],
  ['graphql-ws protocol (complete, bookkeeping)', (f) => /node_modules\/graphql-ws|server\/ws-protocol\./.test(f.url)],
  ['bus (publish)', (f) => /events\/(bus|index)/.test(f.url)],
  [
    'matching (event stream, subscription iterator)',
    (f) =>
      /events\/stream|graphql\/subscriptions/.test(f.url) ||
      (/execution\/run/.test(f.url) && /next/.test(f.functionName)),
  ],
  [
    'metrics and tracing',
    (f) =>
      /prom-client|@opentelemetry|pino|src\/metrics\.|src\/telemetry|src\/logger\.|execution\/tracing|server\/tracing/.test(
        f.url,
      ),
  ],
  [
    'variable coercion',
    (f) => /^(coerceVariableValues|getVariableValues|coerceInputValue|coerceInputValueImpl)$/.test(f.functionName),
  ],
  ['authentication', (f) => /src\/auth\/|mobile-id\/tokens/.test(f.url)],
  [
    'sealing and digests',
    (f) =>
      /src\/secret\.|src\/fingerprint\.|canonicalize/.test(f.url) ||
      /^(Hmac|Hash|createCipherBase|Cipheriv|Decipheriv)$/.test(f.functionName),
  ],
  [
    'notification parse and checks',
    (f) =>
      /mobile-id\/(wire|verify|intake)|webhooks\/body|zod/.test(f.url) ||
      (/servers\/baseline/.test(f.url) && f.functionName === 'webhook'),
  ],
  ['event log write', (f) => /events\/log/.test(f.url) || f.functionName === 'insertNotification'],
  ['bus, matching and delivery', (f) => /events\/(bus|index|stream)|graphql\/subscriptions|server\/ws/.test(f.url)],
  [
    'admission (scopes, cost, rate limit)',
    (f) => /execution\/(admit|scopes|limits|cost-formula)|src\/ratelimit/.test(f.url),
  ],
  [
    'plan lookup',
    (f) =>
      /execution\/prepare|server\/trusted-documents/.test(f.url) ||
      (/server\/direct-path/.test(f.url) && /plan|lookup|prepare|document/i.test(f.functionName)),
  ],
  [
    'ledger and SQLite statements',
    (f) => /store\/idempotency/.test(f.url) && /complet|finish|done|record/i.test(f.functionName),
  ],
  ['idempotency claim', (f) => /upstream\/idempotency|store\/idempotency/.test(f.url) || f.functionName === 'claimKey'],
  ['upstream call', (f) => /undici|upstream\/http|cloud\/client/.test(f.url)],
  [
    'ledger and SQLite statements',
    (f) => /store\/ledger|store\/provisionings/.test(f.url) || f.functionName === 'recordNetwork',
  ],
  [
    'response',
    (f) =>
      /execution\/present|node:_http_outgoing/.test(f.url) ||
      (/server\/(direct-path|respond)|servers\/http/.test(f.url) &&
        /^(send|answer|sendJson|respond)/.test(f.functionName)),
  ],
  [
    'resolver and execution',
    (f) =>
      /src\/graphql\/|src\/cloud\/|graphql-jit|dataloader|graphql\/execution|execution\/run|execution\/shared|@apollo\/server/.test(
        f.url,
      ) || /^(mutation|query)$/.test(f.functionName),
  ],
  [
    'HTTP read',
    (f) =>
      /server\/(http|graphql|direct-path|respond)\.[jt]s|servers\/http\.ts|node:_http_(incoming|server|common)/.test(
        f.url,
      ),
  ],
];
/** Frames that belong to whoever called them: the storage layer (the ledger when no caller claims them). */
const STORAGE = (f: Frame) => /sqlite-dialect|store\/|kysely|better-sqlite3/.test(f.url);

/** Frames of the kernel's socket writes, which belong to the WebSocket when a ws frame is on the stack. */
const SOCKET = (f: Frame) =>
  /node:net|stream_base_commons|^(writev|writeUtf8String|writeBuffer|writeGeneric|writevGeneric)$/.test(
    f.url || f.functionName,
  );
const WEBSOCKET = (f: Frame) => /node_modules\/ws\/|server\/ws(-protocol)?\.[jt]s|node_modules\/graphql-ws/.test(f.url);

function stageOf(stack: Frame[]): Stage {
  if (stack.some(WEBSOCKET)) {
    for (const f of stack) {
      if (SOCKET(f) || /node_modules\/ws\//.test(f.url)) return 'socket write (WebSocket frames)';
      if (WEBSOCKET(f)) break;
    }
  }
  let storage = false;
  for (const f of stack) {
    const claimed = CLAIMS.find(([, test]) => test(f));
    if (claimed) {
      // A statement run for a stage that is not the storage's own (the resolver reading the ledger) is ledger work.
      if (
        storage &&
        ![
          'idempotency claim',
          'ledger and SQLite statements',
          'event log write',
          'SQLite commit (group commit, WAL sync)',
        ].includes(claimed[0])
      )
        return 'ledger and SQLite statements';
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

/** A server's figures, µs per operation: the main thread's samples by stage, and the CPU from /proc (profiler off). */
interface M {
  stages: Map<Stage, number>;
  /** Every thread of the process. */
  cpuUs: number;
  /** Every thread but the main one: libuv's pool (the WAL sync), the checkpoint worker, V8's helpers. */
  offMainUs: number;
}

interface Server {
  name: string;
  proc: Proc;
  origin: string;
  inspector: Inspector;
}

/** How many profiles `--profiles DIR` has written: each file's number, in the order measured. */
let profilesWritten = 0;

/**
 * One server's figures for `request`: the stages from a profiled window of OPS operations, and the CPU from /proc over
 * another window of OPS operations with the profiler off. V8's sampler is a thread of the process, and at one
 * operation in flight it alone costs ~100–150 µs per notification, with ~40–70 µs more on the main thread
 * (docs/decisions/080): a process total read while it runs measures the profiler.
 */
async function measure(server: Server, request: () => Promise<void>): Promise<M> {
  await closedLoop(Math.min(OPS, 2000), CONCURRENCY, request); // warm-up
  await waitUntilIdle(server.proc.pid, 5_000);
  const before = { all: processCpu(server.proc.pid), main: mainThreadCpu(server.proc.pid) };
  await closedLoop(OPS, CONCURRENCY, request);
  const cpuUs = ((processCpu(server.proc.pid) - before.all) * 1e6) / OPS;
  const mainUs = ((mainThreadCpu(server.proc.pid) - before.main) * 1e6) / OPS;
  await waitUntilIdle(server.proc.pid, 5_000);
  await server.inspector.send('Profiler.enable');
  await server.inspector.send('Profiler.setSamplingInterval', { interval: 100 });
  await server.inspector.send('Profiler.start');
  await closedLoop(OPS, CONCURRENCY, request);
  const { profile } = await server.inspector.send<{ profile: Profile }>('Profiler.stop');
  const stages = new Map([...attribute(profile)].map(([s, us]) => [s, us / OPS]));
  if (cli.profiles) {
    fs.mkdirSync(cli.profiles, { recursive: true });
    const file = path.join(cli.profiles, `${server.name.replace(/\W+/g, '-')}-${++profilesWritten}.cpuprofile`);
    fs.writeFileSync(file, JSON.stringify(profile));
  }
  return { stages, cpuUs, offMainUs: cpuUs - mainUs };
}

/** `count` graphql-ws subscriptions, each waiting for its own auth_req_id, over 16 connections of this process. */
async function waitingSubscribers(
  origin: string,
  count: number,
): Promise<{ ids: string[]; delivered(id: string): Promise<void>; close(): void }> {
  const wsUrl = `${origin.replace(/^http/, 'ws')}/graphql`;
  const sockets = await Promise.all(
    Array.from(
      { length: 16 },
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
  const waiting = new Map<string, () => void>();
  const arrived = new Set<string>();
  for (const ws of sockets) {
    ws.on('message', (data) => {
      const msg = JSON.parse(String(data)) as { type: string; id?: string };
      if (msg.type === 'ping') ws.send('{"type":"pong"}');
      if (msg.id === undefined || msg.type !== 'next') return;
      const w = waiting.get(msg.id);
      if (w) w();
      else arrived.add(msg.id);
    });
  }
  const ids = Array.from({ length: count }, () => randomUUID());
  ids.forEach((id, i) =>
    sockets[i % sockets.length]!.send(
      JSON.stringify({ id, type: 'subscribe', payload: { query: SUBSCRIPTION, variables: { authReqId: id } } }),
    ),
  );
  await new Promise((r) => setTimeout(r, 2_000));
  return {
    ids,
    delivered: (id) =>
      arrived.delete(id) ? Promise.resolve() : new Promise<void>((resolve) => waiting.set(id, resolve)),
    close: () => sockets.forEach((ws) => ws.terminate()),
  };
}

async function start(
  name: string,
  script: string,
  args: string[],
  env: Record<string, string>,
  cpus: string | null,
  readiness: { url: string } | { line: true },
  nodeArgs: string[] = [],
): Promise<Server> {
  const inspectPort = await freePort();
  const proc = await spawnNode(name, {
    script,
    args,
    env,
    cpus,
    nodeArgs: [...nodeArgs, `--inspect=127.0.0.1:${inspectPort}`],
    readiness,
    timeoutMs: 60_000,
  });
  const origin = 'url' in readiness ? new URL(readiness.url).origin : String(proc.ready.url);
  return { name, proc, origin, inspector: await Inspector.connect(inspectPort) };
}

function table(title: string, columns: Array<{ name: string; m: M }>): string {
  const us = (v: number | undefined) => (v === undefined || Math.abs(v) < 0.05 ? '–' : v.toFixed(1));
  const shown = STAGES.filter((s) => columns.some((c) => (c.m.stages.get(s) ?? 0) >= 0.05));
  const lines = [
    `**${title}**: µs per operation of the main thread's time, sampled (${OPS} operations, ${CONCURRENCY} in flight). A sample is time the thread was not idle, so a synchronous wait on the main thread (the durable baseline's fsync inside its COMMIT) counts, while the gateway syncs the WAL on libuv's pool; the last two rows are the process's CPU from /proc in a window of as many operations with the profiler off.`,
    '',
    `| stage | ${columns.map((c) => c.name).join(' | ')} |`,
    `|---|${columns.map(() => '---:').join('|')}|`,
  ];
  for (const s of shown) lines.push(`| ${s} | ${columns.map((c) => us(c.m.stages.get(s))).join(' | ')} |`);
  const mainThread = columns.map((c) => [...c.m.stages.values()].reduce((a, b) => a + b, 0));
  lines.push(`| *main thread, sampled, in all* | ${mainThread.map((v) => us(v)).join(' | ')} |`);
  lines.push(`| off the main thread (/proc) | ${columns.map((c) => c.m.offMainUs.toFixed(1)).join(' | ')} |`);
  lines.push(`| **process CPU (/proc)** | ${columns.map((c) => `**${c.m.cpuUs.toFixed(1)}**`).join(' | ')} |`);
  return lines.join('\n');
}

async function main(): Promise<void> {
  const place = placement();
  if (place.pinned) pin(process.pid, place.driver!);
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-breakdown-'));
  const procs: Proc[] = [];
  try {
    const stub = await spawnNode('upstream', {
      script: 'bench/servers/upstream.ts',
      cpus: place.driver,
      readiness: { line: true },
    });
    procs.push(stub);
    const stubUrl = String(stub.ready.url);
    const port = await freePort();
    const gwDir = path.join(root, 'gateway');
    fs.mkdirSync(gwDir);
    const gateway = await start(
      'gateway',
      buildGateway(ROOT),
      [],
      { ...gatewayEnv({ port, dataDir: gwDir, stubUrl }), SQLITE_SYNCHRONOUS: 'FULL', ...GATEWAY_ENV },
      place.server,
      { url: `http://127.0.0.1:${port}/readyz` },
      startNodeArgs(ROOT),
    );
    procs.push(gateway.proc);
    const durableDir = path.join(root, 'durable');
    fs.mkdirSync(durableDir);
    const durable = await start(
      'durable baseline',
      'bench/servers/durable-baseline.ts',
      [...durableBaselineArgs(stubUrl, durableDir), '--synchronous', 'FULL'],
      {},
      place.server,
      { line: true },
    );
    procs.push(durable.proc);

    const projectId = (
      await graphql<{ createProject: { project: { id: string } } }>(
        gateway.origin,
        API_KEY,
        'mutation($input: CreateProjectInput!) { createProject(input: $input) { project { id } } }',
        { input: { name: 'breakdown', description: 'bench' } },
      )
    ).createProject.project.id;
    const treeId = await seedTree(gateway.origin);
    const baselineDir = path.join(root, 'baseline');
    fs.mkdirSync(baselineDir);
    const baseline = await start(
      'baseline',
      'bench/servers/baseline.ts',
      [
        '--upstream',
        stubUrl,
        '--token',
        UPSTREAM_TOKEN,
        '--gateway-db',
        path.join(gwDir, 'gateway.sqlite'),
        '--data-dir',
        baselineDir,
        '--synchronous',
        'FULL',
        '--notification-token',
        NOTIFICATION_TOKEN,
      ],
      {},
      place.server,
      { line: true },
    );
    procs.push(baseline.proc);
    await seedDurableBaseline(durable.origin, projectId);

    const headers = { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` };
    const client = (
      origin: string,
      urlPath: string,
      body: () => string,
      expect = 200,
      h: Record<string, string> = headers,
    ) => {
      const pool = new Pool(origin, { connections: CONCURRENCY });
      return async () => {
        const res = await pool.request({ method: 'POST', path: urlPath, headers: h, body: body() });
        const text = await res.body.text();
        if (res.statusCode !== expect || text.includes('"errors"'))
          throw new Error(`${origin}${urlPath} answered ${res.statusCode}: ${text.slice(0, 200)}`);
      };
    };
    const notification = notificationBody();
    const webhookHeaders = { 'content-type': 'application/json', authorization: `Bearer ${NOTIFICATION_TOKEN}` };
    const mutationBody = () =>
      JSON.stringify({
        query: CREATE_NETWORK,
        variables: { input: { projectId, title: 'breakdown-net' }, key: randomUUID() },
      });
    const treeBody = JSON.stringify({ query: PROJECT_TREE, variables: { id: treeId } });

    const tables: string[] = [];
    if (ONLY.has('mutation')) {
      process.stderr.write('mutation: gateway\n');
      const gwMutation = await measure(gateway, client(gateway.origin, '/graphql', mutationBody));
      process.stderr.write('mutation: durable baseline\n');
      const durableMutation = await measure(durable, client(durable.origin, '/mutation', mutationBody));
      tables.push(
        table('createNetwork', [
          { name: 'gateway', m: gwMutation },
          { name: 'durable baseline', m: durableMutation },
        ]),
      );
    }
    if (ONLY.has('tree')) {
      process.stderr.write('tree query: gateway\n');
      const gwTree = await measure(
        gateway,
        client(gateway.origin, '/graphql', () => treeBody),
      );
      process.stderr.write('tree query: baseline\n');
      const baseTree = await measure(
        baseline,
        client(baseline.origin, '/query', () => treeBody),
      );
      tables.push(
        table('tree query (50 resources)', [
          { name: 'gateway', m: gwTree },
          { name: 'baseline (SQLite by hand)', m: baseTree },
        ]),
      );
    }
    let gwIntake: M | null = null;
    if (ONLY.has('intake') || ONLY.has('delivery')) {
      process.stderr.write('intake: gateway\n');
      gwIntake = await measure(
        gateway,
        client(gateway.origin, WEBHOOK_PATH, () => notification.replace('{{uuid}}', randomUUID()), 204, webhookHeaders),
      );
    }
    if (ONLY.has('intake')) {
      process.stderr.write('intake: baseline\n');
      const baseIntake = await measure(
        baseline,
        client(baseline.origin, '/webhook', () => notification.replace('{{uuid}}', randomUUID()), 204, webhookHeaders),
      );
      tables.push(
        table('mobile-ID notification, nobody waiting', [
          { name: 'gateway', m: gwIntake! },
          { name: 'baseline (one insert, its own commit)', m: baseIntake },
        ]),
      );
    }
    if (ONLY.has('delivery')) {
      process.stderr.write('delivery: gateway\n');
      // One waiting subscriber per operation `measure` runs: its warm-up, then two windows of OPS (the process's CPU
      // with the profiler off, then the profile). With one window's worth, the second window ran out of subscribers
      // and waited for a delivery that could not come.
      const subs = await waitingSubscribers(gateway.origin, Math.min(OPS, 2000) + 2 * OPS);
      const pool = new Pool(gateway.origin, { connections: CONCURRENCY });
      let next = 0;
      const deliver = async () => {
        const id = subs.ids[next++]!;
        const done = subs.delivered(id);
        const res = await pool.request({
          method: 'POST',
          path: WEBHOOK_PATH,
          headers: webhookHeaders,
          body: notification.replace('{{uuid}}', id),
        });
        await res.body.dump();
        if (res.statusCode !== 204) throw new Error(`webhook answered ${res.statusCode}`);
        await done;
      };
      const gwDelivery = await measure(gateway, deliver);
      subs.close();
      await pool.close();
      const diff: M = {
        stages: new Map(STAGES.map((st) => [st, (gwDelivery.stages.get(st) ?? 0) - (gwIntake!.stages.get(st) ?? 0)])),
        cpuUs: gwDelivery.cpuUs - gwIntake!.cpuUs,
        offMainUs: gwDelivery.offMainUs - gwIntake!.offMainUs,
      };
      tables.push(
        table('mobile-ID notification with its one waiting subscriber (graphql-ws)', [
          { name: 'gateway, nobody waiting', m: gwIntake! },
          { name: 'gateway, one subscriber waiting', m: gwDelivery },
          { name: 'difference: one delivery', m: diff },
        ]),
      );
    }

    const block = [
      `Run of ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC · Node ${process.version} · load average ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')} at the end · \`npm run bench:breakdown\``,
      '',
      ...tables.flatMap((t) => [t, '']),
    ].join('\n');
    process.stdout.write(`\n${block}\n`);
    if (!cli['no-write'] && ONLY.size === 3 && !ONLY.has('delivery')) {
      const file = path.join(ROOT, 'bench', 'breakdown.md');
      const text = fs.readFileSync(file, 'utf8');
      const [startMark, endMark] = ['<!-- breakdown:start -->', '<!-- breakdown:end -->'];
      if (!text.includes(startMark)) throw new Error(`bench/breakdown.md has no ${startMark} marker`);
      fs.writeFileSync(
        file,
        text.replace(new RegExp(`${startMark}[\\s\\S]*?${endMark}`), `${startMark}\n${block}\n${endMark}`),
      );
    }
  } finally {
    for (const p of procs.reverse()) await p.stop().catch(() => undefined);
    fs.rmSync(root, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(
      `bench:breakdown failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exit(1);
  },
);
