/**
 * The load generator: its own process (pinned beside the upstream stub), driven by bench/run.ts over an
 * IPC channel. HTTP load goes through one undici Pool with no pipelining; subscribers speak graphql-ws's
 * protocol (graphql-transport-ws) over raw `ws` connections.
 */
import { randomUUID } from 'node:crypto';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';
import WebSocket from 'ws';

import { cpuSeconds, waitUntilIdle } from './lib/processes.js';
import type {
  FanoutLoad,
  FanoutResult,
  FromLoadgen,
  HttpLoad,
  HttpResult,
  IdleLoad,
  IdleResult,
  Job,
  JobResult,
  MixOpen,
  MixOpenResult,
  MixRate,
  MixRateResult,
  ToLoadgen,
} from './lib/protocol.js';
import { Samples } from './lib/stats.js';

const UUID = '{{uuid}}';

function bodyFactory(template: string | undefined): () => string | undefined {
  if (template === undefined) return () => undefined;
  const parts = template.split(UUID);
  if (parts.length === 1) return () => template;
  return () => parts.join(randomUUID());
}

async function runHttp(load: HttpLoad): Promise<HttpResult> {
  const pool = new Pool(load.origin, { connections: load.connections, pipelining: 1, keepAliveTimeout: 30_000 });
  const makeBody = bodyFactory(load.body);
  const method = load.method ?? 'POST';
  const latency = new Samples();
  let requests = 0;
  let errors = 0;
  let dropped = 0;
  const errorSamples = new Set<string>();
  const fail = (what: string) => {
    errors += 1;
    if (errorSamples.size < 5) errorSamples.add(what.slice(0, 300));
  };

  // Open loop only: the load generator's own share of the tail (HttpResult.driver).
  const open = load.rate !== undefined;
  const fromSend = new Samples();
  const slowest: number[] = [];
  let sentLateMaxMs = 0;
  let sentLate = 0;
  const one = async (scheduled: number): Promise<void> => {
    const sent = performance.now();
    try {
      const res = await pool.request({ path: load.path, method, headers: load.headers, body: makeBody() });
      const text = await res.body.text();
      const done = performance.now();
      requests += 1;
      if (res.statusCode !== load.expectStatus) fail(`HTTP ${res.statusCode}: ${text}`);
      else if (load.graphql && text.includes('"errors"')) fail(text);
      else {
        latency.push(done - scheduled);
        if (open) {
          fromSend.push(done - sent);
          const quarter = Math.floor((scheduled - started) / 250);
          slowest[quarter] = Math.max(slowest[quarter] ?? 0, done - scheduled);
        }
      }
    } catch (err) {
      requests += 1;
      fail(err instanceof Error ? `${(err as { code?: string }).code ?? err.name}: ${err.message}` : String(err));
    }
  };

  const loopDelay = monitorEventLoopDelay({ resolution: 10 });
  const driver = (): HttpResult['driver'] =>
    !open
      ? undefined
      : {
          fromSend: fromSend.summary(),
          sentLateMaxMs,
          sentLate,
          loopDelayMaxMs: loopDelay.max / 1e6,
          slowestByQuarter: Array.from(slowest, (v) => Math.round(v ?? 0)),
        };
  const started = performance.now();
  const end = started + load.durationMs;
  if (load.rate === undefined) {
    // Closed loop: every connection sends its next request as soon as the previous answer is read.
    await Promise.all(
      Array.from({ length: load.connections }, async () => {
        while (performance.now() < end) await one(performance.now());
      }),
    );
  } else {
    // Open loop: requests leave on a fixed schedule whatever the answers do, and each latency counts from
    // the scheduled time, so a stall shows up in the tail instead of slowing the sender down.
    const interval = 1000 / load.rate;
    const maxInFlight = load.maxInFlight ?? 2_000;
    loopDelay.enable();
    const inFlight = new Set<Promise<void>>();
    let next = started;
    await new Promise<void>((resolve) => {
      const tick = () => {
        const now = performance.now();
        while (next <= now && next < end) {
          if (inFlight.size >= maxInFlight) {
            dropped += 1;
          } else {
            const late = now - next;
            if (late > sentLateMaxMs) sentLateMaxMs = late;
            if (late >= 5) sentLate += 1;
            const p = one(next);
            inFlight.add(p);
            void p.finally(() => inFlight.delete(p));
          }
          next += interval;
        }
        if (next < end) setTimeout(tick, Math.max(0, next - performance.now()));
        else resolve();
      };
      tick();
    });
    // A saturated server may hold thousands: give them 3 s, then count the rest as dropped.
    const drained = await Promise.race([Promise.all(inFlight).then(() => true), sleep(3_000).then(() => false)]);
    if (!drained) {
      dropped += inFlight.size;
      loopDelay.disable();
      await pool.destroy();
      const seconds = (performance.now() - started) / 1000;
      return {
        requests,
        errors,
        dropped,
        errorSamples: [...errorSamples],
        seconds,
        rps: requests / seconds,
        latency: latency.summary(),
        driver: driver(),
      };
    }
  }
  const seconds = (performance.now() - started) / 1000;
  await pool.close();
  loopDelay.disable();
  return {
    requests,
    errors,
    dropped,
    errorSamples: [...errorSamples],
    seconds,
    rps: requests / seconds,
    latency: latency.summary(),
    driver: driver(),
  };
}

