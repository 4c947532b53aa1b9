// What startGateway is given and what it returns: the options of production (port, host, logger) and the knobs of
// tests, each unset meaning the production behaviour.
import type http from 'node:http';
import type { SpanExporter } from '@opentelemetry/sdk-trace-base';

import type { OperationLimits } from '../execution/limits.js';
import type { DocumentCache } from '../execution/prepare.js';
import type { Logger } from '../logger.js';
import type { PlanTurns } from '../provisioning/plan-turns.js';
import type { Sandboxes } from '../sandbox/index.js';
import type { DirectPath } from '../server/direct-path.js';
import type { ReloadOutcome } from '../server/reload.js';
import type { Services } from '../services.js';
import type { ReloadTrigger } from './live.js';

export interface Gateway {
  /** `http://<host>:<port>` the gateway listens on (127.0.0.1 when bound to all interfaces). */
  readonly url: string;
  /** The address upstreams call back on: PUBLIC_URL, or `url`. */
  readonly publicUrl: string;
  readonly server: http.Server;
  readonly services: Services;
  /** The simulators serving the sandboxed upstreams (null entries for real ones): tests drive them. */
  readonly sandbox: Sandboxes;
  /** Each upstream client's circuit breaker state (`off` where turned off), as /readyz shows it. */
  circuits(): Record<string, string>;
  readonly logger: Logger;
  /** The direct path of POST /graphql (null: off, or Apollo's configuration is not one it reproduces). */
  readonly directPath: DirectPath | null;
  /** The prepare stage's documents, shared by every transport (tests check what a request left there). */
  readonly documents: DocumentCache;
  /** The abuse limits; their token check remembers the texts that passed it (tests check what a request left there). */
  readonly limits: OperationLimits;
  /**
   * Reads the configuration files again (SIGHUP and POST /admin/reload call it; docs/decisions/057): all of them
   * are swapped in at once, or, when one is bad, none is (logged with its file and line, and counted in
   * gateway_config_reloads_total{result="failed"}). The swap is synchronous: no request sees half a reload; before it,
   * the names of the apps configured with keys are recorded in the database (docs/decisions/058). What fails otherwise
   * (not a bad file) is counted as failed and rejected: POST /admin/reload answers it 500 `server_error`.
   */
  reload(trigger: ReloadTrigger): Promise<ReloadOutcome>;
  /** Drains in-flight requests, closes subscriptions, the store and the sandboxes. Idempotent. */
  close(): Promise<void>;
}

export interface GatewayOptions {
  logger?: Logger;
  /** Port override (tests pass 0). */
  port?: number;
  host?: string;
  /**
   * Aborted by a shutdown that comes during the start (src/main.ts): the waits for PostgreSQL and for the migrations
   * stop, what was opened is closed, and startGateway rejects with the signal's reason.
   */
  signal?: AbortSignal;
  /** What tests (and the benchmarks' one-off experiments) hold in their own hands; production sets none of it. */
  testing?: GatewayTesting;
}

/** The knobs of tests, in one place. Each one unset: the production behaviour. */
export interface GatewayTesting {
  /**
   * The clock (epoch ms) of everything that expires: JWTs (exp, nbf) and the JWKS refresh interval, mobile-ID access
   * tokens and notification tokens, pending mobile-ID notifications (reception, retries, each pass) and the mobile-ID
   * JWKS retry schedule, the retention purges (and the stamps they read: webhook events, refused notifications) and
   * a resume cursor's age, the circuit breakers' reset timeouts and the expiry of agents' plan approvals, the minutes
   * of the per-app storage bounds and of the quarantine's cap on unauthenticated refusals, the leases an
   * identification callback reads, identification links' expiry and composite provisionings' heartbeats (their
   * createdAt and updatedAt). A test moves it instead of sleeping. Default Date.now.
   */
  clock?: () => number;
  /** Replaces the OTEL_TRACES_EXPORTER exporter and turns tracing on (an InMemorySpanExporter). */
  traceExporter?: SpanExporter;
  /** false: every POST /graphql goes through Apollo's pipeline (tests compare the two paths). Default true. */
  directPath?: boolean;
  /**
   * Schedules the end of a WebSocket or SSE connection whose JWT expires in `delayMs` (instead of a timer), so a test
   * ends it when it chooses; returns the cancel. Default: a timer.
   */
  scheduleAuthExpiry?: (delayMs: number, expire: () => void) => () => void;
  /**
   * Schedules every background job instead of its timer: `run` starts one run of the job named `name` (no two runs of a
   * job overlap), and the function returned cancels. A test that drives the jobs itself (the passes over pending
   * mobile-ID notifications, the purges) keeps the `run`s and schedules nothing. Default: each job's interval.
   */
  scheduleJob?: (name: string, run: () => void) => () => void;
  /**
   * Releases reserved SSE streams when the test calls the function it is given (instead of after 60 s); what it
   * returns resolves once the release is done, or put off by a request connecting the stream.
   */
  scheduleSseRelease?: (release: () => Promise<void>) => void;
  /**
   * Awaited by a request that graphql-sse has accepted as the connection of a reserved SSE stream, before the gateway
   * marks the stream connected: a test holds it there to release the stream meanwhile. Default: not awaited.
   */
  sseConnectionAccepted?: (token: string) => Promise<void>;
  /** The turns plans take on the event loop (a test hands them over itself to hold plans in flight). */
  planTurns?: PlanTurns;
}

/**
 * How long a shutdown (SIGTERM) takes at most: WebSockets (close 1001) and SSE streams end at once, in-flight HTTP
 * requests get `drainMs` before their connections are cut, and the process exits by `exitMs` whatever is left
 * (src/main.ts). Kubernetes' termination grace must exceed its preStop pause plus `exitMs` (deploy/kubernetes).
 */
export const SHUTDOWN = { drainMs: 20_000, exitMs: 25_000 } as const;
