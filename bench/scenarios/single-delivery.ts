import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';
import WebSocket from 'ws';

import { closedLoop, processCpu } from '../lib/cpu.js';
import { API_KEY, NOTIFICATION_TOKEN, type BenchEnv, type ScenarioReport } from '../lib/env.js';
import { fmt, median } from '../lib/stats.js';
import { SUBSCRIPTION } from './fanout.js';
import { withFloor } from './mix.js';
import { notificationBody, WEBHOOK_PATH } from './webhook.js';

/** Waiting users: one graphql-ws connection each, with one pending subscription on its own auth_req_id (as scenario 7). */
const WAITING = 10_000;
/** Notifications in flight at once in the delivery rounds (the steady-rate case of docs/decisions/062). */
const IN_FLIGHT = 8;
const OPEN_BATCH = 250;
export const IDLE_TARGET = 0.05;
export const DELIVERY_TARGET_US = 40;

interface Waiting {
  sockets: WebSocket[];
  /** Auth_req_ids not targeted yet, oldest first. */
  ids: string[];
  delivered(id: string): Promise<void>;
  /** Each connection whose subscription on `id` ended subscribes again on a fresh auth_req_id, at the back of `ids`. */
  again(done: readonly string[]): void;
  close(): void;
}

/** `count` connections of the orchestrator (on the driver core), each holding one pending subscription. */
async function openWaiting(wsUrl: string, count: number): Promise<Waiting> {
  const waiting = new Map<string, { resolve(): void; reject(err: Error): void }>();
  const arrived = new Set<string>();
  const ids: string[] = [];
  const sockets: WebSocket[] = [];
  const socketOf = new Map<string, WebSocket>();
  const subscribe = (ws: WebSocket, id: string) => {
    socketOf.set(id, ws);
    ws.send(JSON.stringify({ id, type: 'subscribe', payload: { query: SUBSCRIPTION, variables: { authReqId: id } } }));
  };
  const open = (id: string) =>
    new Promise<WebSocket>((resolve, reject) => {
      const ws = new WebSocket(wsUrl, 'graphql-transport-ws', {
        headers: { authorization: `Bearer ${API_KEY}` },
        perMessageDeflate: false,
      });
      ws.once('error', reject);
      ws.on('open', () => ws.send(JSON.stringify({ type: 'connection_init', payload: {} })));
      ws.on('message', (data) => {
        const msg = JSON.parse(String(data)) as { type: string; id?: string; payload?: { errors?: unknown } };
        if (msg.type === 'connection_ack') {
          subscribe(ws, id);
          resolve(ws);
        } else if (msg.type === 'ping') ws.send('{"type":"pong"}');
        else if (msg.id !== undefined && (msg.type === 'next' || msg.type === 'error')) {
          const w = waiting.get(msg.id);
          if (msg.type === 'error' || msg.payload?.errors) {
            const err = new Error(`subscription ${msg.id}: ${JSON.stringify(msg.payload).slice(0, 200)}`);
            if (w) w.reject(err);
            return;
          }
          if (w) w.resolve();
          else arrived.add(msg.id);
        }
      });
    });
  for (let i = 0; i < count; i += OPEN_BATCH) {
    const batch = Array.from({ length: Math.min(OPEN_BATCH, count - i) }, () => randomUUID());
    sockets.push(...(await Promise.all(batch.map(open))));
    ids.push(...batch);
  }
  return {
    sockets,
    ids,
    delivered: (id) =>
      arrived.delete(id)
        ? Promise.resolve()
        : new Promise<void>((resolve, reject) => waiting.set(id, { resolve, reject })),
    again: (done) => {
      for (const id of done) {
        const ws = socketOf.get(id)!;
        socketOf.delete(id);
        const next = randomUUID();
        subscribe(ws, next);
        ids.push(next);
      }
    },
    close: () => sockets.forEach((ws) => ws.terminate()),
  };
}

/** What scenario 9 reads of one server: its idle CPU with the users waiting, and its CPU per notification by round. */
interface Figures {
  idle: number;
  idleMs: number;
  /** Notifications a round. */
  perRound: number;
  /** µs per notification that nobody waits for, by round. */
  intake: number[];
  /** µs per notification that completes one waiting user's subscription, by round. */
  withDelivery: number[];
  /** The median of the rounds' differences. */
  marginal: number;
  /** The difference of the means: a collection's cost counts here. */
  meanMarginal: number;
}

/**
 * Scenario 9's procedure on one server (`origin`, its process `pid`): 10,000 waiting users (each a graphql-ws
 * connection of the orchestrator with one pending subscription), its idle CPU, then alternating rounds of
 * notifications nobody waits for and of notifications each completing one waiting user's subscription.
 */
