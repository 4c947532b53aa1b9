import { setTimeout as sleep } from 'node:timers/promises';

import { API_KEY, NOTIFICATION_TOKEN, type BenchEnv, type GatewayProc, type ScenarioReport } from '../lib/env.js';
import { spawnPeer, type PeerProc } from '../lib/mutation-references.js';
import type { FanoutLoad, FanoutResult, IdleResult } from '../lib/protocol.js';
import { fmt, summarize } from '../lib/stats.js';
import { HIVE_MOBILE_ID_SUBSCRIPTION } from '../peers/requests.js';
import { DELIVERY_BOUND_MS, probeCell, probeWebhooks, type ProbeRow, type ProbeTarget } from './webhook-probes.js';
import { hasWebhook, WEBHOOK_PATH } from './webhook.js';

export const SUBSCRIPTION = `subscription($authReqId: String!) {
  mobileIdAuthentication(authReqId: $authReqId) {
    ... on MobileIdAuthenticationFailed { authReqId reason correlationId receivedAt }
    ... on MobileIdAuthenticated { authReqId subject correlationId receivedAt }
  }
}`;

const SUBSCRIBERS = 1000;

/** Rounds of one gateway as one result: deliveries/s and CPU over the sum of the rounds' windows, percentiles over every delivery. */
function combine(results: FanoutResult[]): FanoutResult {
  const seconds = results.map((r) => r.deliveries / r.deliveriesPerSecond);
  const busy = seconds.reduce((a, b) => a + b, 0);
  const deliveries = results.reduce((a, r) => a + r.deliveries, 0);
  return {
    deliveries,
    expected: results.reduce((a, r) => a + r.expected, 0),
    deliveriesPerSecond: deliveries / busy,
    gatewayCpu: results.reduce((a, r, i) => a + r.gatewayCpu * seconds[i]!, 0) / busy,
    loadgenCpu: results.reduce((a, r, i) => a + r.loadgenCpu * seconds[i]!, 0) / busy,
    latency: summarize(results.flatMap((r) => r.samples ?? [])),
    subscribeCpuPerSubscription:
      results.reduce((a, r) => a + (r.subscribeCpuPerSubscription ?? NaN), 0) / results.length,
    clock: results.every((r) => r.clock === 'payload') ? 'payload' : 'sender',
    errors: [...new Set(results.flatMap((r) => r.errors))],
  };
}
const IDS_PER_ROUND = 10;

function wsUrl(g: GatewayProc): string {
  return `${g.origin.replace(/^http/, 'ws')}/graphql`;
}

/** A server the fan-out measures: a gateway process, or the Hive Gateway webhook peer. */
interface FanTarget {
  name: string;
  origin: string;
  wsUrl: string;
  pid: number;
  subscription: string;
}

const gatewayFan = (g: GatewayProc, name: string): FanTarget => ({
  name,
  origin: g.origin,
  wsUrl: wsUrl(g),
  pid: g.proc.pid,
  subscription: SUBSCRIPTION,
});

export const HIVE_WEBHOOK_PEER = 'Hive Gateway (webhooks, in-memory pubsub)';

/**
 * Hive Gateway's webhook peer (bench/peers/hive-webhooks.ts), pinned like the gateway; it does not stop the
 * suite when it cannot start (`proc` null, `failure` says why).
 */
export async function startWebhookPeer(env: BenchEnv): Promise<{ peer: PeerProc; fan: FanTarget | null }> {
  const peer = await spawnPeer('hive-webhooks', HIVE_WEBHOOK_PEER, [], { cpus: env.placement.server, log: env.log });
  if (!peer.proc) return { peer, fan: null };
  const origin = new URL(peer.url).origin;
  return {
    peer,
    fan: {
      name: HIVE_WEBHOOK_PEER,
      origin,
      wsUrl: peer.url.replace(/^http/, 'ws'),
      pid: peer.proc.pid,
      subscription: HIVE_MOBILE_ID_SUBSCRIPTION,
    },
  };
}

function probeTarget(t: FanTarget): ProbeTarget {
  return {
    name: t.name,
    origin: t.origin,
    wsUrl: t.wsUrl,
    apiKey: API_KEY,
    subscription: t.subscription,
    webhookPath: WEBHOOK_PATH,
    notificationToken: NOTIFICATION_TOKEN,
    pid: t.pid,
  };
}

/**
 * Scenario 5: 1,000 graphql-ws subscribers (each its own WebSocket), all subscribed to the same
 * authReqIds; one failure notification per id, carrying the sender's clock in correlation_id, reaches
 * every subscriber. Then RSS per idle connection (with one pending subscription each) at 1k and 10k.
 */
interface IdleRow {
  connections: number;
  /** RSS growth over the fresh process, bytes. */
  rss: number;
  failed: number;
  errors: string[];
}