/**
 * One of scenario 5's subscribers: a raw graphql-transport-ws connection (no client library: at 50k
 * deliveries/s the load generator shares its core with the stub and the orchestrator, and graphql-ws's client,
 * with a JSON.parse and a regex per message, cost ~36 µs of it per delivery).
 */
interface FanConn {
  ws: WebSocket;
  /** Deliveries per subscription of the current round (index: the id's position in the round), to catch duplicates. */
  got: Uint8Array;
  /** This connection's messages are also checked in full (JSON.parse and the whole shape): the first one. */
  strict: boolean;
  /** Index of the connection's URL in `wsUrls` (0 with a single `wsUrl`): its latency is also counted apart. */
  group: number;
}

/** The current round of scenario 5, as the subscribers' message handler sees it. */
interface FanRound {
  /** graphql-ws message id prefix of this round's subscriptions: `<prefix><index>`. */
  prefix: string;
  ids: string[];
  /** When each id's webhook left (performance.now()): the latency's start if an event carries no clock. */
  sentAt: number[];
  received: number;
  expected: number;
  last: number;
  onAll: (() => void) | null;
}

const fan = {
  round: null as FanRound | null,
  /** The member of the event that carries the sender's clock (`timestampPath`'s last name), if any. */
  clockMember: null as string | null,
  latency: new Samples(),
  /** The same latencies per URL of `wsUrls` (per replica). */
  groups: [] as Samples[],
  deliveries: 0,
  /** Deliveries whose correlationId did not hold the sender's clock. */
  unclocked: 0,
  errors: new Set<string>(),
  errorCount: 0,
};

function fanNote(e: unknown): void {
  fan.errorCount += 1;
  if (fan.errors.size < 10)
    fan.errors.add((e instanceof Error ? e.message : typeof e === 'string' ? e : JSON.stringify(e)).slice(0, 300));
}

/** The text of the JSON string member `"name":"…"` in `text` (no escapes expected), or null. */
function member(text: string, name: string, from = 0): string | null {
  const key = `"${name}":"`;
  const at = text.indexOf(key, from);
  if (at === -1) return null;
  const start = at + key.length;
  const end = text.indexOf('"', start);
  return end === -1 ? null : text.slice(start, end);
}

/**
 * A subscriber's message. A `next` must be for one of this round's subscriptions (its id), the first for it on
 * this connection, carry no `errors`, and carry the event of that subscription's auth_req_id; its latency is the
 * receipt time minus the sender's clock in `correlationId`. The text is scanned for those members rather than
 * parsed (the first connection parses every message in full as well, to catch a change of shape).
 */
