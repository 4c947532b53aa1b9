import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { startNodeArgs } from '../lib/build.js';
import { API_KEY, NOTIFICATION_TOKEN, type BenchEnv, type ScenarioReport } from '../lib/env.js';
import { mean, measure, type Target } from '../lib/harness.js';
import { othersSince, ROOT, spawnNode, waitForQuiet } from '../lib/processes.js';
import type { MixOpenResult, MixRateResult } from '../lib/protocol.js';
import { fmt } from '../lib/stats.js';
import { HIVE_WEBHOOK_PEER, startWebhookPeer, SUBSCRIPTION } from './fanout.js';
import { hasWebhook, notificationBody, WEBHOOK_PATH, webhookTarget } from './webhook.js';

/** Waiting users: one graphql-ws connection each, one pending subscription each. */
const SUBSCRIPTIONS = 10_000;
const SHARES = [0.25, 0.5, 0.8];
/** Keep-alive connections of the webhook sender (the mobile identity service). */
const SENDER_CONNECTIONS = 128;
const TARGET_P99_MS = 10;

/** Where the intake maximum came from. */
export interface IntakeMax {
  rps: number;
  source: string;
}

interface Window {
  share: number;
  rate: number;
  round: number;
  result: MixRateResult;
  otherCpu: number;
}

/** Scenario 4's measurement, shortened: the FULL gateway alone, closed loop, when scenario 4 did not run. */
async function shortIntakeMax(env: BenchEnv): Promise<IntakeMax> {
  const durationMs = Math.min(env.options.durationMs, 3_000);
  const load = { body: notificationBody(), connections: env.options.connections, expectStatus: 204 };
  const target = webhookTarget(env.gateway);
  await measure(env.lg, target, { ...load, durationMs: Math.min(env.options.warmupMs, 1_000) }, env.driverProcs);
  const m = await measure(env.lg, target, { ...load, durationMs }, env.driverProcs);
  env.log(
    `  intake maximum (scenario 4 not run): ${Math.round(m.result.rps)} notifications/s, errors ${m.result.errors}, other CPU ${fmt.pct(m.otherCpu)}`,
  );
  return {
    rps: m.result.rps,
    source: `a ${durationMs / 1000} s closed-loop measurement of the FULL gateway alone just before (scenario 4's load, ${env.options.connections} connections; scenario 4 did not run)`,
  };
}

/** One open-loop window of scenario 7 against the server at `origin` (its process `pid`), with the machine's other CPU over it. */
async function mixWindow(
  env: BenchEnv,
  t: { origin: string; pid: number },
  rate: number,
  durationMs: number,
): Promise<{ result: MixRateResult; otherCpu: number }> {
  await waitForQuiet();
  const others = othersSince();
  const result = await env.lg.run<MixRateResult>({
    kind: 'mix-rate',
    rate,
    durationMs,
    webhook: {
      origin: t.origin,
      path: WEBHOOK_PATH,
      headers: webhookTarget(env.gateway).headers,
      body: notificationBody().replace('{{uuid}}', '{{id}}'),
    },
    connections: SENDER_CONNECTIONS,
    gatewayPid: t.pid,
  });
  return { result, otherCpu: others().cores };
}

/**
 * A warm-up at the lowest rate (the subscribe-again path and the sender's connections), then `env.options.rounds`
 * rounds of one window per share of the intake maximum, each logged with `label` before it.
 */
