import type { LatencySummary } from './stats.js';

/** Messages between the orchestrator (bench/run.ts) and the load generator process (bench/loadgen.ts). */

export interface HttpLoad {
  kind: 'http';
  /** Origin, e.g. http://127.0.0.1:4000. */
  origin: string;
  path: string;
  method?: 'POST' | 'GET';
  headers: Record<string, string>;
  /** Request body; every `{{uuid}}` becomes a fresh UUIDv4 per request (idempotency keys, auth_req_ids). */
  body?: string;
  /** Keep-alive connections (no pipelining: one request in flight per connection). */
  connections: number;
  durationMs: number;
  /** Open loop at this many requests/s (latency counted from the scheduled send time); closed loop when absent. */
  rate?: number;
  /**
   * Open loop only: a request due while this many are outstanding is not sent and counts as dropped (the
   * server is saturated; queueing more only makes the run longer). Default 2,000.
   */
  maxInFlight?: number;
  expectStatus: number;
  /** Count a 200 whose body holds a GraphQL `errors` member as an error. */
  graphql?: boolean;
}

export interface HttpResult {
  requests: number;
  errors: number;
  /** Open loop: requests not sent because `maxInFlight` were outstanding, or still unanswered 3 s after the schedule ended. */
  dropped: number;
  /** A few distinct error descriptions, for the log. */
  errorSamples: string[];
  seconds: number;
  rps: number;
  /** Milliseconds. */
  latency: LatencySummary;
  /**
   * Open loop: the load generator's own share of the tail. `fromSend` counts each latency from when the request left
   * rather than from its schedule; `sentLateMaxMs` is the most a request left after its scheduled time, `sentLate`
   * how many left 5 ms late or more, and `loopDelayMaxMs` the generator's longest event-loop delay (10 ms sampling:
   * an idle loop reads ~10). `slowestByQuarter`: the slowest latency (ms, whole) of the requests scheduled in each
   * 250 ms of the block, in order: where in the block a stall fell, and how long it lasted.
   */
  driver?: {
    fromSend: LatencySummary;
    sentLateMaxMs: number;
    sentLate: number;
    loopDelayMaxMs: number;
    slowestByQuarter: number[];
  };
}

export interface FanoutLoad {
  kind: 'fanout';
  /** ws://host:port/graphql */
  wsUrl: string;
  apiKey: string;
  subscribers: number;
  rounds: number;
  /** Distinct authReqIds per round; every subscriber subscribes to each of them. */
  idsPerRound: number;
  /** The webhook each round sends once per id: `{{id}}` is the auth_req_id, `{{ts}}` the send time (epoch ms, 3 decimals). */
  webhook: { origin: string; path: string; headers: Record<string, string>; body: string };
  /** GraphQL subscription document; `$authReqId` is its one variable. */
  subscription: string;
  /** The gateway's pid: after subscribing, the sender waits until that process is idle (every subscription set up). */
  gatewayPid?: number;
  /** Dotted path in the event payload of a timestamp (epoch ms or ISO) set from the webhook, if the schema has one. */
  timestampPath?: string;
  /** Subscribers spread evenly over these URLs instead of `wsUrl` (replicas); latency is also reported per URL. */
  wsUrls?: string[];
  /** More processes (other replicas, PostgreSQL) that must be idle before the webhooks leave. */
  idlePids?: number[];
  /** Processes whose CPU (in cores) over the delivery windows is returned in `cpu`, in this order. */
  cpuPids?: number[];
}

export interface FanoutResult {
  deliveries: number;
  expected: number;
  /** deliveries / (last delivery - first webhook sent), over every round. */
  deliveriesPerSecond: number;
  /** webhook send -> subscriber receipt, ms. */
  latency: LatencySummary;
  /** Every delivery's latency, ms (to combine rounds). */
  samples?: number[];
  /** Gateway CPU seconds per subscription, from the first subscribe message until the gateway is idle again (includes ~0.3 s of its idle tail). */
  subscribeCpuPerSubscription?: number;
  /** CPU, in cores, of the gateway and of the load generator between the first webhook and the last delivery of each round. */
  gatewayCpu: number;
  loadgenCpu: number;
  /** Where the latency's start time came from: the payload's timestamp or the sender's clock. */
  clock: 'payload' | 'sender';
  errors: string[];
  /** With `wsUrls`: every delivery's latency per URL, in the order of `wsUrls`. */
  groupSamples?: number[][];
  /** Webhook send -> its 2xx, ms. */
  webhookLatency?: LatencySummary;
  webhookSamples?: number[];
  /** With `cpuPids`: each one's CPU in cores over the delivery windows. */
  cpu?: number[];
}

