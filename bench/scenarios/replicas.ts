import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';

import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../scripts/embedded-postgres.js';
import { API_KEY, NOTIFICATION_TOKEN, type BenchEnv, type GatewayProc, type ScenarioReport } from '../lib/env.js';
import { cpuSeconds, machineBusySeconds, pin, waitForQuiet } from '../lib/processes.js';
import type { FanoutLoad, FanoutResult, HttpResult, MixOpenResult, MixRateResult } from '../lib/protocol.js';
import { fmt, Samples, summarize, type LatencySummary } from '../lib/stats.js';
import { SUBSCRIPTION } from './fanout.js';
import { WEBHOOK_PATH } from './webhook.js';

/**
 * Scenario 8 (run only when asked: `--only 8`): three gateway processes on one PostgreSQL, as three replicas of
 * one deployment. Webhooks go to A; 1,000 subscribers wait on B and C. Then the ceiling of the event bus: raw
 * NOTIFY on that PostgreSQL, and the gateway's own path (webhook at A, NOTIFY, B and C reading the log), with no
 * subscriber and with 1,000, at rising rates until the rate stops growing or the latency runs away.
 */

const SUBSCRIBERS = 1000;
const IDS_PER_ROUND = 10;
/** The channel of src/events/postgres-bus.ts: the probe below listens where the replicas do. */
const GATEWAY_CHANNEL = 'gateway_events';
/** A channel of its own for raw NOTIFY, in a database of its own, measured before any gateway listens. */
const RAW_CHANNEL = 'bench_ceiling';
/** Notifications/s the gateway path is offered, step by step, until it stops keeping up. */
const RATES = [250, 500, 1000, 2000, 4000, 8000];
/** A step past the ceiling: fewer than this share of the offered rate acknowledged (or delivered), or p99 above LATENCY_LIMIT_MS. */
const KEEP_UP = 0.9;
const LATENCY_LIMIT_MS = 1000;
/** The ladder stops after this many steps past the ceiling in a row (one alone may be another tenant's burst). */
const STOP_AFTER = 2;
/** Two steps past the ceiling in a row end a ladder. */
const stopHere = (steps: Array<{ saturated: boolean }>) =>
  steps.length >= STOP_AFTER && steps.slice(-STOP_AFTER).every((s) => s.saturated);

const failureBody = (id: string, clock = '') =>
  JSON.stringify({
    auth_req_id: id,
    error: 'access_denied',
    error_description: 'client timeout',
    ...(clock ? { correlation_id: clock } : {}),
  });
const webhookHeaders = { 'content-type': 'application/json', authorization: `Bearer ${NOTIFICATION_TOKEN}` };

/** `uptime`'s three load averages: the machine is shared, and a figure is worth what the machine was doing. */
function loadAverages(): string {
  try {
    return fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  } catch {
    return 'n/a';
  }
}

function parentOf(pid: number): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return NaN;
  }
}

/** The postmaster and every process it forked (backends, WAL writer, checkpointer, …), read from /proc. */
function postgresPids(postmaster: number): number[] {
  const pids = [postmaster];
  for (const entry of fs.readdirSync('/proc')) {
    const pid = Number(entry);
    if (Number.isInteger(pid) && pid !== postmaster && parentOf(pid) === postmaster) pids.push(pid);
  }
  return pids;
}

/** CPU of a set of processes over a window; processes that appear during it count whole, ones that end are lost. */
function cpuWindow(pids: () => number[]): () => number {
  const start = new Map(pids().map((pid) => [pid, cpuSeconds(pid)]));
  return () => pids().reduce((sum, pid) => sum + Math.max(0, (cpuSeconds(pid) || 0) - (start.get(pid) ?? 0)), 0);
}

interface Window {
  /** Cores (1.0 = one core busy the whole window). */
  a: number;
  b: number;
  c: number;
  postgres: number;
  /** Every process on the machine, ours and other people's, in cores. */
  machine: number;
}