async function mixRounds(
  env: BenchEnv,
  t: { origin: string; pid: number },
  intake: IntakeMax,
  windowMs: number,
  label: string,
): Promise<Window[]> {
  const windows: Window[] = [];
  await mixWindow(env, t, Math.max(1, Math.round(intake.rps * SHARES[0]!)), Math.min(env.options.warmupMs, 2_000));
  for (let round = 0; round < env.options.rounds; round++) {
    for (const share of SHARES) {
      const rate = Math.max(1, Math.round(intake.rps * share));
      const { result: r, otherCpu } = await mixWindow(env, t, rate, windowMs);
      windows.push({ share, rate, round, result: r, otherCpu });
      env.log(
        `  ${label}${Math.round(share * 100)}% (${rate}/s) round ${round + 1}: ${r.delivered}/${r.sent} delivered, p50 ${fmt.ms(r.latency.p50)} ms, p99 ${fmt.ms(r.latency.p99)} ms, ` +
          `max ${fmt.ms(r.latency.max)} ms, webhook p99 ${fmt.ms(r.webhookLatency.p99)} ms, dropped ${r.dropped}, no subscriber ${r.noSubscriber}, ` +
          `missing ${r.missing}, webhook errors ${r.webhookErrors}, waiting ${r.waitingAtStart}→min ${r.waitingMin}, server CPU ${fmt.pct(r.gatewayCpu)}, ` +
          `load generator CPU ${fmt.pct(r.loadgenCpu)} (sender lag p99 ${fmt.ms(r.sendLag.p99)} ms), other CPU ${fmt.pct(otherCpu)}` +
          (r.errors.length ? `\n    errors: ${r.errors.join(' | ')}` : ''),
      );
    }
  }
  return windows;
}

function saturated(r: MixRateResult): boolean {
  return r.dropped > 0 || r.noSubscriber > 0 || r.acknowledged < r.scheduled * 0.95;
}

function lost(r: MixRateResult): number {
  return r.dropped + r.noSubscriber + r.webhookErrors + r.missing;
}

/** Scenario 7's windows, one row per share: sums, and the mean of the rounds' percentiles. */
function rowsOf(windows: Window[]) {
  return SHARES.map((share) => {
    const ws = windows.filter((w) => w.share === share);
    const rs = ws.map((w) => w.result);
    const sum = (f: (r: MixRateResult) => number) => rs.reduce((s, r) => s + f(r), 0);
    return {
      share,
      rate: ws[0]?.rate ?? NaN,
      sent: sum((r) => r.sent),
      scheduled: sum((r) => r.scheduled),
      acknowledged: sum((r) => r.acknowledged),
      delivered: sum((r) => r.delivered),
      lost: sum(lost),
      saturated: rs.some(saturated),
      p50: mean(rs.map((r) => r.latency.p50)),
      p99: mean(rs.map((r) => r.latency.p99)),
      p99s: rs.map((r) => fmt.ms(r.latency.p99)).join(' / '),
      max: Math.max(...rs.map((r) => r.latency.max)),
      webhookP99: mean(rs.map((r) => r.webhookLatency.p99)),
      lagP99: mean(rs.map((r) => r.sendLag.p99)),
      gatewayCpu: mean(rs.map((r) => r.gatewayCpu)),
      loadgenCpu: mean(rs.map((r) => r.loadgenCpu)),
      otherCpu: mean(ws.map((w) => w.otherCpu)),
      errors: [...new Set(rs.flatMap((r) => r.errors))],
      breakdown: `dropped ${sum((r) => r.dropped)}, no subscriber ${sum((r) => r.noSubscriber)}, webhook errors ${sum((r) => r.webhookErrors)}, not delivered ${sum((r) => r.missing)}`,
    };
  });
}

type MixRow = ReturnType<typeof rowsOf>[number];

const MIX_HEADER = [
  '| load | notifications/s | sent | 204 | delivered | not delivered | p50 ms | p99 ms | p99 per round | max ms | webhook p99 ms | server CPU | load generator CPU | sender lag p99 ms | other CPU |',
  '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
];

function rowLine(r: MixRow, load: string, rate: string): string {
  return (
    `| ${load}${r.saturated ? ' (saturated)' : ''} | ${rate} | ${fmt.int(r.sent)} | ${fmt.int(r.acknowledged)} | ${fmt.int(r.delivered)} | ` +
    `${r.lost}${r.lost ? ` (${r.breakdown})` : ''} | ${fmt.ms(r.p50)} | ${r.saturated ? fmt.ms(r.p99) : `**${fmt.ms(r.p99)}**`} | ${r.p99s} | ${fmt.ms(r.max)} | ${fmt.ms(r.webhookP99)} | ` +
    `${fmt.pct(r.gatewayCpu)} | ${fmt.pct(r.loadgenCpu)} | ${fmt.ms(r.lagP99)} | ${fmt.pct(r.otherCpu)} |`
  );
}

/** The peer's windows: the target's share and the highest (the suite stays under 10 minutes). */
const PEER_SHARES = [0.5, 0.8];