function onFanMessage(conn: FanConn, raw: Buffer): void {
  const now = performance.now();
  const text = conn.strict ? raw.toString('utf8') : raw.toString('latin1');
  const type = member(text, 'type');
  if (type === 'complete') return;
  if (type === 'ping') {
    conn.ws.send('{"type":"pong"}');
    return;
  }
  const r = fan.round;
  const id = member(text, 'id');
  if (type !== 'next') {
    fanNote(`${type ?? 'a message without a type'} for ${id}: ${text.slice(0, 200)}`);
    return;
  }
  if (r === null || id === null || !id.startsWith(r.prefix)) {
    fanNote(`a next outside its round: ${text.slice(0, 200)}`);
    return;
  }
  const index = Number(id.slice(r.prefix.length));
  const authReqId = r.ids[index];
  if (authReqId === undefined) {
    fanNote(`a next for an unknown id ${id}`);
    return;
  }
  if (conn.got[index] !== 0) {
    fanNote(`a second next for ${id}`);
    return;
  }
  conn.got[index] = 1;
  const payload = text.indexOf('"payload":');
  if (payload === -1 || text.includes('"errors"', payload)) {
    fanNote(`a next with errors: ${text.slice(0, 300)}`);
    return;
  }
  if (member(text, 'authReqId', payload) !== authReqId) {
    fanNote(`the subscription on ${authReqId} got ${text.slice(0, 200)}`);
    return;
  }
  const clock = fan.clockMember === null ? null : member(text, fan.clockMember, payload);
  if (conn.strict) {
    const msg = JSON.parse(text) as {
      id?: unknown;
      type?: unknown;
      payload?: { data?: Record<string, Record<string, unknown> | null>; errors?: unknown };
    };
    const event = msg.payload?.data ? Object.values(msg.payload.data)[0] : undefined;
    const clockOk = fan.clockMember === null || event?.[fan.clockMember] === (clock ?? undefined);
    if (
      msg.id !== id ||
      msg.type !== 'next' ||
      msg.payload?.errors !== undefined ||
      !event ||
      event.authReqId !== authReqId ||
      !clockOk
    ) {
      fanNote(`a next of an unexpected shape: ${text.slice(0, 300)}`);
      return;
    }
  }
  // Epoch ms (with decimals) from the sender's clock; without one, the time the sender sent the webhook.
  let sent = clock === null ? NaN : Number(clock) - performance.timeOrigin;
  if (!Number.isFinite(sent)) {
    fan.unclocked += 1;
    sent = r.sentAt[index]!;
  }
  fan.latency.push(now - sent);
  fan.groups[conn.group]?.push(now - sent);
  fan.deliveries += 1;
  r.received += 1;
  r.last = now;
  if (r.received === r.expected) r.onAll?.();
}