async function measureServer(env: BenchEnv, server: { name: string; origin: string; pid: number }): Promise<Figures> {
  const quick = env.options.durationMs < 5_000;
  // Fifteen rounds of 1,000 each way, after a warm-up of each kind. A round costs ~150–250 ms of the gateway's CPU,
  // about what one mark-compact of its heap costs, so the median of three or seven differences moved by ±10–20 µs with
  // where the collections fell (docs/decisions/121). The users a round served subscribe again between rounds, at the
  // back of the queue, so 10,000 wait throughout and the rounds are not bounded by them.
  const perRound = quick ? 200 : 1_000;
  const rounds = quick ? 3 : Math.max(15, env.options.rounds + 1);
  const idleMs = quick ? 3_000 : 10_000;
  const pid = server.pid;
  const subs = await openWaiting(`${server.origin.replace(/^http/, 'ws')}/graphql`, WAITING);
  const pool = new Pool(server.origin, { connections: IN_FLIGHT, pipelining: 1 });
  const body = notificationBody();
  const headers = {
    'content-type': 'application/json',
    authorization: `Bearer ${NOTIFICATION_TOKEN}`,
    'x-mobileid-request-id': 'bench',
  };
  const notify = async (id: string) => {
    const res = await pool.request({ method: 'POST', path: WEBHOOK_PATH, headers, body: body.replace('{{uuid}}', id) });
    await res.body.dump();
    if (res.statusCode !== 204) throw new Error(`webhook answered ${res.statusCode}`);
  };
  try {
    await sleep(1_000);
    const idle0 = processCpu(pid);
    const t0 = performance.now();
    await sleep(idleMs);
    const idle = (processCpu(pid) - idle0) / ((performance.now() - t0) / 1000);
    env.log(
      `  ${server.name}: ${fmt.int(subs.sockets.length)} waiting, idle CPU ${fmt.pct(idle)} over ${idleMs / 1000} s`,
    );

    const cpuPerOp = async (op: (i: number) => Promise<void>) => {
      const before = processCpu(pid);
      await closedLoop(perRound, IN_FLIGHT, op);
      return ((processCpu(pid) - before) * 1e6) / perRound;
    };
    const nobody = () => cpuPerOp(() => notify(randomUUID()));
    /**
     * Waits, unmeasured, until the server has used under 10 % of a core over 100 ms (the subscribes of `again`
     * handled), for at most 5 s: the next round measures whatever is left.
     */
    const settle = async () => {
      for (let tries = 0, quiet = false; !quiet && tries < 50; tries++) {
        const before = processCpu(pid);
        await sleep(100);
        quiet = processCpu(pid) - before < 0.01;
      }
    };
    const delivered = async () => {
      const served: string[] = [];
      const cpu = await cpuPerOp(async () => {
        const id = subs.ids.shift()!;
        served.push(id);
        const done = subs.delivered(id);
        await notify(id);
        await done;
      });
      subs.again(served);
      await settle();
      return cpu;
    };
    // Warm-up of both kinds.
    await nobody();
    await delivered();
    const intake: number[] = [];
    const withDelivery: number[] = [];
    for (let r = 0; r < rounds; r++) {
      if (r % 2 === 0) {
        intake.push(await nobody());
        withDelivery.push(await delivered());
      } else {
        withDelivery.push(await delivered());
        intake.push(await nobody());
      }
    }
    const marginal = median(withDelivery.map((w, i) => w - intake[i]!));
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const meanMarginal = mean(withDelivery) - mean(intake);
    env.log(
      `  ${server.name}, per notification: nobody waiting ${intake.map((v) => v.toFixed(0)).join('/')} µs, with its subscriber ${withDelivery.map((v) => v.toFixed(0)).join('/')} µs; one delivery adds ${marginal.toFixed(1)} µs`,
    );
    return { idle, idleMs, perRound, intake, withDelivery, marginal, meanMarginal };
  } finally {
    subs.close();
    await pool.close();
  }
}

const FLOOR = 'the floor, written by hand';

/**
 * The same procedure on scenario 7's floor (bench/servers/mix-baseline.ts, decision 127: the webhook, the store and the
 * delivery written by hand), a fresh process pinned like the gateway: what one delivery costs this machine without
 * the gateway's layers, as the durable baseline is for a creation (decision 151).
 */
async function floorFigures(env: BenchEnv): Promise<Figures | { failed: string }> {
  try {
    return await withFloor(env, FLOOR, ({ origin, pid }) => measureServer(env, { name: FLOOR, origin, pid }));
  } catch (error) {
    // The gateway's figures stand alone, as scenario 7's do when its floor cannot run.
    const failed = error instanceof Error ? error.message : String(error);
    env.log(`  ${FLOOR} could not run: ${failed}`);
    return { failed };
  }
}