/** Closed-loop connections of the peer's intake measurement: each notification holds the peer for a while (every filter runs). */
const PEER_INTAKE_CONNECTIONS = 4;

/**
 * The same 10,000 waiting users on Hive Gateway's webhook peer (fresh process, pinned like the gateway).
 * Its subscriptions stay open after their event, so each connection completes its own and subscribes again.
 * The peer's rates are shares of its own intake maximum, measured with the 10,000 subscriptions open
 * (without a subscription on the topic it answers 404): the gateway's rates are far beyond it.
 */
async function peerMix(env: BenchEnv, gatewayIntake: IntakeMax, windowMs: number): Promise<string[]> {
  const { peer, fan } = await startWebhookPeer(env);
  if (!peer.proc || !fan) return [`${HIVE_WEBHOOK_PEER} could not start: ${peer.failure}`];
  const proc = peer.proc;
  try {
    const rssBefore = proc.rssBytes();
    const open = await env.lg.run<MixOpenResult>({
      kind: 'mix-open',
      wsUrl: fan.wsUrl,
      apiKey: API_KEY,
      connections: SUBSCRIPTIONS,
      subscription: fan.subscription,
      gatewayPid: fan.pid,
      clientCompletes: true,
    });
    const rssOpen = proc.rssBytes();
    env.log(
      `  ${HIVE_WEBHOOK_PEER}: ${fmt.int(open.opened)} connections in ${open.seconds.toFixed(1)} s (${open.failed} failed), RSS ${fmt.mb(rssBefore)} → ${fmt.mb(rssOpen)}`,
    );
    const windows: Window[] = [];
    let intake: number;
    try {
      // Fresh auth_req_ids that no subscriber waits for: every subscription's filter still runs on each.
      const target: Target = {
        name: HIVE_WEBHOOK_PEER,
        proc,
        origin: fan.origin,
        path: WEBHOOK_PATH,
        headers: webhookTarget(env.gateway).headers,
      };
      const m = await measure(
        env.lg,
        target,
        {
          body: notificationBody(),
          connections: PEER_INTAKE_CONNECTIONS,
          durationMs: Math.min(env.options.durationMs, 3_000),
          expectStatus: 204,
        },
        env.driverProcs,
      );
      intake = m.result.rps;
      env.log(
        `  ${HIVE_WEBHOOK_PEER}: intake maximum with ${fmt.int(open.opened)} subscriptions open: ${intake.toFixed(1)} notifications/s (${m.result.requests} in ${m.result.seconds.toFixed(1)} s, errors ${m.result.errors})`,
      );
      for (const share of PEER_SHARES) {
        const rate = Math.max(0.5, intake * share);
        const { result: r, otherCpu } = await mixWindow(env, { origin: fan.origin, pid: fan.pid }, rate, windowMs);
        windows.push({ share, rate, round: 0, result: r, otherCpu });
        env.log(
          `  ${HIVE_WEBHOOK_PEER} ${Math.round(share * 100)}% (${rate.toFixed(1)}/s): ${r.delivered}/${r.sent} delivered, p50 ${fmt.ms(r.latency.p50)} ms, p99 ${fmt.ms(r.latency.p99)} ms, ` +
            `webhook p99 ${fmt.ms(r.webhookLatency.p99)} ms, missing ${r.missing}, webhook errors ${r.webhookErrors}, server CPU ${fmt.pct(r.gatewayCpu)}` +
            (r.errors.length ? `\n    errors: ${r.errors.join(' | ')}` : ''),
        );
      }
    } finally {
      await env.lg.run({ kind: 'mix-close' });
    }
    const rows = rowsOf(windows).filter((r) => PEER_SHARES.includes(r.share));
    const share25 = gatewayIntake.rps * SHARES[0]!;
    return [
      `**${HIVE_WEBHOOK_PEER}** (bench/peers/hive-webhooks.ts, a fresh process pinned like the gateway), the same ${fmt.int(SUBSCRIPTIONS)} waiting users and the same notifications, ` +
        `on its subscription field (scenario 5); its subscriptions stay open after their event, so each connection completes its own on the first \`next\` and subscribes again. ` +
        `Its intake maximum with the ${fmt.int(open.opened)} subscriptions open is **${intake.toFixed(1)} notifications/s** (closed loop, ${PEER_INTAKE_CONNECTIONS} connections, fresh auth_req_ids): ` +
        'the in-memory pubsub hands every event to every subscription on the topic and each runs its `filterBy`, so a notification costs work in proportion to all waiting users. ' +
        `The gateway's lowest rate here (25%, ${fmt.int(share25)}/s) is ${fmt.ratio(share25 / intake)} × that maximum, so the peer runs at 50% (the target's share) and 80% of its own maximum instead, one round, ${windowMs / 1000} s per window ` +
        '(few notifications per window: p99 is close to the max).',
      '',
      ...MIX_HEADER,
      ...rows.map((r) => rowLine(r, `${Math.round(r.share * 100)}% of its intake max`, r.rate.toFixed(1))),
      '',
      `${HIVE_WEBHOOK_PEER} RSS: ${fmt.mb(rssBefore)} fresh, ${fmt.mb(rssOpen)} with ${fmt.int(open.opened)} subscriptions open ` +
        `(+${fmt.kb((rssOpen - rssBefore) / Math.max(1, open.opened))} each; opened in ${open.seconds.toFixed(1)} s, ${open.failed} failed).` +
        (rows.some((r) => r.errors.length)
          ? ` Errors: ${[...new Set(rows.flatMap((r) => r.errors))].join('; ').slice(0, 300)}`
          : ''),
    ];
  } finally {
    await proc.stop();
  }
}