/** Opens 1k, then 10k idle connections (each with one pending subscription) to `idle` and reads its RSS; stops it. */
async function idleRss(env: BenchEnv, idle: GatewayProc): Promise<IdleRow[]> {
  const rows: IdleRow[] = [];
  try {
    await sleep(2_000);
    const rss0 = idle.proc.rssBytes();
    let opened = 0;
    for (const target of [1_000, 10_000]) {
      const r = await env.lg.run<IdleResult>({
        kind: 'idle',
        wsUrl: wsUrl(idle),
        apiKey: API_KEY,
        connections: target - opened,
        subscription: SUBSCRIPTION,
      });
      opened += r.opened;
      await sleep(3_000);
      const grown = idle.proc.rssBytes() - rss0;
      rows.push({ connections: opened, rss: grown, failed: r.failed, errors: r.errors });
      env.log(
        `  ${idle.name}: ${opened} idle connections (${r.failed} failed): RSS +${fmt.kb(grown)} (${fmt.kb(grown / opened)} each)`,
      );
      if (r.failed) break;
    }
    await env.lg.run({ kind: 'close-idle' });
  } finally {
    await idle.proc.stop();
  }
  return rows;
}

/** The probes as one table, a column per server: each cell is the webhooks' statuses → what the subscriber got. */
function probesMarkdown(probes: Array<{ name: string; rows: ProbeRow[] | null; error: string | null }>): string[] {
  const names = probes.find((p) => p.rows)?.rows?.map((r) => r.probe) ?? [];
  return [
    'Webhook probes (bench/scenarios/webhook-probes.ts), before the load, on each server: a graphql-ws subscriber, real webhooks (failure notifications), ' +
      `and the \`next\` messages counted ${DELIVERY_BOUND_MS / 1000} s after the last webhook's answer. "Subscriber first" waits until the server is idle after the subscribe ` +
      '(graphql-ws acknowledges no subscribe). The first probe runs on a server where nobody has subscribed yet. A cell gives the HTTP status of each webhook → what the ' +
      'subscriber got; **bold** where that is not what the spec asks (once for every accepted notification, nothing for a refused one).',
    '',
    `| probe | what is sent | ${probes.map((p) => p.name).join(' | ')} |`,
    `|---|---|${probes.map(() => '---').join('|')}|`,
    ...names.map((probe) => {
      const note = probes.flatMap((p) => p.rows ?? []).find((r) => r.probe === probe)?.note ?? '';
      return `| ${probe} | ${note} | ${probes.map((p) => (p.rows ? probeCell(p.rows.find((r) => r.probe === probe)) : `failed: ${p.error?.slice(0, 120)}`)).join(' | ')} |`;
    }),
  ];
}