async function runFanout(load: FanoutLoad): Promise<FanoutResult> {
  fan.round = null;
  fan.latency = new Samples();
  fan.deliveries = 0;
  fan.unclocked = 0;
  fan.errors.clear();
  fan.errorCount = 0;
  fan.clockMember = load.timestampPath?.split('.').pop() ?? null;
  const urls = load.wsUrls ?? [load.wsUrl];
  fan.groups = urls.map(() => new Samples());
  const conns: FanConn[] = [];
  // The subscribers spread evenly over the URLs (replicas), the remainder on the first ones.
  for (const [group, url] of urls.entries()) {
    const count = Math.floor(load.subscribers / urls.length) + (group < load.subscribers % urls.length ? 1 : 0);
    const opened = await openConnections(url, load.apiKey, count, (ws) => {
      const conn: FanConn = { ws, got: new Uint8Array(load.idsPerRound), strict: conns.length === 0, group };
      ws.on('message', (raw: Buffer) => onFanMessage(conn, raw));
      ws.on('error', fanNote);
      conns.push(conn);
    });
    if (opened.failed)
      throw new Error(
        `${opened.failed}/${count} subscribers could not connect to ${url}: ${opened.errors.join(' | ')}`,
      );
  }
  const webhookLatency = new Samples();
  const cpuPids = load.cpuPids ?? [];
  const cpuOf = cpuPids.map(() => 0);

  // {"id":"<id>","type":"subscribe","payload":{"query":...,"variables":{"authReqId":"<authReqId>"}}}, cut at the two values.
  const template = JSON.stringify({
    id: '\u0000',
    type: 'subscribe',
    payload: { query: load.subscription, variables: { authReqId: '\u0001' } },
  });
  const [a, rest] = template.split('\\u0000') as [string, string];
  const [b, c] = rest.split('\\u0001') as [string, string];

  let busySeconds = 0;
  let gatewayCpuSeconds = 0;
  let loadgenCpuSeconds = 0;
  let subscribeCpuSeconds = 0;
  const pool = new Pool(load.webhook.origin, { connections: 1 });
  for (let round = 0; round < load.rounds; round++) {
    const ids = Array.from({ length: load.idsPerRound }, () => `bench-${randomUUID()}`);
    const r: FanRound = {
      prefix: `r${round}.`,
      ids,
      sentAt: ids.map(() => NaN),
      received: 0,
      expected: conns.length * ids.length,
      last: 0,
      onAll: null,
    };
    const done = new Promise<void>((resolve) => (r.onAll = resolve));
    fan.round = r;
    // Every connection subscribes to every id of the round, its subscribe messages in one write.
    const subscribeCpu0 = load.gatewayPid === undefined ? NaN : cpuSeconds(load.gatewayPid);
    const subscribes = ids.map((id, i) => a + r.prefix + i + b + id + c);
    for (const conn of conns) {
      conn.got.fill(0);
      const socket = (conn.ws as unknown as { _socket: { cork(): void; uncork(): void } })._socket;
      socket.cork();
      for (const message of subscribes) conn.ws.send(message);
      socket.uncork();
    }
    // graphql-ws does not acknowledge a subscribe: wait until the gateway has worked through every
    // subscribe message (its CPU goes quiet), so that the latency below is the delivery's alone. A late
    // subscriber would still get the event, from the log.
    await waitIdle(load.gatewayPid, 300 + conns.length * ids.length * 0.05);
    for (const pid of load.idlePids ?? []) await waitIdle(pid, 0);
    const first = performance.now();
    const gw0 = load.gatewayPid === undefined ? NaN : cpuSeconds(load.gatewayPid);
    const cpu0 = cpuPids.map((pid) => cpuSeconds(pid));
    subscribeCpuSeconds += gw0 - subscribeCpu0;
    const own0 = process.cpuUsage();
    // One webhook at a time, the next as soon as the previous one is acknowledged: the gateway fans each
    // event out to every subscriber while the next request waits in its socket.
    for (const [i, id] of ids.entries()) {
      const now = performance.now();
      r.sentAt[i] = now;
      // Epoch milliseconds with microseconds, from this process's clock.
      const ts = (performance.timeOrigin + now).toFixed(3);
      const body = load.webhook.body.replaceAll('{{id}}', id).replaceAll('{{ts}}', ts);
      const res = await pool.request({ path: load.webhook.path, method: 'POST', headers: load.webhook.headers, body });
      const text = await res.body.text();
      if (res.statusCode >= 300) fanNote(`webhook HTTP ${res.statusCode}: ${text}`);
      else webhookLatency.push(performance.now() - now);
    }
    await Promise.race([done, sleep(15_000)]);
    // A process that ended meanwhile (a PostgreSQL backend) counts as nothing rather than making the sum NaN.
    for (const [i, pid] of cpuPids.entries())
      cpuOf[i]! += Number.isFinite(cpuSeconds(pid) - cpu0[i]!) ? cpuSeconds(pid) - cpu0[i]! : 0;
    if (process.env.FANOUT_PAUSE) await sleep(1000); // PROFILE-ONLY
    const own = process.cpuUsage(own0);
    loadgenCpuSeconds += (own.user + own.system) / 1e6;
    gatewayCpuSeconds += load.gatewayPid === undefined ? NaN : cpuSeconds(load.gatewayPid) - gw0;
    if (r.received < r.expected) fanNote(`round ${round}: ${r.received}/${r.expected} deliveries within 15 s`);
    busySeconds += ((r.last || performance.now()) - first) / 1000;
  }
  fan.round = null;
  await pool.close();
  await closeAll(conns.map((conn) => conn.ws));
  if (fan.errorCount > fan.errors.size) fan.errors.add(`${fan.errorCount} errors in all`);
  return {
    deliveries: fan.deliveries,
    expected: load.subscribers * load.idsPerRound * load.rounds,
    deliveriesPerSecond: fan.deliveries / busySeconds,
    gatewayCpu: gatewayCpuSeconds / busySeconds,
    loadgenCpu: loadgenCpuSeconds / busySeconds,
    latency: fan.latency.summary(),
    samples: fan.latency.values(),
    subscribeCpuPerSubscription: subscribeCpuSeconds / (conns.length * load.idsPerRound * load.rounds),
    clock: fan.unclocked === 0 ? 'payload' : 'sender',
    errors: [...fan.errors],
    ...(load.wsUrls ? { groupSamples: fan.groups.map((g) => g.values()) } : {}),
    webhookLatency: webhookLatency.summary(),
    webhookSamples: webhookLatency.values(),
    ...(load.cpuPids ? { cpu: cpuOf.map((c) => c / busySeconds) } : {}),
  };
}