/**
 * Runs `work` on scenario 7's floor (bench/servers/mix-baseline.ts) in a fresh process named `name`, pinned like the
 * gateway, its data in a temporary directory removed afterwards (scenario 9 measures it too: decision 151).
 */
export async function withFloor<T>(
  env: BenchEnv,
  name: string,
  work: (floor: { origin: string; pid: number }) => Promise<T>,
): Promise<T> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mix-floor-'));
  try {
    const proc = await spawnNode(name, {
      script: 'bench/servers/mix-baseline.ts',
      args: ['--data-dir', dataDir, '--api-key', API_KEY, '--token', NOTIFICATION_TOKEN],
      nodeArgs: startNodeArgs(ROOT),
      cpus: env.placement.server,
      readiness: { line: true },
    });
    try {
      return await work({ origin: String(proc.ready.url), pid: proc.pid });
    } finally {
      await proc.stop();
    }
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

/**
 * The same mix, at the gateway's own rates, on its floor: the work written by hand (bench/servers/mix-baseline.ts, a
 * fresh process pinned like the gateway): what the goal's p99 is against on this machine, as the durable baseline is
 * for a creation's.
 */
async function floorMix(
  env: BenchEnv,
  intake: IntakeMax,
  windowMs: number,
): Promise<{ lines: string[]; half: MixRow | null }> {
  try {
    return await withFloor(env, FLOOR, async ({ origin, pid }) => {
      const open = await env.lg.run<MixOpenResult>({
        kind: 'mix-open',
        wsUrl: `${origin.replace(/^http/, 'ws')}/graphql`,
        apiKey: API_KEY,
        connections: SUBSCRIPTIONS,
        subscription: SUBSCRIPTION,
        gatewayPid: pid,
      });
      env.log(
        `  ${FLOOR}: ${fmt.int(open.opened)} connections in ${open.seconds.toFixed(1)} s (${open.failed} failed)`,
      );
      let windows: Window[];
      try {
        windows = await mixRounds(env, { origin, pid }, intake, windowMs, `${FLOOR} `);
      } finally {
        await env.lg.run({ kind: 'mix-close' });
      }
      const rows = rowsOf(windows);
      return {
        half: open.opened === SUBSCRIPTIONS ? (rows.find((r) => r.share === 0.5) ?? null) : null,
        lines: [
          `**${FLOOR}** (bench/servers/mix-baseline.ts, a fresh process pinned like the gateway): the same ${fmt.int(SUBSCRIPTIONS)} waiting users and the same notifications at the gateway's rates, ` +
            'served by the work written by hand: node:http, ws, better-sqlite3 and node:crypto; the token checked, the body parsed and checked, the tokens sealed (AES-256-GCM), ' +
            'a keyed fingerprint, one insert durable before the 204 (group commit, the WAL fdatasynced off the event loop), the `next` with a sealed cursor and the `complete` in one write, ' +
            'the stored event read at each subscribe, keep-alive pings every 12 s; no GraphQL, no validation library, no logging or metrics. ' +
            `What the goal's p99 stands against on this machine (opened in ${open.seconds.toFixed(1)} s, ${open.failed} failed).`,
          '',
          ...MIX_HEADER,
          ...rows.map((r) => rowLine(r, `${Math.round(r.share * 100)}% of the gateway's intake max`, fmt.int(r.rate))),
        ],
      };
    });
  } catch (error) {
    return { lines: [`${FLOOR} could not run: ${error instanceof Error ? error.message : String(error)}`], half: null };
  }
}

const FLOOR = 'the mix written by hand';

/**
 * Scenario 7: 10,000 waiting users, each a graphql-ws connection with one pending
 * `mobileIdAuthentication(authReqId)` subscription on its own auth_req_id; positive notifications, each to
 * one waiting subscriber, at fixed rates (open loop) of 25, 50 and 80% of the gateway's intake maximum.
 */
export async function subscriptionMix(env: BenchEnv, given: IntakeMax | null): Promise<ScenarioReport> {
  env.log(
    `scenario 7: realistic mix: ${fmt.int(SUBSCRIPTIONS)} waiting subscriptions, notifications at 25/50/80% of the intake maximum`,
  );
  const targetLine = `realistic mix: p99 ≤ ${TARGET_P99_MS} ms webhook→subscriber at 50% of the intake maximum with 10k subscriptions`;
  if (!(await hasWebhook(env.gateway))) {
    env.log('  skipped: POST /webhooks/mobile-id answers 404 (not built yet)');
    return {
      id: 7,
      title: 'Realistic subscription mix',
      markdown: 'Skipped: `POST /webhooks/mobile-id` answered 404 on this build.',
      targets: [{ target: targetLine, measured: 'not measured (no webhook route)', met: null }],
    };
  }
  const intake = given ?? (await shortIntakeMax(env));
  const windowMs = Math.min(env.options.durationMs, 6_000);
  const pid = env.gateway.proc.pid;

  const rssBefore = env.gateway.proc.rssBytes();
  const open = await env.lg.run<MixOpenResult>({
    kind: 'mix-open',
    wsUrl: `${env.gateway.origin.replace(/^http/, 'ws')}/graphql`,
    apiKey: API_KEY,
    connections: SUBSCRIPTIONS,
    subscription: SUBSCRIPTION,
    gatewayPid: pid,
  });
  await sleep(1_000);
  const rssOpen = env.gateway.proc.rssBytes();
  // What 10,000 idle connections cost the gateway with no notification at all (graphql-ws pings each every 12 s).
  const idle0 = env.gateway.proc.cpuSeconds();
  const idleT0 = performance.now();
  await sleep(2_000);
  const idleCpu = (env.gateway.proc.cpuSeconds() - idle0) / ((performance.now() - idleT0) / 1000);
  env.log(
    `  ${fmt.int(open.opened)} connections with a pending subscription each in ${open.seconds.toFixed(1)} s (${open.failed} failed); ` +
      `gateway RSS ${fmt.mb(rssBefore)} → ${fmt.mb(rssOpen)}, idle gateway CPU ${fmt.pct(idleCpu)}` +
      (open.errors.length ? `; errors: ${open.errors.join(' | ')}` : ''),
  );
  const windows: Window[] = [];
  let rssEnd = NaN;
  try {
    windows.push(...(await mixRounds(env, { origin: env.gateway.origin, pid }, intake, windowMs, '')));
    rssEnd = env.gateway.proc.rssBytes();
  } finally {
    await env.lg.run({ kind: 'mix-close' });
  }
  const floor = await floorMix(env, intake, windowMs);
  const peerLines = await peerMix(env, intake, windowMs);

  const rows = rowsOf(windows);
  const half = rows.find((r) => r.share === 0.5)!;
  const allOpen = open.opened === SUBSCRIPTIONS;
  const perSub = (rssOpen - rssBefore) / Math.max(1, open.opened);

  const markdown = [
    `${fmt.int(SUBSCRIPTIONS)} waiting users: each is a graphql-ws connection (raw \`ws\` speaking \`graphql-transport-ws\`, in the load generator process, opened 250 at a time) ` +
      `holding one pending \`mobileIdAuthentication(authReqId)\` subscription on its own auth_req_id (the query of scenario 5). ` +
      `Positive notifications (scenario 4's body) go to \`POST /webhooks/mobile-id\` in an open loop at ${SHARES.map((s) => `${s * 100}%`).join(', ')} of the intake maximum ` +
      `(${fmt.int(intake.rps)} notifications/s, from ${intake.source}), over ${SENDER_CONNECTIONS} keep-alive connections without pipelining. ` +
      'Each notification goes to one waiting subscriber: the sender takes the oldest untargeted auth_req_id. When a subscription completes (its event arrived), ' +
      'its connection subscribes again on a fresh auth_req_id (the next user on that socket), which joins the back of the queue, so 10,000 subscriptions stay open ' +
      `throughout and a fresh one waits behind all the others (at least ${(SUBSCRIPTIONS / Math.max(1, intake.rps * SHARES[2]!)).toFixed(1)} s at 80%) before it is targeted. ` +
      `Latency counts from the notification's *scheduled* send time to the subscriber's receipt (one clock: the load generator's), so a stall shows in the tail (no coordinated omission); ` +
      'the webhook p99 is scheduled time to the 204; *sender lag* is how late the load generator got to a scheduled send (near 0 when it keeps up: ' +
      'its latencies count from the schedule anyway). ' +
      `${windowMs / 1000} s per window, ${env.options.rounds} round(s) of 25 → 50 → 80% after a warm-up at 25%; ` +
      'percentiles are the mean of the rounds (max: the largest). After each window the sender waits for outstanding webhooks (3 s) and deliveries (5 s); ' +
      'what is still missing counts as not delivered, and its subscription is cancelled and replaced by a fresh one. CPU columns cover each window until its last delivery (or the end of the waits above); other CPU is what processes outside the benchmark used meanwhile. ' +
      'A row is marked saturated when a notification could not be sent (2,000 outstanding, or no subscriber waiting) or fewer than 95% of the notifications due were acknowledged.',
    '',
    ...MIX_HEADER,
    ...rows.map((r) => rowLine(r, `${Math.round(r.share * 100)}% of intake max`, fmt.int(r.rate))),
    '',
    `Gateway RSS (the FULL gateway, the same process as the earlier scenarios of the run): ${fmt.mb(rssBefore)} before the connections, **${fmt.mb(rssOpen)}** with ${fmt.int(open.opened)} subscriptions open ` +
      `(+${fmt.mb(rssOpen - rssBefore)}, ${fmt.kb(perSub)} each; opened in ${open.seconds.toFixed(1)} s, ${open.failed} failed), ${fmt.mb(rssEnd)} after the last window. ` +
      `With no notification, the open connections kept the gateway ${fmt.pct(idleCpu)} busy (2 s sample).` +
      (open.errors.length ? ` Errors while opening: ${open.errors.join('; ').slice(0, 300)}.` : ''),
    ...(rows.some((r) => r.errors.length)
      ? ['', `Errors: ${[...new Set(rows.flatMap((r) => r.errors))].join('; ').slice(0, 500)}`]
      : []),
    '',
    ...floor.lines,
    '',
    ...peerLines,
  ].join('\n');

  return {
    id: 7,
    title: 'Realistic subscription mix',
    markdown,
    targets: [
      {
        target: targetLine,
        measured:
          `p99 ${fmt.ms(half.p99)} ms (p50 ${fmt.ms(half.p50)} ms) at ${fmt.int(half.rate)} notifications/s, ${fmt.int(half.delivered)} of ${fmt.int(half.sent)} delivered` +
          `${half.saturated ? ', saturated' : ''}; ${fmt.int(open.opened)} subscriptions, gateway RSS ${fmt.mb(rssOpen)}` +
          (floor.half
            ? `; the same work written by hand at that rate: p99 ${fmt.ms(floor.half.p99)} ms (p50 ${fmt.ms(floor.half.p50)} ms)` +
              `${floor.half.saturated ? ', saturated' : ''}`
            : ''),
        met: allOpen && !half.saturated && half.lost === 0 && half.p99 <= TARGET_P99_MS,
      },
    ],
  };
}