function startWindow(gateways: GatewayProc[], postgres: () => number[]): () => Window {
  const each = gateways.map((g) => cpuWindow(() => [g.proc.pid]));
  const pgCpu = cpuWindow(postgres);
  const busy0 = machineBusySeconds();
  const t0 = performance.now();
  return () => {
    const wall = (performance.now() - t0) / 1000;
    const [a, b, c] = each.map((f) => f() / wall) as [number, number, number];
    return { a, b, c, postgres: pgCpu() / wall, machine: (machineBusySeconds() - busy0) / wall };
  };
}

interface RawStep {
  connections: number;
  listeners: number;
  /** The notifying transaction waits for its WAL flush (synchronous_commit on, PostgreSQL's default) or not. */
  flush: boolean;
  sent: number;
  rate: number;
  /** NOTIFY -> the first listener's receipt, ms (null without listeners). */
  latency: LatencySummary | null;
  /** Notices every listener got (the fewest). */
  received: number;
  postgresCpu: number;
  senderCpu: number;
  machine: number;
}

/**
 * Raw NOTIFY: `connections` clients send `pg_notify` one after the other (closed loop, autocommit: a
 * transaction each, as the gateway's publish is), with `listeners` clients listening; the payload holds the
 * sender's clock, so latency is NOTIFY sent -> notice received.
 */