/** Waits until process `pid` uses under 10% of a core for two 100 ms samples in a row (at most 30 s); a fixed pause without a pid. */
async function waitIdle(pid: number | undefined, fallbackMs: number): Promise<void> {
  if (pid === undefined) {
    await sleep(fallbackMs);
    return;
  }
  await waitUntilIdle(pid, 30_000);
}

/**
 * Opens `count` graphql-ws connections (`connection_init` with the API key), a few hundred handshakes at a
 * time: a burst of 10,000 SYNs overflows the listen backlog. `acked` gets each socket once the gateway has
 * acknowledged it, and attaches its own listeners.
 */
async function openConnections(
  wsUrl: string,
  apiKey: string,
  count: number,
  acked: (ws: WebSocket) => void,
): Promise<{ failed: number; errors: string[] }> {
  const errors = new Set<string>();
  let failed = 0;
  const openOne = () =>
    new Promise<void>((resolve) => {
      const ws = new WebSocket(wsUrl, 'graphql-transport-ws', {
        headers: { authorization: `Bearer ${apiKey}` },
        perMessageDeflate: false,
      });
      let done = false;
      const giveUp = (why: string) => {
        if (done) return;
        done = true;
        failed += 1;
        if (errors.size < 5) errors.add(why);
        ws.terminate();
        resolve();
      };
      const timer = setTimeout(() => giveUp('no connection_ack within 20 s'), 20_000);
      ws.on('open', () => ws.send(JSON.stringify({ type: 'connection_init', payload: {} })));
      ws.on('message', (raw) => {
        if (done) return;
        const msg = JSON.parse(String(raw)) as { type: string };
        if (msg.type === 'ping') ws.send('{"type":"pong"}');
        if (msg.type !== 'connection_ack') return;
        done = true;
        clearTimeout(timer);
        acked(ws);
        resolve();
      });
      ws.on('error', (err) => giveUp(err.message));
    });
  const batch = 250;
  for (let i = 0; i < count; i += batch) {
    await Promise.all(Array.from({ length: Math.min(batch, count - i) }, openOne));
  }
  return { failed, errors: [...errors] };
}

/** Closes every socket (1000), waiting at most 5 s for each before it is terminated. */
async function closeAll(sockets: WebSocket[]): Promise<void> {
  await Promise.all(
    sockets.map(
      (ws) =>
        new Promise<void>((resolve) => {
          if (ws.readyState === WebSocket.CLOSED) return resolve();
          ws.once('close', () => resolve());
          ws.close(1000);
          setTimeout(() => {
            ws.terminate();
            resolve();
          }, 5_000).unref();
        }),
    ),
  );
}

const idle: WebSocket[] = [];

async function openIdle(load: IdleLoad): Promise<IdleResult> {
  let opened = 0;
  const { failed, errors } = await openConnections(load.wsUrl, load.apiKey, load.connections, (ws) => {
    ws.on('message', (raw) => {
      if ((JSON.parse(String(raw)) as { type: string }).type === 'ping') ws.send('{"type":"pong"}');
    });
    if (load.subscription) {
      ws.send(
        JSON.stringify({
          id: '1',
          type: 'subscribe',
          payload: { query: load.subscription, variables: { authReqId: `idle-${randomUUID()}` } },
        }),
      );
    }
    idle.push(ws);
    opened += 1;
  });
  return { opened, failed, errors };
}

async function closeIdle(): Promise<{ closed: number }> {
  const sockets = idle.splice(0);
  await closeAll(sockets);
  return { closed: sockets.length };
}