export interface IdleLoad {
  kind: 'idle';
  wsUrl: string;
  apiKey: string;
  connections: number;
  /** A subscription each connection holds open (an id that never completes), or null for bare connections. */
  subscription: string | null;
}

export interface IdleResult {
  opened: number;
  failed: number;
  errors: string[];
}

/**
 * Scenario 7: opens `connections` graphql-ws connections, each holding one pending subscription on its own
 * authReqId (`mix-<uuid>`). Whenever a subscription completes (its notification arrived), the connection
 * subscribes again on a fresh id, so the number of waiting subscribers stays at `connections` while
 * `mix-rate` consumes them.
 */
export interface MixOpen {
  kind: 'mix-open';
  wsUrl: string;
  apiKey: string;
  connections: number;
  /** GraphQL subscription document; `$authReqId` is its one variable. */
  subscription: string;
  /** After the last subscribe, wait until this process (the gateway) is idle: every subscription is set up. */
  gatewayPid?: number;
  /**
   * The server keeps a subscription open after its event (Hive Gateway's pubsub fields): the connection
   * completes it itself on its first `next` and subscribes again. Default false: the server completes it.
   */
  clientCompletes?: boolean;
}

export interface MixOpenResult {
  opened: number;
  failed: number;
  /** Seconds from the first handshake to the gateway being idle again. */
  seconds: number;
  errors: string[];
}

/**
 * Open loop at `rate` notifications/s for `durationMs`: each scheduled notification goes to the oldest
 * waiting subscriber's authReqId (first in, first out, so a fresh subscription waits behind every older one
 * before it is targeted). Latencies count from the scheduled send time.
 */
export interface MixRate {
  kind: 'mix-rate';
  rate: number;
  durationMs: number;
  /** The webhook: `{{id}}` in the body is the auth_req_id. */
  webhook: { origin: string; path: string; headers: Record<string, string>; body: string };
  /** Keep-alive connections of the webhook sender (no pipelining). */
  connections: number;
  /** A notification due while this many webhooks are outstanding is not sent and counts as dropped. Default 2,000. */
  maxInFlight?: number;
  /** The gateway's pid, for its CPU over the window. */
  gatewayPid?: number;
}

export interface MixRateResult {
  /** Notifications due by the schedule. */
  scheduled: number;
  /** Sent (due, minus dropped and minus those that found no waiting subscriber). */
  sent: number;
  /** Answered 204. */
  acknowledged: number;
  /** Not sent: `maxInFlight` webhooks were outstanding. */
  dropped: number;
  /** Not sent: no subscriber was waiting (every connection's subscription already targeted). */
  noSubscriber: number;
  /** Acknowledged notifications whose subscriber got the event. */
  delivered: number;
  /** Acknowledged notifications whose subscriber had not got the event 5 s after the schedule ended. */
  missing: number;
  /** Webhooks answered with another status, or failed. */
  webhookErrors: number;
  /** Scheduled send -> subscriber receipt, ms. */
  latency: LatencySummary;
  /** Scheduled send -> webhook answer (204), ms. */
  webhookLatency: LatencySummary;
  /** Scheduled send -> the moment the sender got to it, ms: how far the load generator fell behind its schedule. */
  sendLag: LatencySummary;
  /** Subscribers waiting (untargeted subscriptions) at the start and at the fewest during the window. */
  waitingAtStart: number;
  waitingMin: number;
  /** Seconds from the first scheduled send until every delivery arrived (or the drain gave up). */
  seconds: number;
  /** CPU of the gateway (`gatewayPid`) and of the load generator over `seconds`, in cores. */
  gatewayCpu: number;
  loadgenCpu: number;
  errors: string[];
}

export type Job = HttpLoad | FanoutLoad | IdleLoad | { kind: 'close-idle' } | MixOpen | MixRate | { kind: 'mix-close' };
export type JobResult = HttpResult | FanoutResult | IdleResult | { closed: number } | MixOpenResult | MixRateResult;

export type ToLoadgen = { id: number; job: Job };
export type FromLoadgen = { id: number; ok: true; result: JobResult } | { id: number; ok: false; error: string };
