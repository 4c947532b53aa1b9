import { request } from 'undici';

import {
  baselineTarget,
  NOTIFICATION_TOKEN,
  type BenchEnv,
  type GatewayProc,
  type ScenarioReport,
} from '../lib/env.js';
import { alternate, byTarget, mean, type Target } from '../lib/harness.js';
import { fmt, median } from '../lib/stats.js';

export const WEBHOOK_PATH = '/webhooks/mobile-id';

function b64url(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

/**
 * A positive notification (docs/upstreams.md, Mobile-ID notification) with a fresh auth_req_id per request. The
 * gateway has no JWKS configured in the benchmark, so the id_token is decoded, not verified; its
 * signature part is a placeholder.
 */
export function notificationBody(): string {
  const idToken = [
    b64url({ alg: 'RS256', typ: 'JWT', kid: 'bench' }),
    b64url({
      iss: 'https://mobileid.example',
      sub: '79001234567',
      aud: 'bench',
      acr: '2',
      amr: ['sim'],
      iat: 1_795_000_000,
      exp: 4_102_444_800,
    }),
    'c2lnbmF0dXJl',
  ].join('.');
  return JSON.stringify({
    auth_req_id: '{{uuid}}',
    access_token: 'bench-access-token',
    token_type: 'Bearer',
    id_token: idToken,
    expires_in: 3600,
  });
}

export function webhookTarget(g: GatewayProc): Target {
  return {
    name: g.name,
    proc: g.proc,
    origin: g.origin,
    path: WEBHOOK_PATH,
    headers: {
      'content-type': 'application/json',
      authorization: `Bearer ${NOTIFICATION_TOKEN}`,
      'x-mobileid-request-id': 'bench',
    },
  };
}

/** True when the gateway serves the mobile-ID webhook (it answers something other than 404 to an empty POST). */
export async function hasWebhook(g: GatewayProc): Promise<boolean> {
  const res = await request(`${g.origin}${WEBHOOK_PATH}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{}',
  });
  await res.body.dump();
  return res.statusCode !== 404;
}

/**
 * Scenario 4: durable mobile-ID notifications per second (204 only after the event is committed). The
 * FULL gateway's figure (null without a webhook route) sets scenario 7's rates.
 */
export async function webhookIngest(
  env: BenchEnv,
): Promise<{ report: ScenarioReport; figures: { gatewayRps: number | null } }> {
  env.log('scenario 4: webhook ingest (durable mobile-ID notifications)');
  if (!(await hasWebhook(env.gateway))) {
    env.log('  skipped: POST /webhooks/mobile-id answers 404 (not built yet)');
    return {
      report: {
        id: 4,
        title: 'Webhook ingest',
        markdown: 'Skipped: `POST /webhooks/mobile-id` answered 404 on this build.',
        targets: [
          { target: '≥ 5,000 durable notifications/s', measured: 'not measured (no webhook route)', met: null },
        ],
      },
      figures: { gatewayRps: null },
    };
  }
  const body = notificationBody();
  const gateways = [env.gateway, ...(env.gatewayNormal ? [env.gatewayNormal] : []), ...env.others];
  const targets: Target[] = [
    baselineTarget(env, '/webhook', { authorization: `Bearer ${NOTIFICATION_TOKEN}` }),
    ...gateways.map(webhookTarget),
  ];
  const ms = await alternate(
    env.lg,
    targets,
    () => ({ body, connections: env.options.connections, durationMs: env.options.durationMs, expectStatus: 204 }),
    { rounds: env.options.rounds, warmupMs: env.options.warmupMs, driverProcs: env.driverProcs, log: env.log },
  );
  const base = median(byTarget(ms, 'baseline').map((m) => m.result.rps));
  const row = (name: string) => {
    const list = byTarget(ms, name);
    const rps = median(list.map((m) => m.result.rps));
    return `| ${name} | ${fmt.int(rps)} | ${list.map((m) => fmt.int(m.result.rps)).join(' / ')} | ${fmt.ratio(rps / base)} | ${fmt.ms(mean(list.map((m) => m.result.latency.p50)))} | ${fmt.ms(mean(list.map((m) => m.result.latency.p95)))} | ${fmt.ms(mean(list.map((m) => m.result.latency.p99)))} | ${list.reduce((s, m) => s + m.result.errors, 0)} | ${fmt.pct(mean(list.map((m) => m.serverCpu)))} | ${fmt.pct(mean(list.map((m) => m.otherCpu)))} |`;
  };
  const full = median(byTarget(ms, env.gateway.name).map((m) => m.result.rps));
  const markdown = [
    'Positive notifications (access_token, id_token decoded but not verified: no JWKS configured, expires_in) with a fresh auth_req_id each, ' +
      'authenticated by a configured client_notification_token. The gateway parses and checks the body, seals the tokens (AES-256-GCM), appends the event ' +
      'to the log in one statement (a unique key per auth_req_id tells a repeat) and answers 204 only after the COMMIT and its fsync. ' +
      'The baseline checks the token, parses the JSON and inserts the body into its own SQLite file (WAL, synchronous=FULL, a commit per request) before its 204. ' +
      `Closed loop, ${env.options.connections} connections, ${env.options.durationMs / 1000} s per measurement, ${env.options.rounds} alternating rounds.`,
    '',
    '| server | notifications/s (median) | per round | ratio to baseline | p50 ms | p95 ms | p99 ms | errors | server CPU | other CPU |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    row('baseline'),
    ...gateways.map((g) => row(g.name)),
  ].join('\n');
  return {
    report: {
      id: 4,
      title: 'Webhook ingest',
      markdown,
      // The target: at least 5,000 durable notifications/s, or at least 0.9 of the baseline.
      targets: [
        {
          target: '≥ 5,000 durable notifications/s (FULL: on disk before the 204), or ≥ 0.9 of the baseline',
          measured: `${fmt.int(full)}/s (${fmt.ratio(full / base)} of the baseline's ${fmt.int(base)}/s), p50 ${fmt.ms(mean(byTarget(ms, env.gateway.name).map((m) => m.result.latency.p50)))} ms, p95 ${fmt.ms(mean(byTarget(ms, env.gateway.name).map((m) => m.result.latency.p95)))} ms`,
          met: full >= 5000 || full >= 0.9 * base,
        },
      ],
    },
    figures: { gatewayRps: full },
  };
}