/** A first-in, first-out queue that does not copy on every shift. */
class Fifo<T> {
  private items: T[] = [];
  private head = 0;

  push(value: T): void {
    this.items.push(value);
  }

  shift(): T | undefined {
    if (this.head >= this.items.length) return undefined;
    const value = this.items[this.head++];
    if (this.head > 4096 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return value;
  }

  get size(): number {
    return this.items.length - this.head;
  }

  clear(): void {
    this.items = [];
    this.head = 0;
  }
}

/** One of scenario 7's connections (a waiting user): one pending subscription at a time. */
interface MixConn {
  ws: WebSocket;
  /** graphql-ws message id and authReqId of the pending subscription. */
  msgId: string;
  authReqId: string;
  seq: number;
  /** When the notification to `authReqId` was scheduled (once targeted). */
  scheduledAt: number;
}

/** A `mix-rate` window in progress: the authReqIds notified and not yet delivered, with their connections. */
interface MixWindow {
  targeted: Map<string, MixConn>;
  latency: Samples;
  delivered: number;
  onEmpty: (() => void) | null;
}

const mix = {
  conns: [] as MixConn[],
  /** The subscribe message's JSON around its id and its authReqId, serialized once. */
  subscribeJson: ['', '', ''] as [string, string, string],
  /** The webhook sender's connections, kept from one window to the next (warm, like the identity service's). */
  sender: null as Pool | null,
  /** Connections whose pending subscription no notification has targeted yet, oldest subscription first. */
  waiting: new Fifo<MixConn>(),
  window: null as MixWindow | null,
  closing: false,
  /**
   * Deliveries that arrived outside the window of their notification or for a subscription given up on
   * (late), and connections the gateway closed.
   */
  late: 0,
  lost: 0,
  errors: new Set<string>(),
  /** `MixOpen.clientCompletes`: a connection completes its subscription itself once its event arrived. */
  clientCompletes: false,
};

function mixNote(e: unknown): void {
  if (mix.errors.size < 10)
    mix.errors.add((e instanceof Error ? e.message : typeof e === 'string' ? e : JSON.stringify(e)).slice(0, 300));
}

/** The connection subscribes again, on a fresh authReqId: the next user waiting on this socket. */
function mixSubscribe(conn: MixConn): void {
  conn.seq += 1;
  conn.msgId = String(conn.seq);
  conn.authReqId = `mix-${randomUUID()}`;
  const [a, b, c] = mix.subscribeJson;
  conn.ws.send(a + conn.msgId + b + conn.authReqId + c);
  mix.waiting.push(conn);
}

/**
 * A subscription whose notification failed or never arrived would wait forever: the connection cancels it
 * and subscribes again, so the number of waiting subscribers stays whole for the next window.
 */
function mixReplace(conn: MixConn): void {
  if (conn.ws.readyState !== WebSocket.OPEN) return;
  conn.ws.send(`{"id":"${conn.msgId}","type":"complete"}`);
  mixSubscribe(conn);
}

function onMixMessage(conn: MixConn, raw: WebSocket.RawData): void {
  const now = performance.now();
  const msg = JSON.parse(String(raw)) as {
    type: string;
    id?: string;
    payload?: { data?: Record<string, { authReqId?: string } | null>; errors?: unknown };
  };
  switch (msg.type) {
    case 'ping':
      conn.ws.send('{"type":"pong"}');
      return;
    case 'next': {
      if (msg.id !== conn.msgId) {
        mix.late += 1;
        return;
      }
      if (msg.payload?.errors) mixNote(msg.payload.errors);
      const event = msg.payload?.data ? Object.values(msg.payload.data)[0] : undefined;
      if (event?.authReqId !== conn.authReqId)
        mixNote(`the subscription on ${conn.authReqId} got an event for ${String(event?.authReqId)}`);
      const w = mix.window;
      const targeted = w !== null && w.targeted.has(conn.authReqId);
      if (targeted) {
        w.latency.push(now - conn.scheduledAt);
        w.targeted.delete(conn.authReqId);
        w.delivered += 1;
      } else mix.late += 1;
      // The user got the answer it waited for: the next one waits on this socket.
      if (mix.clientCompletes && !mix.closing) mixReplace(conn);
      if (targeted && w.targeted.size === 0) w.onEmpty?.();
      return;
    }
    case 'error':
      mixNote(`subscription error: ${JSON.stringify(msg.payload)}`);
      if (msg.id === conn.msgId && !mix.closing) mixSubscribe(conn);
      return;
    case 'complete':
      if (msg.id === conn.msgId && !mix.closing) mixSubscribe(conn);
      return;
  }
}

async function mixOpen(load: MixOpen): Promise<MixOpenResult> {
  const started = performance.now();
  // {"id":"<n>","type":"subscribe","payload":{"query":...,"variables":{"authReqId":"<id>"}}}, cut at the two values.
  const template = JSON.stringify({
    id: '\u0000',
    type: 'subscribe',
    payload: { query: load.subscription, variables: { authReqId: '\u0001' } },
  });
  const [a, rest] = template.split('\\u0000') as [string, string];
  const [b, c] = rest.split('\\u0001') as [string, string];
  mix.subscribeJson = [a, b, c];
  mix.closing = false;
  mix.clientCompletes = load.clientCompletes ?? false;
  mix.errors.clear();
  const { failed, errors } = await openConnections(load.wsUrl, load.apiKey, load.connections, (ws) => {
    const conn: MixConn = { ws, msgId: '', authReqId: '', seq: 0, scheduledAt: NaN };
    ws.on('message', (raw) => onMixMessage(conn, raw));
    ws.on('error', mixNote);
    ws.on('close', (code, reason) => {
      if (mix.closing) return;
      mix.lost += 1;
      mixNote(`the gateway closed a connection: ${code} ${String(reason)}`);
    });
    mix.conns.push(conn);
    mixSubscribe(conn);
  });
  // graphql-ws does not acknowledge a subscribe: wait until the gateway has set every subscription up.
  await waitIdle(load.gatewayPid, 2_000);
  return {
    opened: mix.conns.length,
    failed,
    seconds: (performance.now() - started) / 1000,
    errors: [...errors, ...mix.errors],
  };
}

async function mixRate(load: MixRate): Promise<MixRateResult> {
  mix.errors.clear();
  const late0 = mix.late;
  const lost0 = mix.lost;
  mix.sender ??= new Pool(load.webhook.origin, {
    connections: load.connections,
    pipelining: 1,
    keepAliveTimeout: 60_000,
  });
  const pool = mix.sender;
  const bodyParts = load.webhook.body.split('{{id}}');
  const w: MixWindow = { targeted: new Map(), latency: new Samples(), delivered: 0, onEmpty: null };
  const webhookLatency = new Samples();
  const sendLag = new Samples();
  let scheduled = 0;
  let sent = 0;
  let acknowledged = 0;
  let dropped = 0;
  let noSubscriber = 0;
  let webhookErrors = 0;
  const waitingAtStart = mix.waiting.size;
  let waitingMin = waitingAtStart;
  // Set once the sender gives up on the webhooks still outstanding: their later answers (or the errors of
  // destroying the pool) are not counted again.
  let gaveUp = false;
  const failed = (id: string, why: string) => {
    webhookErrors += 1;
    const conn = w.targeted.get(id);
    w.targeted.delete(id);
    if (conn) mixReplace(conn);
    mixNote(why);
  };
  const send = async (id: string, at: number): Promise<void> => {
    try {
      const res = await pool.request({
        path: load.webhook.path,
        method: 'POST',
        headers: load.webhook.headers,
        body: bodyParts.join(id),
      });
      const text = await res.body.text();
      if (gaveUp) return;
      if (res.statusCode === 204) {
        acknowledged += 1;
        webhookLatency.push(performance.now() - at);
      } else failed(id, `webhook HTTP ${res.statusCode}: ${text}`);
    } catch (err) {
      if (gaveUp) return;
      failed(
        id,
        err instanceof Error ? `webhook ${(err as { code?: string }).code ?? err.name}: ${err.message}` : String(err),
      );
    }
  };

  mix.window = w;
  const own0 = process.cpuUsage();
  const gw0 = load.gatewayPid === undefined ? NaN : cpuSeconds(load.gatewayPid);
  const started = performance.now();
  const end = started + load.durationMs;
  const interval = 1000 / load.rate;
  const maxInFlight = load.maxInFlight ?? 2_000;
  const inFlight = new Map<string, Promise<void>>();
  let next = started;
  // Open loop, as in runHttp: notifications leave on a fixed schedule whatever the answers and deliveries do.
  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = performance.now();
      while (next <= now && next < end) {
        scheduled += 1;
        if (inFlight.size >= maxInFlight) dropped += 1;
        else {
          let conn = mix.waiting.shift();
          while (conn && conn.ws.readyState !== WebSocket.OPEN) conn = mix.waiting.shift();
          if (conn === undefined) noSubscriber += 1;
          else {
            const id = conn.authReqId;
            sent += 1;
            sendLag.push(now - next);
            conn.scheduledAt = next;
            w.targeted.set(id, conn);
            const p = send(id, next);
            inFlight.set(id, p);
            void p.finally(() => inFlight.delete(id));
          }
        }
        if (mix.waiting.size < waitingMin) waitingMin = mix.waiting.size;
        next += interval;
      }
      if (next < end) setTimeout(tick, Math.max(0, next - performance.now()));
      else resolve();
    };
    tick();
  });
  const answered = await Promise.race([
    Promise.all(inFlight.values()).then(() => true),
    sleep(3_000).then(() => false),
  ]);
  if (!answered) {
    for (const id of [...inFlight.keys()]) failed(id, 'webhook unanswered 3 s after the schedule ended');
    gaveUp = true;
  }
  // Every acknowledged notification's subscriber should have its event: wait for the last ones (at most 5 s).
  if (w.targeted.size > 0) {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, 5_000);
      w.onEmpty = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
  mix.window = null;
  const missing = w.targeted.size;
  for (const conn of w.targeted.values()) mixReplace(conn);
  const own = process.cpuUsage(own0);
  const gateway = load.gatewayPid === undefined ? NaN : cpuSeconds(load.gatewayPid) - gw0;
  const wall = (performance.now() - started) / 1000;
  if (!answered) {
    // The gateway still holds some: a fresh pool for the next window, so none of them counts there.
    mix.sender = null;
    await pool.destroy();
  }
  if (mix.late > late0)
    mixNote(`${mix.late - late0} deliveries arrived after their window or for a subscription given up on`);
  if (mix.lost > lost0) mixNote(`${mix.lost - lost0} connections closed by the gateway`);
  return {
    scheduled,
    sent,
    acknowledged,
    dropped,
    noSubscriber,
    delivered: w.delivered,
    missing,
    webhookErrors,
    latency: w.latency.summary(),
    webhookLatency: webhookLatency.summary(),
    sendLag: sendLag.summary(),
    waitingAtStart,
    waitingMin,
    seconds: wall,
    gatewayCpu: gateway / wall,
    loadgenCpu: (own.user + own.system) / 1e6 / wall,
    errors: [...mix.errors],
  };
}