/**
 * Scenario 9: what 10,000 subscriptions cost while they only wait, and the marginal CPU of one delivery (docs/decisions/062).
 * The FULL gateway holds 10,000 waiting users (each a graphql-ws connection of the orchestrator with one pending
 * subscription). Then, in alternating rounds, N notifications that nobody waits for, and N notifications each
 * completing one waiting user's subscription, each time 8 in flight (closed loop): the gateway's CPU per
 * notification from /proc in each, and their difference is what one delivery adds. The users a round served subscribe
 * again after it, unmeasured. Then the same on scenario 7's floor, the same work written by hand.
 */
export async function singleDelivery(env: BenchEnv): Promise<ScenarioReport> {
  env.log(`scenario 9: ${fmt.int(WAITING)} waiting subscriptions, idle CPU and the marginal CPU of one delivery`);
  const g = env.gateway;
  const gw = await measureServer(env, { name: g.name, origin: g.origin, pid: g.proc.pid });
  const floor = await floorFigures(env);
  const rounds = gw.intake.length;
  const perRound = gw.perRound;
  const byRound = (xs: number[]) => xs.map((v) => v.toFixed(0)).join(' / ');
  /** The floor's cell of a row, or a dash when the floor could not run. */
  const of = (cell: (f: Figures) => string): string => ('failed' in floor ? '–' : cell(floor));
  const markdown = [
    `${fmt.int(WAITING)} waiting users (graphql-ws connections of the orchestrator, on the driver core, each with one pending \`mobileIdAuthentication(authReqId)\` on its own auth_req_id, the subscription of scenario 5), ` +
      `then ${rounds} alternating rounds of ${perRound} positive notifications, ${IN_FLIGHT} in flight (closed loop): nobody waiting for them, or each completing one waiting user's subscription (its \`next\` received before the next notification leaves; after the round, unmeasured, each served connection subscribes again on a fresh auth_req_id at the back of the queue, so ${fmt.int(WAITING)} wait throughout). ` +
      "Server CPU from /proc (every thread); a delivery's marginal CPU is the median over the rounds of the difference between the two. " +
      `The same then runs on scenario 7's floor (bench/servers/mix-baseline.ts, a fresh process pinned like the gateway): the webhook, the store and the delivery written by hand, with no GraphQL, no validation library and no metrics.`,
    '',
    `| measure | gateway CPU | ${FLOOR} |`,
    '|---|---:|---:|',
    `| ${fmt.int(WAITING)} subscriptions that only wait (${gw.idleMs / 1000} s) | ${(gw.idle * 100).toFixed(1)} % of a core | ${of((f) => `${(f.idle * 100).toFixed(1)} %`)} |`,
    `| one notification, nobody waiting (${IN_FLIGHT} in flight) | ${median(gw.intake).toFixed(0)} µs (rounds ${byRound(gw.intake)}) | ${of((f) => `${median(f.intake).toFixed(0)} µs (rounds ${byRound(f.intake)})`)} |`,
    `| one notification with its one waiting subscriber | ${median(gw.withDelivery).toFixed(0)} µs (rounds ${byRound(gw.withDelivery)}) | ${of((f) => `${median(f.withDelivery).toFixed(0)} µs (rounds ${byRound(f.withDelivery)})`)} |`,
    `| **marginal CPU of one delivery** (the median of the rounds' differences) | **${gw.marginal.toFixed(1)} µs** | ${of((f) => `${f.marginal.toFixed(1)} µs`)} |`,
    `| the same as the difference of the means | ${gw.meanMarginal.toFixed(1)} µs | ${of((f) => `${f.meanMarginal.toFixed(1)} µs`)} |`,
    ...('failed' in floor ? ['', `${FLOOR} could not run: ${floor.failed}`] : []),
  ].join('\n');
  return {
    id: 9,
    title: 'Waiting subscriptions and a single delivery',
    markdown,
    targets: [
      {
        target: `${fmt.int(WAITING)} subscriptions that only wait: ≤ ${IDLE_TARGET * 100} % of a core`,
        measured: `${(gw.idle * 100).toFixed(1)} %`,
        met: gw.idle <= IDLE_TARGET,
      },
      {
        target: `one delivery to one waiting subscriber: ≤ ${DELIVERY_TARGET_US} µs of gateway CPU`,
        measured: `${gw.marginal.toFixed(1)} µs (${FLOOR}: ${of((f) => `${f.marginal.toFixed(1)} µs`)})`,
        met: gw.marginal <= DELIVERY_TARGET_US,
      },
    ],
  };
}