async function rawNotify(
  url: string,
  connections: number,
  listeners: number,
  flush: boolean,
  durationMs: number,
  postgres: () => number[],
): Promise<RawStep> {
  const latency = new Samples();
  const received = Array.from({ length: listeners }, () => 0);
  const listening: pg.Client[] = [];
  for (let i = 0; i < listeners; i++) {
    const client = new pg.Client({ connectionString: url, application_name: 'bench-listener' });
    await client.connect();
    client.on('notification', (msg) => {
      received[i]! += 1;
      if (i === 0) latency.push(performance.now() - Number(JSON.parse(msg.payload!).t));
    });
    await client.query(`LISTEN ${RAW_CHANNEL}`);
    listening.push(client);
  }
  const senders = await Promise.all(
    Array.from({ length: connections }, async () => {
      const client = new pg.Client({ connectionString: url, application_name: 'bench-notifier' });
      await client.connect();
      return client;
    }),
  );
  await waitForQuiet();
  const cpu = startWindow([], postgres);
  const own0 = process.cpuUsage();
  const started = performance.now();
  const end = started + durationMs;
  let sent = 0;
  const text = flush
    ? `select pg_notify('${RAW_CHANNEL}', $1)`
    : `select set_config('synchronous_commit', 'off', true), pg_notify('${RAW_CHANNEL}', $1)`;
  await Promise.all(
    senders.map(async (client) => {
      while (performance.now() < end) {
        await client.query({ name: 'notify', text, values: [`{"seq":${sent},"t":${performance.now()}}`] });
        sent += 1;
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const deadline = performance.now() + 5_000;
  while (listeners > 0 && Math.min(...received) < sent && performance.now() < deadline) await sleep(10);
  const w = cpu();
  const own = process.cpuUsage(own0);
  await Promise.all([...senders, ...listening].map((c) => c.end()));
  return {
    connections,
    listeners,
    flush,
    sent,
    rate: sent / seconds,
    latency: listeners > 0 ? latency.summary() : null,
    received: listeners > 0 ? Math.min(...received) : 0,
    postgresCpu: w.postgres,
    senderCpu: (own.user + own.system) / 1e6 / ((performance.now() - started) / 1000),
    machine: w.machine,
  };
}

interface PathStep {
  rate: number;
  /** Webhooks acknowledged (204) per second of the window. */
  acknowledgedRate: number;
  errors: number;
  dropped: number;
  webhook: LatencySummary;
  /** Without subscribers: NOTIFYs the probe received per second of the window, and how long after the last webhook answer the last one came. */
  noticeRate?: number;
  drainMs?: number;
  /** With subscribers: deliveries per second, webhook -> subscriber latency, and deliveries missing 5 s after the window. */
  deliveredRate?: number;
  delivery?: LatencySummary;
  missing?: number;
  /** Highest pg_notification_queue_usage() sampled during the step (share of PostgreSQL's 8 GB notification queue). */
  queueUsage: number;
  cpu: Window;
  saturated: boolean;
}

/** Samples pg_notification_queue_usage() every 200 ms until stopped; returns the highest value. */
function queueSampler(client: pg.Client): () => Promise<number> {
  let max = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      const { rows } = await client.query<{ u: number }>('select pg_notification_queue_usage() as u');
      max = Math.max(max, Number(rows[0]!.u));
      await sleep(200);
    }
  })();
  return async () => {
    running = false;
    await loop;
    return max;
  };
}

function combine(results: FanoutResult[], groups: number) {
  const seconds = results.map((r) => r.deliveries / r.deliveriesPerSecond);
  const busy = seconds.reduce((a, b) => a + b, 0);
  const weighted = (i: number) => results.reduce((s, r, k) => s + (r.cpu?.[i] ?? NaN) * seconds[k]!, 0) / busy;
  const cpus = results[0]?.cpu?.length ?? 0;
  return {
    deliveries: results.reduce((a, r) => a + r.deliveries, 0),
    expected: results.reduce((a, r) => a + r.expected, 0),
    deliveriesPerSecond: results.reduce((a, r) => a + r.deliveries, 0) / busy,
    latency: summarize(results.flatMap((r) => r.samples ?? [])),
    byGroup: Array.from({ length: groups }, (_, g) => summarize(results.flatMap((r) => r.groupSamples?.[g] ?? []))),
    webhook: summarize(results.flatMap((r) => r.webhookSamples ?? [])),
    cpu: Array.from({ length: cpus }, (_, i) => weighted(i)),
    errors: [...new Set(results.flatMap((r) => r.errors))],
  };
}

export async function replicas(
  env: BenchEnv,
  startReplica: (name: string, env: Record<string, string>) => Promise<GatewayProc>,
): Promise<ScenarioReport> {
  env.log('scenario 8: three replicas on one PostgreSQL, and the ceiling of LISTEN/NOTIFY');
  const quick = env.options.durationMs < 5_000;
  const stepMs = quick ? 2_000 : 5_000;
  const loadBefore = loadAverages();
  const started = performance.now();
  let server: EmbeddedPostgres | null = null;
  const gateways: GatewayProc[] = [];
  try {
    server = await startEmbeddedPostgres();
    const url = await server.createDatabase('bench_replicas');
    const rawUrl = await server.createDatabase('bench_raw_notify');
    const admin = new pg.Client({ connectionString: url, application_name: 'bench-probe' });
    await admin.connect();
    const { rows } = await admin.query<{ pid: number }>('select pg_backend_pid() as pid');
    const postmaster = parentOf(Number(rows[0]!.pid));
    // PostgreSQL shares the driver core (load generator, orchestrator) and the three gateways share the server
    // core: two cores cannot give each its own. Backends forked later inherit the postmaster's affinity.
    let pgPlacement = 'not pinned';
    if (env.placement.pinned) {
      try {
        for (const pid of postgresPids(postmaster)) pin(pid, env.placement.driver!);
        pgPlacement = `CPU ${env.placement.driver}`;
      } catch (err) {
        pgPlacement = `not pinned (${(err as Error).message.split('\n')[0]})`;
      }
    }
    const pgPids = () => postgresPids(postmaster);

    // 1. Raw NOTIFY, before any gateway listens (the notification queue is one for the whole server).
    const raw: RawStep[] = [];
    for (const [listeners, flush] of [
      [0, true],
      [3, true],
      [3, false],
    ] as const) {
      for (const connections of [1, 4, 16]) {
        const step = await rawNotify(rawUrl, connections, listeners, flush, stepMs, pgPids);
        raw.push(step);
        env.log(
          `  raw NOTIFY, ${connections} sender(s), ${listeners} listener(s), ${flush ? 'commit waits for the WAL flush' : 'synchronous_commit off'}: ${fmt.int(step.rate)}/s` +
            (step.latency
              ? `, p50 ${fmt.ms(step.latency.p50)} ms, p99 ${fmt.ms(step.latency.p99)} ms, ${step.received}/${step.sent} received`
              : '') +
            `, PostgreSQL CPU ${fmt.pct(step.postgresCpu)}, sender CPU ${fmt.pct(step.senderCpu)}, machine ${fmt.pct(step.machine)}`,
        );
      }
    }

    // 2. Three replicas.
    const shared = { DATABASE_URL: url, TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('hex') };
    for (const name of ['A', 'B', 'C']) gateways.push(await startReplica(`replica ${name}`, shared));
    const [a, b, c] = gateways as [GatewayProc, GatewayProc, GatewayProc];
    const ws = (g: GatewayProc) => `${g.origin.replace(/^http/, 'ws')}/graphql`;
    env.log(`  replicas at ${gateways.map((g) => g.origin).join(', ')}; PostgreSQL on ${pgPlacement}`);

    // 3. Fan-out: the same 1,000 subscribers on A alone (webhooks to A), or spread over B and C (webhooks to A).
    const job = (subscribersOn: GatewayProc[]): FanoutLoad => ({
      kind: 'fanout',
      wsUrl: ws(subscribersOn[0]!),
      wsUrls: subscribersOn.map(ws),
      apiKey: API_KEY,
      subscribers: SUBSCRIBERS,
      rounds: 1,
      idsPerRound: IDS_PER_ROUND,
      webhook: { origin: a.origin, path: WEBHOOK_PATH, headers: webhookHeaders, body: failureBody('{{id}}', '{{ts}}') },
      subscription: SUBSCRIPTION,
      timestampPath: 'correlationId',
      gatewayPid: subscribersOn[0]!.proc.pid,
      idlePids: gateways.map((g) => g.proc.pid).filter((pid) => pid !== subscribersOn[0]!.proc.pid),
      cpuPids: [a.proc.pid, b.proc.pid, c.proc.pid, ...pgPids()],
    });
    const rounds = env.options.rounds >= 2 ? 3 : 1;
    const single: FanoutResult[] = [];
    const spread: FanoutResult[] = [];
    for (let round = 0; round < rounds; round++) {
      await waitForQuiet();
      single.push(await env.lg.run<FanoutResult>(job([a])));
      await waitForQuiet();
      spread.push(await env.lg.run<FanoutResult>(job([b, c])));
    }
    const fans = [
      { name: 'one replica: webhooks and subscribers on A', where: ['A'], fan: combine(single, 1) },
      { name: 'three replicas: webhooks to A, subscribers on B and C', where: ['B', 'C'], fan: combine(spread, 2) },
    ];
    const cores = (cpu: number[]) => ({
      a: cpu[0]!,
      b: cpu[1]!,
      c: cpu[2]!,
      postgres: cpu.slice(3).reduce((s, v) => s + v, 0),
    });
    for (const { name, fan } of fans) {
      const cpu = cores(fan.cpu);
      env.log(
        `  ${name}: ${fan.deliveries}/${fan.expected} deliveries, ${fmt.int(fan.deliveriesPerSecond)}/s, p50 ${fmt.ms(fan.latency.p50)} ms, p99 ${fmt.ms(fan.latency.p99)} ms, ` +
          `webhook p99 ${fmt.ms(fan.webhook.p99)} ms, CPU A ${fmt.pct(cpu.a)} B ${fmt.pct(cpu.b)} C ${fmt.pct(cpu.c)} PostgreSQL ${fmt.pct(cpu.postgres)}` +
          (fan.errors.length ? `; errors: ${fan.errors.join(' | ')}` : ''),
      );
    }

    // 4. The gateway's path at rising rates, no subscriber: webhooks at A, a probe LISTENs beside B and C.
    const probe = new pg.Client({ connectionString: url, application_name: 'bench-probe-listen' });
    await probe.connect();
    let notices = 0;
    let lastNotice = 0;
    probe.on('notification', (msg) => {
      if (msg.channel !== GATEWAY_CHANNEL) return;
      notices += 1;
      lastNotice = performance.now();
    });
    await probe.query(`LISTEN ${GATEWAY_CHANNEL}`);
    const idle: PathStep[] = [];
    // Warm-up (not recorded): the replicas' pools, JIT and the sender's connections.
    await env.lg.run<HttpResult>({
      kind: 'http',
      origin: a.origin,
      path: WEBHOOK_PATH,
      headers: webhookHeaders,
      body: failureBody('{{uuid}}'),
      connections: 64,
      durationMs: 2_000,
      rate: RATES[0]! / 2,
      expectStatus: 204,
    });
    for (const rate of RATES) {
      await waitForQuiet();
      const n0 = notices;
      const sampler = queueSampler(admin);
      const cpu = startWindow(gateways, pgPids);
      const r = await env.lg.run<HttpResult>({
        kind: 'http',
        origin: a.origin,
        path: WEBHOOK_PATH,
        headers: webhookHeaders,
        body: failureBody('{{uuid}}'),
        connections: 64,
        durationMs: stepMs,
        rate,
        expectStatus: 204,
      });
      const answered = performance.now();
      const acknowledged = r.requests - r.errors;
      const deadline = answered + 5_000;
      while (notices - n0 < acknowledged && performance.now() < deadline) await sleep(10);
      const step: PathStep = {
        rate,
        acknowledgedRate: acknowledged / (stepMs / 1000),
        errors: r.errors,
        dropped: r.dropped,
        webhook: r.latency,
        noticeRate: (notices - n0) / (stepMs / 1000),
        drainMs: Math.max(0, lastNotice - answered),
        queueUsage: await sampler(),
        cpu: cpu(),
        saturated: false,
      };
      step.saturated =
        step.acknowledgedRate < KEEP_UP * rate ||
        r.dropped > 0 ||
        r.latency.p99 > LATENCY_LIMIT_MS ||
        notices - n0 < acknowledged;
      idle.push(step);
      env.log(
        `  path, no subscriber, ${rate}/s offered: ${fmt.int(step.acknowledgedRate)}/s acknowledged (${r.errors} errors, ${r.dropped} dropped), webhook p50 ${fmt.ms(r.latency.p50)} ms p99 ${fmt.ms(r.latency.p99)} ms, ` +
          `${fmt.int(step.noticeRate!)} NOTIFY/s at the probe, last ${fmt.int(step.drainMs!)} ms after the last answer, queue ${(step.queueUsage * 100).toFixed(4)}%, ` +
          `CPU A ${fmt.pct(step.cpu.a)} B ${fmt.pct(step.cpu.b)} C ${fmt.pct(step.cpu.c)} PostgreSQL ${fmt.pct(step.cpu.postgres)} machine ${fmt.pct(step.cpu.machine)}` +
          (r.errorSamples.length ? `; ${r.errorSamples.join(' | ')}` : ''),
      );
      if (stopHere(idle)) break;
    }
    await probe.end();

    // 5. The same with 1,000 subscribers waiting on B and C, each on its own authReqId (scenario 7's model).
    const opened: MixOpenResult[] = [];
    for (const g of [b, c]) {
      opened.push(
        await env.lg.run<MixOpenResult>({
          kind: 'mix-open',
          wsUrl: ws(g),
          apiKey: API_KEY,
          connections: SUBSCRIBERS / 2,
          subscription: SUBSCRIPTION,
          gatewayPid: g.proc.pid,
        }),
      );
    }
    const busy: PathStep[] = [];
    try {
      for (const rate of RATES) {
        await waitForQuiet();
        const sampler = queueSampler(admin);
        const cpu = startWindow(gateways, pgPids);
        const r = await env.lg.run<MixRateResult>({
          kind: 'mix-rate',
          rate,
          durationMs: stepMs,
          webhook: { origin: a.origin, path: WEBHOOK_PATH, headers: webhookHeaders, body: failureBody('{{id}}') },
          connections: 64,
          gatewayPid: a.proc.pid,
        });
        const step: PathStep = {
          rate,
          acknowledgedRate: r.acknowledged / (stepMs / 1000),
          errors: r.webhookErrors,
          dropped: r.dropped,
          webhook: r.webhookLatency,
          deliveredRate: r.delivered / (stepMs / 1000),
          delivery: r.latency,
          missing: r.missing,
          queueUsage: await sampler(),
          cpu: cpu(),
          saturated: false,
        };
        step.saturated =
          step.deliveredRate! < KEEP_UP * rate || r.dropped > 0 || r.latency.p99 > LATENCY_LIMIT_MS || r.missing > 0;
        busy.push(step);
        env.log(
          `  path, 1,000 subscribers on B and C, ${rate}/s offered: ${fmt.int(step.acknowledgedRate)}/s acknowledged, ${fmt.int(step.deliveredRate!)}/s delivered ` +
            `(${r.missing} missing, ${r.noSubscriber} without a waiting subscriber, ${r.dropped} dropped), webhook → subscriber p50 ${fmt.ms(r.latency.p50)} ms p99 ${fmt.ms(r.latency.p99)} ms, ` +
            `webhook p99 ${fmt.ms(r.webhookLatency.p99)} ms, queue ${(step.queueUsage * 100).toFixed(4)}%, ` +
            `CPU A ${fmt.pct(step.cpu.a)} B ${fmt.pct(step.cpu.b)} C ${fmt.pct(step.cpu.c)} PostgreSQL ${fmt.pct(step.cpu.postgres)} machine ${fmt.pct(step.cpu.machine)}` +
            (r.errors.length ? `; ${r.errors.join(' | ')}` : ''),
        );
        if (stopHere(busy)) break;
      }
    } finally {
      await env.lg.run({ kind: 'mix-close' });
    }
    await admin.end();
    const loadAfter = loadAverages();

    // The ceiling: the highest step that kept up, on each path.
    const kept = (steps: PathStep[], figure: (s: PathStep) => number) =>
      Math.max(0, ...steps.filter((s) => !s.saturated).map(figure));
    const idleCeiling = kept(idle, (s) => s.acknowledgedRate);
    const busyCeiling = kept(busy, (s) => s.deliveredRate!);
    const rawBest = (listeners: number, flush: boolean) =>
      Math.max(...raw.filter((s) => s.listeners === listeners && s.flush === flush).map((s) => s.rate));
    const ncpu = os.cpus().length;
    const limitOf = (s: PathStep | undefined): string => {
      if (!s) return 'n/a';
      const parts = [
        `A ${fmt.pct(s.cpu.a)}`,
        `B ${fmt.pct(s.cpu.b)}`,
        `C ${fmt.pct(s.cpu.c)}`,
        `PostgreSQL ${fmt.pct(s.cpu.postgres)}`,
      ];
      return `${parts.join(', ')}; machine ${fmt.pct(s.cpu.machine / ncpu)} of ${ncpu} cores busy`;
    };
    const firstSaturated = (steps: PathStep[]) => steps.find((s) => s.saturated);
    const elapsed = Math.round((performance.now() - started) / 1000);

    const fanRows = fans.flatMap(({ name, where, fan }) => {
      const cpu = cores(fan.cpu);
      return where.map(
        (replica, g) =>
          `| ${name} | ${replica} (${fmt.int(SUBSCRIBERS / where.length)}) | ${fmt.int(fan.deliveries)} of ${fmt.int(fan.expected)} | ${fmt.int(fan.deliveriesPerSecond)} | ` +
          `${fmt.ms(fan.byGroup[g]!.p50)} | ${fmt.ms(fan.byGroup[g]!.p99)} | ${fmt.ms(fan.webhook.p50)} | ${fmt.ms(fan.webhook.p99)} | ` +
          `${fmt.pct(cpu.a)} / ${fmt.pct(cpu.b)} / ${fmt.pct(cpu.c)} | ${fmt.pct(cpu.postgres)} | ${fan.errors.length ? fan.errors.join('; ').slice(0, 160) : 'none'} |`,
      );
    });
    const markdown = [
      `Run only with \`npm run bench -- --only 8\` (it takes about ${Math.max(1, Math.round(elapsed / 60))} minutes, which would push the whole suite past 10). ` +
        `Three gateway processes (replicas A, B, C) on one embedded PostgreSQL (${'`embedded-postgres`'}, default settings, fsync on), sharing \`DATABASE_URL\` and \`TOKEN_ENCRYPTION_KEY\`. ` +
        `Placement on ${ncpu} cores: the three replicas share CPU ${env.placement.server ?? '(unpinned)'}, PostgreSQL (${pgPlacement}) shares the load generator's core: ` +
        `two cores cannot give five processes a core each, so these figures are a floor, and the ratios within the run are what they show. ` +
        `Load averages (\`uptime\`) at the start: ${loadBefore}; at the end: ${loadAfter} (a machine shared with other engineers).`,
      '',
      `**Fan-out across replicas.** ${fmt.int(SUBSCRIBERS)} graphql-ws subscribers, each on its own WebSocket, all subscribed to ${IDS_PER_ROUND} new authReqIds per round, as in scenario 5; ` +
        `${IDS_PER_ROUND} failure notifications go to A one after the other. Once with every subscriber on A (one replica), once with half on B and half on C (the event crosses through ` +
        `the log and LISTEN/NOTIFY), ${rounds} round(s) each, alternating. Latency: webhook sent → subscriber's receipt (the sender's clock in \`correlation_id\`). ` +
        `CPU over the delivery windows, in cores; PostgreSQL's is the sum over the postmaster and its processes (/proc/<pid>/stat).`,
      '',
      '| deployment | subscribers at | deliveries | deliveries/s | p50 ms | p99 ms | webhook p50 ms | webhook p99 ms | CPU A / B / C | PostgreSQL CPU | errors |',
      '|---|---|---:|---:|---:|---:|---:|---:|---|---:|---|',
      ...fanRows,
      '',
      `**Raw NOTIFY on this PostgreSQL** (its own database, no gateway running yet): closed loop, each \`select pg_notify(…)\` its own transaction like the gateway's publish, ` +
        `a ~30-byte payload holding the sender's clock; ${stepMs / 1000} s per step. A transaction that notifies commits under a lock PostgreSQL holds for the whole server ` +
        `until the commit is flushed (async.c, PreCommit_Notify), so notifying transactions cannot share a WAL flush; the last rows commit with \`synchronous_commit\` off ` +
        `for that transaction alone (\`set_config(…, true)\` in the same statement), which the gateway's publish does not do: its path measured alike either way (docs/decisions/048).`,
      '',
      '| senders | listeners | commit | NOTIFY/s | p50 ms | p99 ms | received by each listener | PostgreSQL CPU | sender CPU | machine CPU (cores) |',
      '|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|',
      ...raw.map(
        (s) =>
          `| ${s.connections} | ${s.listeners} | ${s.flush ? 'waits for the WAL flush' : '`synchronous_commit` off'} | ${fmt.int(s.rate)} | ${s.latency ? fmt.ms(s.latency.p50) : '–'} | ${s.latency ? fmt.ms(s.latency.p99) : '–'} | ` +
          `${s.listeners ? `${fmt.int(s.received)} of ${fmt.int(s.sent)}` : '–'} | ${fmt.pct(s.postgresCpu)} | ${fmt.pct(s.senderCpu)} | ${s.machine.toFixed(2)} |`,
      ),
      '',
      `**The gateway's event path at rising rates.** Open loop: failure notifications (a fresh auth_req_id each) to A's webhook at the offered rate, ${stepMs / 1000} s per step, 64 sender connections; ` +
        `a step past the ceiling (marked) has fewer than ${KEEP_UP * 100}% of the offered rate acknowledged (or delivered), a dropped request, a p99 above ${LATENCY_LIMIT_MS} ms, or a NOTIFY or delivery missing; ` +
        `the ladder stops after ${STOP_AFTER} such steps in a row, and the ceiling is the highest step below it that kept up. A 2 s warm-up at ${RATES[0]! / 2}/s comes first. ` +
        `Each webhook is an INSERT committed before its 204 and then a NOTIFY carrying its sequence number; B and C read each notified event from the log. ` +
        `Without subscribers a probe connection LISTENs beside B and C and counts the NOTIFYs; with subscribers, ${fmt.int(SUBSCRIBERS)} wait on B and C (half each), each on its own authReqId, ` +
        `and each notification goes to the one waiting longest (scenario 7's model), which subscribes again when served. Queue: the highest \`pg_notification_queue_usage()\` sampled.`,
      '',
      '| subscribers | offered/s | acknowledged/s | NOTIFY/s at the probe, or delivered/s | webhook p50 ms | webhook p99 ms | webhook → subscriber p50 ms | p99 ms | queue | CPU A / B / C | PostgreSQL CPU | machine (cores) | |',
      '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|',
      ...[...idle.map((s) => ({ s, n: 0 })), ...busy.map((s) => ({ s, n: SUBSCRIBERS }))].map(
        ({ s, n }) =>
          `| ${fmt.int(n)} | ${fmt.int(s.rate)} | ${fmt.int(s.acknowledgedRate)} | ${fmt.int(n ? s.deliveredRate! : s.noticeRate!)} | ${fmt.ms(s.webhook.p50)} | ${fmt.ms(s.webhook.p99)} | ` +
          `${s.delivery ? fmt.ms(s.delivery.p50) : '–'} | ${s.delivery ? fmt.ms(s.delivery.p99) : '–'} | ${(s.queueUsage * 100).toFixed(3)}% | ` +
          `${fmt.pct(s.cpu.a)} / ${fmt.pct(s.cpu.b)} / ${fmt.pct(s.cpu.c)} | ${fmt.pct(s.cpu.postgres)} | ${s.cpu.machine.toFixed(2)} | ${s.saturated ? '**past the ceiling**' : ''}${s.errors || s.dropped || s.missing ? ` ${s.errors} errors, ${s.dropped} dropped${s.missing !== undefined ? `, ${s.missing} missing` : ''}` : ''} |`,
      ),
      '',
      `Ceiling on this machine: ${fmt.int(idleCeiling)} notifications/s across replicas without subscribers, ${fmt.int(busyCeiling)}/s delivered to 1,000 waiting subscribers on other replicas; ` +
        `raw NOTIFY reached ${fmt.int(rawBest(0, true))}/s without listeners and ${fmt.int(rawBest(3, true))}/s with three when each commit waits for its WAL flush, ` +
        `${fmt.int(rawBest(3, false))}/s with three when it does not. ` +
        `CPU at the first step past the ceiling: without subscribers ${limitOf(firstSaturated(idle))}; with subscribers ${limitOf(firstSaturated(busy))}. Scenario took ${elapsed} s.`,
    ].join('\n');
    return {
      id: 8,
      title: 'Replicas on PostgreSQL and the ceiling of LISTEN/NOTIFY',
      markdown,
      targets: [
        {
          target: 'webhook → subscriber across replicas (B, C) vs one replica, 1,000 subscribers',
          measured: `p99 ${fmt.ms(fans[1]!.fan.latency.p99)} ms vs ${fmt.ms(fans[0]!.fan.latency.p99)} ms; ${fmt.int(fans[1]!.fan.deliveriesPerSecond)} vs ${fmt.int(fans[0]!.fan.deliveriesPerSecond)} deliveries/s`,
          met: null,
        },
        {
          target: 'ceiling of the event path across replicas (this machine)',
          measured: `${fmt.int(idleCeiling)}/s without subscribers, ${fmt.int(busyCeiling)}/s delivered to 1,000 subscribers`,
          met: null,
        },
      ],
    };
  } finally {
    for (const g of gateways.reverse()) await g.proc.stop().catch(() => undefined);
    await server?.stop().catch(() => undefined);
  }
}