async function mixClose(): Promise<{ closed: number }> {
  mix.closing = true;
  await mix.sender?.close();
  mix.sender = null;
  const conns = mix.conns.splice(0);
  mix.waiting.clear();
  await closeAll(conns.map((c) => c.ws));
  return { closed: conns.length };
}

async function run(job: Job): Promise<JobResult> {
  switch (job.kind) {
    case 'http':
      return runHttp(job);
    case 'fanout':
      return runFanout(job);
    case 'idle':
      return openIdle(job);
    case 'close-idle':
      return closeIdle();
    case 'mix-open':
      return mixOpen(job);
    case 'mix-rate':
      return mixRate(job);
    case 'mix-close':
      return mixClose();
  }
}

process.on('message', (msg: ToLoadgen) => {
  run(msg.job).then(
    (result) => process.send!({ id: msg.id, ok: true, result } satisfies FromLoadgen),
    (err: unknown) =>
      process.send!({
        id: msg.id,
        ok: false,
        error: err instanceof Error ? (err.stack ?? err.message) : String(err),
      } satisfies FromLoadgen),
  );
});
process.on('disconnect', () => process.exit(0));
// A plain exit, so that --cpu-prof (`--profile`) writes the load generator's profile.
process.on('SIGTERM', () => process.exit(0));
process.stdout.write(`READY ${JSON.stringify({ pid: process.pid })}\n`);