export async function fanout(
  env: BenchEnv,
  startFreshGateway: (name: string, checkout: string) => Promise<GatewayProc>,
): Promise<ScenarioReport> {
  env.log('scenario 5: fan-out to 1,000 subscribers, and RSS per idle connection');
  if (!(await hasWebhook(env.gateway))) {
    env.log('  skipped: POST /webhooks/mobile-id answers 404 (not built yet)');
    return {
      id: 5,
      title: 'Fan-out',
      markdown: 'Skipped: `POST /webhooks/mobile-id` answered 404 on this build.',
      targets: [
        { target: '≥ 50,000 deliveries/s with p99 ≤ 50 ms', measured: 'not measured', met: null },
        { target: '≤ 15 KB per idle subscription', measured: 'not measured', met: null },
      ],
    };
  }
  const rounds = env.options.rounds >= 2 ? 3 : 1;
  // The peer first, fresh: its first probe needs a server on which nobody has subscribed yet.
  const { peer, fan: peerFan } = await startWebhookPeer(env);
  const probes: Array<{ name: string; rows: ProbeRow[] | null; error: string | null }> = [];
  const fans: Array<{ name: string; fan: FanoutResult }> = [];
  const warmups: Array<{ name: string; fan: FanoutResult }> = [];
  try {
    for (const t of [gatewayFan(env.gateway, 'gateway'), ...(peerFan ? [peerFan] : [])]) {
      try {
        probes.push({ name: t.name, rows: await probeWebhooks(probeTarget(t)), error: null });
      } catch (error) {
        probes.push({ name: t.name, rows: null, error: error instanceof Error ? error.message : String(error) });
      }
      env.log(
        `  probes on ${t.name}: ${
          probes
            .at(-1)!
            .rows?.map((r) => `${r.probe}: ${probeCell(r)}`)
            .join('; ') ?? probes.at(-1)!.error
        }`,
      );
    }
    const job = (t: FanTarget): FanoutLoad => ({
      kind: 'fanout',
      wsUrl: t.wsUrl,
      apiKey: API_KEY,
      subscribers: SUBSCRIBERS,
      rounds: 1,
      idsPerRound: IDS_PER_ROUND,
      webhook: {
        origin: t.origin,
        path: WEBHOOK_PATH,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${NOTIFICATION_TOKEN}` },
        body: JSON.stringify({
          auth_req_id: '{{id}}',
          error: 'access_denied',
          error_description: 'client timeout',
          correlation_id: '{{ts}}',
        }),
      },
      subscription: t.subscription,
      timestampPath: 'correlationId',
      gatewayPid: t.pid,
    });
    // The gateway, each --compare checkout, then the peer, one round each in turn (A B C A B C …).
    const targets = [
      gatewayFan(env.gateway, 'gateway'),
      ...env.others.map((g) => gatewayFan(g, g.name)),
      ...(peerFan ? [peerFan] : []),
    ];
    const runs = new Map<FanTarget, FanoutResult[]>(targets.map((t) => [t, []]));
    // Round 0 of each target is a warm-up, not counted, as the throughput scenarios warm up before they measure: in
    // a fresh process V8 is still compiling the fan-out's code through its first ~10,000 deliveries (that round read
    // about half the rate and twice the p99 of the next ones). Its figures are shown beside the table.
    for (let round = 0; round <= rounds; round++) {
      for (const t of targets) {
        // One round of the peer (10,000 deliveries) after the gateway's first: the suite stays under 10 minutes.
        if (t === peerFan && round > 1) continue;
        try {
          const r = await env.lg.run<FanoutResult>(job(t));
          if (round === 0) warmups.push({ name: t.name, fan: r });
          else runs.get(t)!.push(r);
          env.log(
            `  ${t.name}, ${round === 0 ? 'warm-up round (not counted)' : `round ${round}`}: ` +
              `${fmt.int(r.deliveriesPerSecond)}/s, p50 ${fmt.ms(r.latency.p50)} ms, p99 ${fmt.ms(r.latency.p99)} ms, ` +
              `${((r.gatewayCpu / r.deliveriesPerSecond) * 1e6).toFixed(1)} µs per delivery`,
          );
        } catch (error) {
          // Only the peer may fail without failing the scenario: the gateway's failure is the news.
          if (t !== peerFan) throw error;
          env.log(
            `  ${t.name}: round ${round + 1} failed: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`,
          );
        }
      }
    }
    for (const t of targets) if (runs.get(t)!.length) fans.push({ name: t.name, fan: combine(runs.get(t)!) });
  } finally {
    await peer.proc?.stop();
  }
  for (const { name, fan } of fans) {
    env.log(
      `  ${name}: ${fan.deliveries}/${fan.expected} deliveries, ${Math.round(fan.deliveriesPerSecond)}/s, p50 ${fan.latency.p50.toFixed(1)} ms, p99 ${fan.latency.p99.toFixed(1)} ms, ` +
        `gateway CPU ${(fan.gatewayCpu * 100).toFixed(0)}% (${((fan.gatewayCpu / fan.deliveriesPerSecond) * 1e6).toFixed(1)} µs per delivery), load generator CPU ${(fan.loadgenCpu * 100).toFixed(0)}%, ` +
        `subscribe ${((fan.subscribeCpuPerSubscription ?? NaN) * 1e6).toFixed(1)} µs gateway CPU each` +
        (fan.errors.length ? `; errors: ${fan.errors.join(' | ')}` : ''),
    );
  }
  const fan = fans[0]!.fan;

  // Idle connections on a fresh gateway process, so that its RSS starts from a known state.
  const idleRuns: Array<{ name: string; rss: IdleRow[] }> = [];
  for (const source of [env.gateway, ...env.others]) {
    const name = source === env.gateway ? 'gateway' : source.name;
    idleRuns.push({ name, rss: await idleRss(env, await startFreshGateway(`${name} (idle)`, source.checkout)) });
  }
  const rss = idleRuns[0]!.rss;
  const at = (n: number) => rss.find((r) => r.connections >= n);
  const perConn = (n: number) => {
    const r = at(n);
    return r ? r.rss / r.connections : NaN;
  };
  const worst = Math.max(perConn(1_000), perConn(10_000));

  const markdown = [
    `${SUBSCRIBERS} graphql-ws subscribers (one WebSocket each, opened afresh for each round, in the load generator process: raw \`ws\` connections speaking \`graphql-transport-ws\`, ` +
      `each subscribe message a real one; every \`next\` is checked for its subscription id, the absence of \`errors\` and its event's auth_req_id, a second \`next\` for one id counts as an error, ` +
      `and the first connection also parses each message in full) subscribe to \`mobileIdAuthentication(authReqId)\` for ${IDS_PER_ROUND} new ids per round; ` +
      `then ${IDS_PER_ROUND} failure notifications go to \`POST /webhooks/mobile-id\` one after the other (the next when the previous one is acknowledged), each with the sender's clock in \`correlation_id\`. ` +
      `Latency is the subscriber's receipt time minus that timestamp (both clocks are the load generator's), so it covers the webhook request, the durable append, ` +
      `the publish and the WebSocket delivery. CPU columns cover the same windows (first webhook to last delivery). Deliveries/s = deliveries / (last delivery − first webhook sent), over ${rounds} round(s) of ${SUBSCRIBERS * IDS_PER_ROUND} deliveries` +
      (env.others.length ? `, the gateways in turn (A B A B)` : '') +
      (peer.proc ? `; the peer one round of ${SUBSCRIBERS * IDS_PER_ROUND}, after the gateway's first` : '') +
      `, each after one warm-up round of its own that is not counted (below the table)` +
      `; percentiles over every delivery of the rounds. ` +
      `The subscription query is \`${SUBSCRIPTION.replace(/\s+/g, ' ')}\`` +
      (peer.proc
        ? `; on ${HIVE_WEBHOOK_PEER} (bench/peers/hive-webhooks.ts, pinned like the gateway) the same load, same webhook bodies and headers, with \`${HIVE_MOBILE_ID_SUBSCRIPTION.replace(/\s+/g, ' ')}\` ` +
          '(its event is the webhook body as sent; the aliases give the subscribers the members they check), and "gateway CPU" is the peer\'s.'
        : `. ${HIVE_WEBHOOK_PEER} could not start: ${peer.failure}.`),
    '',
    '| gateway | deliveries | deliveries/s | p50 ms | p95 ms | p99 ms | max ms | gateway CPU | µs gateway CPU per delivery | load generator CPU | clock | errors |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|',
    ...fans.map(
      ({ name, fan: f }) =>
        `| ${name} | ${fmt.int(f.deliveries)} of ${fmt.int(f.expected)} | ${fmt.int(f.deliveriesPerSecond)} | ${fmt.ms(f.latency.p50)} | ${fmt.ms(f.latency.p95)} | ${fmt.ms(f.latency.p99)} | ${fmt.ms(f.latency.max)} | ${fmt.pct(f.gatewayCpu)} | ${((f.gatewayCpu / f.deliveriesPerSecond) * 1e6).toFixed(1)} | ${fmt.pct(f.loadgenCpu)} | ${f.clock} | ${f.errors.length ? f.errors.join('; ').slice(0, 200) : 'none'} |`,
    ),
    '',
    `Warm-up rounds, not counted (each target's first ${fmt.int(SUBSCRIBERS * IDS_PER_ROUND)} deliveries in its process, V8 still compiling): ` +
      (warmups
        .map(
          ({ name, fan: f }) =>
            `${name} ${fmt.int(f.deliveriesPerSecond)}/s, p99 ${fmt.ms(f.latency.p99)} ms, ${((f.gatewayCpu / f.deliveriesPerSecond) * 1e6).toFixed(1)} µs per delivery`,
        )
        .join('; ') || 'none') +
      '.',
    '',
    'RSS per idle connection: a fresh gateway process; each connection is a WebSocket that completed `connection_init` and holds one pending ' +
      '`mobileIdAuthentication` subscription (an id that never completes). RSS is read from /proc after 3 s of quiet.',
    '',
    '| gateway | connections | RSS growth | per connection | failed |',
    '|---|---:|---:|---:|---:|',
    ...idleRuns.flatMap((run) =>
      run.rss.map(
        (r) =>
          `| ${run.name} | ${fmt.int(r.connections)} | ${fmt.kb(r.rss)} | ${fmt.kb(r.rss / r.connections)} | ${r.failed}${r.errors.length ? ` (${r.errors[0]})` : ''} |`,
      ),
    ),
    '',
    ...probesMarkdown(probes),
  ].join('\n');
  return {
    id: 5,
    title: 'Fan-out',
    markdown,
    targets: [
      {
        target: '≥ 50,000 deliveries/s with p99 ≤ 50 ms (1,000 subscribers)',
        measured: `${fmt.int(fan.deliveriesPerSecond)}/s, p99 ${fmt.ms(fan.latency.p99)} ms`,
        met: fan.deliveriesPerSecond >= 50_000 && fan.latency.p99 <= 50 && fan.deliveries === fan.expected,
      },
      {
        target: '≤ 15 KB per idle subscription (connection + one subscription)',
        measured: `${fmt.kb(perConn(1_000))} at 1k, ${fmt.kb(perConn(10_000))} at 10k`,
        met: Number.isFinite(worst) ? worst <= 15 * 1024 : null,
      },
    ],
  };
}
