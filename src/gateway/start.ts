import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApolloServer } from '@apollo/server';
import {
  createRequestStateCodec,
  localhostAllowedHostnames,
  type RequestStateCodec,
} from '@modelcontextprotocol/server';
import type { SpanExporter } from '@opentelemetry/sdk-trace-base';
import { printSchema } from 'graphql';

import { AgentDryRun } from '../agents/dry-run.js';
import { SCOPES } from '../auth/caller.js';
import { JwksKeys, JwtAuthenticator, looksLikeJwt, scheduleAfter } from '../auth/jwt.js';
import { configuredApps, createAuthenticator, type Authenticate } from '../auth/keys.js';
import { cloudLedgerRecord } from '../auth/tenancy.js';
import { ConfigError, everyUpstreamSandboxed, reloadConfig, type Config, type JwtAuthConfig } from '../config/index.js';
import { WebhookErrorCode } from '../errors.js';
import { EventLog, Events, EventStreams, InProcessBus, type EventBus } from '../events/index.js';
import { PostgresBus } from '../events/postgres-bus.js';
import { createAdmission } from '../execution/admit.js';
import { apolloSetup } from '../execution/apollo.js';
import { OperationLimits } from '../execution/limits.js';
import { createPipeline } from '../execution/pipeline.js';
import { DocumentCache } from '../execution/prepare.js';
import { OperationRunner, streamingExecution } from '../execution/run.js';
import { SharedExecution } from '../execution/shared.js';
import { agentResolvers } from '../graphql/agents.js';
import { catalogResolvers } from '../graphql/catalog.js';
import { cloudResolvers } from '../graphql/cloud.js';
import { commonResolvers } from '../graphql/common.js';
import { createContext, type GraphQLContext } from '../graphql/context.js';
import { identityResolvers } from '../graphql/identity.js';
import { mobileIdResolvers } from '../graphql/mobile-id.js';
import { provisioningResolvers } from '../graphql/provisioning.js';
import { buildSchema } from '../graphql/schema.js';
import { IDENTIFICATION_EVENT_KIND } from '../identity/completions.js';
import { VERIFICATION_EVENT_KIND } from '../identity/service.js';
import { createLogger, type Logger } from '../logger.js';
import { Metrics } from '../metrics.js';
import { MOBILE_ID_EVENT_KIND } from '../mobile-id/stored.js';
import { pauseAt } from '../phases.js';
import type { PlanTurns } from '../provisioning/plan-turns.js';
import { ProvisioningPlanner } from '../provisioning/plan.js';
import { ProvisioningService } from '../provisioning/service.js';
import { RateLimits } from '../ratelimit/buckets.js';
import type { Sandboxes } from '../sandbox/index.js';
import { loadSecretBox } from '../secret.js';
import { approvalsRoutes } from '../server/approvals.js';
import { DEFAULT_QUERY, graphiqlExamples } from '../server/graphiql-examples.js';
import {
  createGraphiqlHandler,
  defaultGraphiqlAssetsDir,
  GRAPHIQL_ASSETS_PATH,
  prefersHtml,
} from '../server/graphiql.js';
import { authFailureHttpError, graphqlRoute } from '../server/graphql.js';
import { healthRoutes, startingHandler } from '../server/health.js';
import { HttpPlans } from '../server/http-plans.js';
import { createRequestHandler, type Route } from '../server/http.js';
import { Approvals } from '../server/mcp/approval.js';
import { mcpRoutes } from '../server/mcp/http.js';
import { buildSurface } from '../server/mcp/surface.js';
import { reloadRoute, whereOf, type ReloadOutcome } from '../server/reload.js';
import { sendOAuthError } from '../server/respond.js';
import { createSseRoute } from '../server/sse.js';
import { tracedRoute } from '../server/tracing.js';
import { TrustedDocuments } from '../server/trusted-documents.js';
import { identificationWebhookRoute } from '../server/webhooks/identification.js';
import { mobileIdWebhookRoute } from '../server/webhooks/mobile-id.js';
import { verificationWebhookRoute } from '../server/webhooks/verification.js';
import { createWsServer } from '../server/ws.js';
import type { ConfiguredApp, Services } from '../services.js';
import { AgentPlans } from '../store/agent-plans.js';
import { AppActivity } from '../store/app-activity.js';
import { AppStorage } from '../store/app-storage.js';
import { IdempotencyRecords } from '../store/idempotency.js';
import { openStore, type Store } from '../store/index.js';
import { Ledger } from '../store/ledger.js';
import { nameOperationApp } from '../telemetry/operations.js';
import { createTracing } from '../telemetry/tracing.js';
import { Idempotency } from '../upstream/idempotency.js';
import { startUpstreams } from './upstreams.js';

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
  /** The cached plans of POST /graphql (null: off, or Apollo's configuration is not one they reproduce). */
  readonly httpPlans: HttpPlans | null;
  /** The prepare stage's documents, shared by every transport (tests check what a request left there). */
  readonly documents: DocumentCache;
  /** The abuse limits; their token check remembers the texts that passed it (tests check what a request left there). */
  readonly limits: OperationLimits;
  /**
   * Reads the configuration files again (SIGHUP and POST /admin/reload call it; docs/decisions/057): all of them
   * are swapped in at once, or, when one is bad, none is (logged with its file and line, and counted in
   * gateway_config_reloads_total{result="failed"}). Synchronous: no request sees half a reload.
   */
  reload(trigger: 'SIGHUP' | 'POST /admin/reload'): ReloadOutcome;
  /** Drains in-flight requests, closes subscriptions, the store and the sandboxes. Idempotent. */
  close(): Promise<void>;
}

export interface GatewayOptions {
  logger?: Logger;
  /** Port override (tests pass 0). */
  port?: number;
  host?: string;
  /** What tests (and the benchmarks' one-off experiments) hold in their own hands; production sets none of it. */
  testing?: GatewayTesting;
}

/** The knobs of tests, in one place. Each one unset: the production behaviour. */
export interface GatewayTesting {
  /**
   * The clock (epoch ms) of everything that expires: JWTs (exp, nbf) and the JWKS refresh interval, mobile-ID access
   * tokens and notification tokens, pending mobile-ID notifications (reception, retries, each pass) and the mobile-ID
   * JWKS retry schedule, the retention purges, the circuit breakers' reset timeouts and the expiry of agents' plan
   * approvals. A test moves it instead of sleeping. Default Date.now.
   */
  clock?: () => number;
  /** Replaces the OTEL_TRACES_EXPORTER exporter and turns tracing on (an InMemorySpanExporter). */
  traceExporter?: SpanExporter;
  /** false: every POST /graphql goes through Apollo's pipeline (tests compare the two paths). Default true. */
  httpPlans?: boolean;
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
  /** Releases reserved SSE streams when the test calls the function it is given (instead of after 60 s). */
  scheduleSseRelease?: (release: () => void) => void;
  /** The turns plans take on the event loop (a test hands them over itself to hold plans in flight). */
  planTurns?: PlanTurns;
}

/**
 * A background job of startGateway: `run` every `intervalMs` (a run still in flight is not overlapped; a failure is
 * logged with the job's name), and `stop` once at shutdown after the timer is cleared (a last run, where one is due).
 */
interface BackgroundJob {
  readonly name: string;
  readonly intervalMs: number;
  run(): Promise<unknown>;
  stop?(): Promise<unknown>;
}

/** Starts the jobs, logs their list once, and returns the one stop of them all (each job's `stop`, in order). */
function startJobs(
  jobs: readonly BackgroundJob[],
  logger: Logger,
  schedule?: GatewayTesting['scheduleJob'],
): () => Promise<void> {
  const cancels = jobs.map((job) => {
    let running = false;
    const tick = () => {
      if (running) return;
      running = true;
      job
        .run()
        .catch((err: unknown) => logger.warn({ err, job: job.name }, `background job failed: ${job.name}`))
        .finally(() => (running = false));
    };
    if (schedule) return schedule(job.name, tick);
    const timer = setInterval(tick, job.intervalMs);
    timer.unref();
    return () => clearInterval(timer);
  });
  logger.debug({ jobs: jobs.map((j) => ({ name: j.name, intervalMs: j.intervalMs })) }, 'background jobs started');
  return async () => {
    for (const cancel of cancels) cancel();
    for (const job of jobs)
      await job
        .stop?.()
        .catch((err: unknown) => logger.warn({ err, job: job.name }, `background job failed to stop: ${job.name}`));
  };
}

/**
 * How long a shutdown (SIGTERM) takes at most: WebSockets (close 1001) and SSE streams end at once, in-flight HTTP
 * requests get `drainMs` before their connections are cut, and the process exits by `exitMs` whatever is left
 * (src/main.ts). Kubernetes' termination grace must exceed its preStop pause plus `exitMs` (deploy/kubernetes).
 */
export const SHUTDOWN = { drainMs: 20_000, exitMs: 25_000 } as const;

/**
 * The composition root: builds every part from the config and wires them together. Nothing else reads
 * globals; tests start as many gateways as they like, each on port 0.
 */
export async function startGateway(config: Config, options: GatewayOptions = {}): Promise<Gateway> {
  const logger = options.logger ?? createLogger({ level: config.logLevel });
  const metrics = new Metrics();
  const cleanups: Array<() => Promise<void>> = [];
  // Known after listen; upstream callbacks (callbackUrl) are built from it.
  let listenedUrl = '';
  const closeAll = async () => {
    for (const c of cleanups.reverse())
      await c().catch((err: unknown) => logger.error({ err }, 'error during shutdown'));
  };

  try {
    // Apps that sign in with their identity provider's JWTs (AUTH_*): a bad AUTH_JWKS_FILE stops start-up before anything
    // else starts; a JWKS URL is fetched now, so that the first token finds its keys.
    const testing = options.testing ?? {};
    const now = testing.clock ?? (() => Date.now());
    // Each provider's keys: a JWKS URL's are kept across reloads (their cache and their fetch schedule), a file's are
    // read again by each reload.
    let keysByUrl = new Map<string, JwksKeys>();
    const keysOf = (jwtAuth: JwtAuthConfig | null): JwksKeys[] =>
      (jwtAuth?.issuers ?? []).map((issuer) => {
        const source = issuer.jwks;
        const variable = jwtAuth!.issuersFile ? 'AUTH_ISSUERS' : 'AUTH_JWKS_FILE';
        return (
          ('url' in source ? keysByUrl.get(source.url) : undefined) ??
          new JwksKeys({ source, variable, refreshIntervalMs: jwtAuth!.refreshIntervalMs, now, logger })
        );
      });
    const keysInUse = (keys: readonly JwksKeys[]) => {
      keysByUrl = new Map(keys.flatMap((k) => (k.url === null ? [] : [[k.url, k] as const])));
      for (const k of keys) if (k.url !== null) void k.refresh();
    };
    const jwtWarnings = (jwtAuth: JwtAuthConfig | null) => {
      for (const issuer of jwtAuth?.issuers ?? []) {
        const which = jwtAuth!.issuersFile ? `issuer ${issuer.issuer} of AUTH_ISSUERS: ` : '';
        if (issuer.scopePrefix === '') {
          logger.warn(
            `${which}AUTH_SCOPE_PREFIX is empty: every scope word of a JWT that is spelled like a gateway scope (cloud:write, …) grants it, whatever client of the identity provider the token was issued for; set a prefix (such as gateway:) that only the gateway\'s client scopes carry`,
          );
        }
        if (issuer.apps.any && issuer.appClaim === null) {
          logger.warn(
            `${which}AUTH_APPS accepts any app name (*) with the default app claims: a token without azp or client_id is named by its sub, so every user the identity provider signs a token for is an app; list the clients in AUTH_APPS, or set AUTH_APP_CLAIM`,
          );
        }
      }
    };
    const startKeys = keysOf(config.jwtAuth);
    keysInUse(startKeys);
    jwtWarnings(config.jwtAuth);

    const tracing = createTracing(config.tracing, { exporter: testing.traceExporter });
    cleanups.push(() => tracing.close());

    const server = http.createServer();
    server.keepAliveTimeout = 65_000;
    const listen = async () => {
      const port = options.port ?? config.port;
      const host = options.host ?? config.host;
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => {
          server.off('error', reject);
          resolve();
        });
      });
      const address = server.address() as AddressInfo;
      const shownHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
      listenedUrl = `http://${shownHost}:${address.port}`;
    };
    // PostgreSQL may not answer yet (the gateway started before its database): the port is open at once, alive but
    // not ready, while the store waits for it; the routes take over once everything is built. SQLite opens at once.
    let waitingFor = 'connecting to PostgreSQL';
    const starting = config.databaseUrl ? startingHandler(() => waitingFor) : null;
    if (starting) {
      server.on('request', starting);
      await listen();
      logger.info(
        { url: listenedUrl },
        'listening: not ready (/readyz) until PostgreSQL answers and the gateway has started',
      );
      cleanups.push(
        () => new Promise<void>((resolve) => (server.listening ? server.close(() => resolve()) : resolve())),
      );
    }
    const store: Store = await openStore({
      dataDir: config.dataDir,
      databaseUrl: config.databaseUrl,
      sqliteSynchronous: config.sqliteSynchronous,
      sqliteCommitWindowMs: config.sqliteCommitWindowMs,
      migrations: config.databaseMigrations,
      logger,
      onUnreachable: (why) => {
        if (why !== null) waitingFor = why;
      },
    });
    cleanups.push(() => store.close());

    // One gateway secret (TOKEN_ENCRYPTION_KEY, or its key file in DATA_DIR): see startUpstreams' `box`.
    const box = loadSecretBox({
      key: config.tokenEncryptionKey,
      dataDir: config.dataDir,
      shared: store.dialect === 'postgres',
      logger,
    });

    const rateLimits = await RateLimits.create({ limits: config.rateLimits, store, metrics, logger });

    // What each app's credentials can make the gateway store, bounded per app (docs/decisions/051): counted from the
    // database once here, then by this process, and counted again every few minutes where replicas share it.
    const storageLabel = (scope: string) =>
      scope.startsWith('app:') ? scope.slice(4) : `scope-${box.digest(`app storage label\u0000${scope}`).slice(0, 12)}`;
    const storage = new AppStorage(config.storageLimits, metrics, storageLabel);
    const storageSources = {
      webhookEventKinds: [MOBILE_ID_EVENT_KIND, VERIFICATION_EVENT_KIND, IDENTIFICATION_EVENT_KIND],
    };
    await storage.resync(store.db, storageSources);

    const ledger = new Ledger({ store });
    const idempotencyRecords = new IdempotencyRecords({ store });
    // GATEWAY_TEST_PAUSE_AT (tests only): undefined unless set, so the call sites cost one check.
    const pause = pauseAt(config.testPauseAt, logger);
    const idempotency = new Idempotency({
      pauseAt: pause,
      records: idempotencyRecords,
      metrics,
      retentionMs: config.idempotencyRetentionMs,
      waitMs: config.idempotencyWaitMs,
      leaseMs: config.idempotencyTakeoverMs,
      logger,
      digest: (text) => box.digest(text),
    });

    const eventLog = new EventLog(store.db, config.eventRetentionMs, store.dialect);
    // With PostgreSQL, events cross replicas through LISTEN/NOTIFY; with SQLite there is one process.
    const replicated =
      store.dialect === 'postgres' && config.databaseUrl
        ? await PostgresBus.start({ databaseUrl: config.databaseUrl, db: store.db, log: eventLog, logger })
        : null;
    // Cursors start after what the log holds: events already stored are not published again.
    const bus: EventBus = replicated ?? new InProcessBus(await eventLog.lastSeq());
    cleanups.push(() => bus.close());
    const events = new Events(eventLog, bus, new EventStreams(eventLog, bus, tracing), metrics, tracing);

    const upstreams = await startUpstreams(config, {
      logger,
      metrics,
      store,
      ledger,
      idempotency,
      events,
      tracing,
      publicUrl: () => config.publicUrl ?? listenedUrl,
      selfUrl: () => listenedUrl,
      onClose: (close) => cleanups.push(close),
      box,
      storage,
      ...(pause ? { pauseAt: pause } : {}),
      clock: testing.clock,
    });
    const { cloud } = upstreams;
    // Provisioning and plans read the ledger through the owner rule of every cloud read (src/auth/tenancy.ts).
    const cloudLookup = async (id: string) => cloudLedgerRecord(await ledger.get(id));
    const provisioning = new ProvisioningService({
      db: store.db,
      cloud,
      lookup: cloudLookup,
      logger,
      events,
      staleMs: config.idempotencyTakeoverMs,
      bounds: config.provisioningBounds,
      charge: (caller, points) => rateLimits.take(caller, 'creations', points),
      digest: (text) => box.digest(text),
    });
    // A bare key's label in metrics and logs is a keyed digest: an unsalted hash of a key can be tested offline.
    const keyLabel = (key: string) => `key-${box.digest(`api key label\u0000${key}`).slice(0, 12)}`;
    const activity = new AppActivity(store.db);
    // The running snapshot of what the files configure: who may call (the API keys and JWT providers) and which
    // documents are trusted. A reload builds a new one and swaps it in whole (docs/decisions/057).
    const authOf = (
      cfg: Config,
      keys: readonly JwksKeys[],
    ): { authenticate: Authenticate; configured: ConfiguredApp[] } => {
      const configured = configuredApps(cfg, keyLabel);
      // A JWT takes the name of an app configured with keys (or a bare key's label) only when AUTH_APPS says so.
      const jwt = cfg.jwtAuth
        ? new JwtAuthenticator(
            cfg.jwtAuth,
            keys,
            now,
            new Set(configured.map((a) => a.name)),
            (check) => metrics.jwtChecks.inc({ check }),
            (reason) => metrics.jwtRefusals.inc({ reason }),
          )
        : null;
      return {
        authenticate: createAuthenticator(
          cfg,
          keyLabel,
          jwt ? { looks: looksLikeJwt, verify: (token) => jwt.authenticate(token) } : undefined,
        ),
        configured,
      };
    };
    let live: {
      readonly authenticate: Authenticate;
      readonly configured: ConfiguredApp[];
      readonly trusted: TrustedDocuments | undefined;
    };
    const services: Services = {
      config,
      store,
      metrics,
      ledger,
      idempotency,
      cloud,
      provisioning,
      // A plan is charged read points by its size, at most PROVISIONING_MAX_CONCURRENT_PLANS of an app run at once, and
      // every plan in flight takes turns on the event loop (docs/decisions/053).
      plans: new ProvisioningPlanner(provisioning, cloud, cloudLookup, {
        charge: (caller, points) => rateLimits.take(caller, 'reads', points),
        maxConcurrentPerApp: config.maxConcurrentPlans,
        ...(testing.planTurns ? { turns: testing.planTurns } : {}),
        observe: {
          refused: (app) => metrics.plansRefused.inc({ app }),
          inFlight: (plans) => metrics.plansInFlight.set(plans),
        },
      }),
      events,
      identity: upstreams.identity,
      mobileId: upstreams.mobileId,
      rateLimits,
      storage,
      // The configured apps of the running snapshot (a reload of GATEWAY_APPS_FILE changes them).
      apps: {
        get configured() {
          return live.configured;
        },
        activity,
      },
      agentPlans: new AgentPlans(store.db, {
        seal: (plain, context) => box.seal(plain, context),
        open: (sealed, context) => box.open(sealed, context),
        approvalTtlMs: config.mcp.approvalTtlMs,
        logger,
        ...(testing.clock ? { now: testing.clock } : {}),
      }),
    };
    // Shutdown lets running provisionings finish their current step before the store closes.
    cleanups.push(() => services.provisioning.idle());

    // The gateway's background jobs, all of them: started here, stopped together at shutdown.
    const jobs: BackgroundJob[] = [
      // Every replica writes when it last saw each app every few seconds, and once more when it stops.
      { name: 'app activity', intervalMs: 5_000, run: () => activity.flush(), stop: () => activity.flush() },
      { name: 'purge idempotency records', intervalMs: 60_000, run: () => idempotencyRecords.purgeExpired(now()) },
      {
        name: 'purge expired events',
        intervalMs: 60_000,
        run: () =>
          eventLog.purgeExpired(now(), {
            kinds: storageSources.webhookEventKinds,
            release: (scope, rows, chars) => storage.release('events', scope, rows, chars),
          }),
      },
      { name: 'purge expired mobile-ID secrets', intervalMs: 60_000, run: () => services.mobileId.purgeExpired(now()) },
      { name: 'purge rate-limit counters', intervalMs: 60_000, run: () => rateLimits.purgeExpired() },
      {
        name: 'purge agent plans',
        intervalMs: 60_000,
        run: async () => {
          await services.agentPlans.purgeExpired(now());
          const counts = await services.agentPlans.countByState();
          metrics.agentPlans.reset();
          for (const [state, plans] of counts) metrics.agentPlans.set({ state }, plans);
        },
      },
      // Other replicas write and purge too: their share is counted in from the database every ten minutes.
      ...(store.dialect === 'postgres'
        ? [
            {
              name: 'recount app storage',
              intervalMs: 600_000,
              run: () => storage.resync(store.db, storageSources, now()),
            },
          ]
        : []),
      // Notifications acknowledged while their id_token could not be verified: retried on their own schedule
      // (src/mobile-id/pending.ts); each replica looks, one takes each row.
      { name: 'pending mobile-ID verification', intervalMs: 2_000, run: () => services.mobileId.verifyPending() },
    ];
    cleanups.push(startJobs(jobs, logger, testing.scheduleJob));

    const schema = buildSchema([
      commonResolvers,
      catalogResolvers,
      cloudResolvers,
      provisioningResolvers,
      identityResolvers,
      mobileIdResolvers,
      agentResolvers,
    ] as Record<string, unknown>[]);
    // Each transport calls `authenticate` once per request or connection, and admits each operation's document once:
    // they read the running snapshot then, so what started under one configuration finishes under it (decision 057).
    const authenticate: Authenticate = (authorization) => live.authenticate(authorization);
    const expiry = { now, schedule: testing.scheduleAuthExpiry ?? scheduleAfter };

    // The execution pipeline (src/execution/, docs/decisions/044): one instance of each stage, used by every
    // transport. prepare: parse, limits and validation once per text; admit: cost, then rate limit; run: graphql-js
    // or a compiled plan; present: masking, warnings, status codes.
    const limits = new OperationLimits(config.graphqlLimits, { introspection: config.introspection });
    const documents = new DocumentCache(schema, limits);
    const admit = createAdmission({
      schema,
      limits,
      rateLimits,
      seen: (caller) => {
        if (!caller.app) return;
        if (caller.via) activity.seen(caller.app, caller.via, caller.grants.key);
        if (tracing.enabled) nameOperationApp(caller.app);
      },
    });
    const loadTrusted = () =>
      config.trustedDocuments.mode === 'off'
        ? undefined
        : TrustedDocuments.load({
            mode: config.trustedDocuments.mode,
            manifest: config.trustedDocuments.manifest!,
            schema,
            introspection: config.introspection,
          });
    live = { ...authOf(config, startKeys), trusted: loadTrusted() };
    const trusted = live.trusted
      ? { admit: (request: Parameters<TrustedDocuments['admit']>[0]) => live.trusted!.admit(request) }
      : undefined;

    // The files a reload reads again, for its log line and its answer.
    const reloadedFiles = [
      config.appsFilePath,
      config.jwtAuth?.issuersFile,
      ...(config.jwtAuth?.issuers ?? []).map((i) => ('file' in i.jwks ? i.jwks.file : undefined)),
      config.mobileId.jwksFile,
      config.trustedDocuments.manifest,
    ].filter((f): f is string => typeof f === 'string');
    const reload = (trigger: 'SIGHUP' | 'POST /admin/reload'): ReloadOutcome => {
      let files: string[] = reloadedFiles;
      try {
        // Everything is read and checked before anything is swapped: the first bad file leaves all as it was.
        const next = reloadConfig(config);
        files = [
          ...new Set([
            ...reloadedFiles,
            ...(next.jwtAuth?.issuers ?? []).flatMap((i) => ('file' in i.jwks ? [i.jwks.file] : [])),
          ]),
        ];
        const keys = keysOf(next.jwtAuth);
        const auth = authOf(next, keys);
        const nextTrusted = loadTrusted();
        const swapMobileIdKeys = services.mobileId.prepareKeysReload();
        live = { ...auth, trusted: nextTrusted };
        swapMobileIdKeys?.();
        keysInUse(keys);
        jwtWarnings(next.jwtAuth);
        metrics.configReloads.inc({ result: 'ok' });
        logger.info(
          { trigger, files },
          'configuration reloaded: requests from now on use the files as read now; operations in flight finish under the configuration they started with',
        );
        return { ok: true, files };
      } catch (err) {
        const variable =
          err instanceof ConfigError
            ? err.variable
            : /^MOBILEID_JWKS_FILE /.test((err as Error).message)
              ? 'MOBILEID_JWKS_FILE'
              : 'configuration';
        const message = err instanceof Error ? err.message : String(err);
        const where = whereOf(message, files);
        metrics.configReloads.inc({ result: 'failed' });
        logger.error(
          { trigger, variable, file: where.file, line: where.line, reason: message },
          'configuration reload refused: a file is bad, the running configuration is kept',
        );
        return { ok: false, variable, ...where, message };
      }
    };

    // The one entry of the execution pipeline (docs/decisions/060, 065): POST /graphql's planned path, the MCP
    // transport, graphql-ws and graphql-sse call it.
    // The cloud tree (src/graphql/cloud.ts): every field under these reads the ledger through the request's
    // DataLoaders, so a second run (graphql-js, after an error) changes nothing.
    const runner = new OperationRunner(
      schema,
      testing.httpPlans === false ? new Set() : new Set(['project', 'projects']),
      !config.introspection,
    );
    // One shared execution for both transports: identical subscriptions share each event's result (decision 030).
    // SUBSCRIPTION_COMPILED_SELECTION: each selection as graphql-jit compiled it, graphql-js on any error (decision 062).
    const shared = new SharedExecution(config.delivery.compiledSelection ? schema : undefined);
    metrics.countSubscriptions(() => shared.stats);
    const pipeline = createPipeline({
      schema,
      documents,
      admit,
      runner,
      // graphql-ws and graphql-sse run graphql-js with each subscription event's result shared, a span per operation.
      streaming: {
        ws: streamingExecution(tracing, 'ws', shared, documents.hideSuggestions),
        sse: streamingExecution(tracing, 'sse', shared, documents.hideSuggestions),
      },
      trusted,
      logger,
      context: (caller, requestId) => createContext(services, caller, requestId, () => logger.child({ requestId })),
    });
    const apolloConfig = apolloSetup({ schema, limits, pipeline, logger, tracing: tracing.enabled });
    const apollo = new ApolloServer<GraphQLContext>(apolloConfig.options);
    await apollo.start();
    cleanups.push(() => apollo.stop());
    const plans =
      testing.httpPlans === false
        ? null
        : HttpPlans.create(
            { apollo: apolloConfig, pipeline, runner, documents, tracing: tracing.enabled },
            config.apolloReporting,
            (message) => logger.warn(message),
          );

    // GraphiQL exists only where introspection does (GRAPHQL_INTROSPECTION=false removes both).
    const graphiql = config.introspection
      ? createGraphiqlHandler({
          assetsDir: defaultGraphiqlAssetsDir(),
          config: {
            sandbox: everyUpstreamSandboxed(config.upstreams),
            apiKeyRequired: !config.open,
            defaultQuery: DEFAULT_QUERY,
            examples: graphiqlExamples({
              sandbox: config.upstreams.mobileId.sandbox,
              notificationToken: config.open ? (upstreams.sandbox.mobileId?.notificationToken ?? null) : null,
              url: config.publicUrl ?? `http://localhost:${config.port}`,
            }),
          },
        })
      : null;

    const sse = createSseRoute({
      pipeline,
      schema,
      logger,
      authenticate,
      expiry,
      trusted,
      tracing,
      bodyLimit: config.graphqlLimits.maxBodyBytes,
      ...(testing.scheduleSseRelease ? { scheduleRelease: testing.scheduleSseRelease } : {}),
      context: (caller, requestId) => createContext(services, caller, requestId, () => logger.child({ requestId })),
    });

    // The Model Context Protocol endpoint (src/server/mcp/, docs/decisions/060): every tool call goes through the one entry
    // of the execution pipeline, as one more transport.
    if (config.mcp.mutations === 'all') {
      logger.warn(
        'MCP_MUTATIONS is all: agents run creations and provisionings over MCP without anyone approving them; use approve unless every agent is trusted automation',
      );
    }
    const mcpPublicUrl = () => config.publicUrl ?? listenedUrl;
    // The requestState of an approval's elicitation travels through the client: sealed with a key every replica derives
    // from the gateway secret, so any replica verifies what another minted.
    const mcpCodec = createRequestStateCodec<{ planId: string; hash: string; owner: string }>({
      key: box.digest('mcp request state'),
      ttlSeconds: 600,
    });
    // An agent plan's exact upstream requests: the services' own code, nothing sent (src/agents/dry-run.ts).
    const agentDryRun = new AgentDryRun({ schema, lookup: cloudLookup, ...services });
    const mcpSurface = buildSurface({
      schema,
      pipeline,
      // The manifest's operations as read at start-up: a reload changes what runs, not the tools listed (decision 057).
      manifest: live.trusted?.documents(),
      builtIn: config.trustedDocuments.mode !== 'enforce',
      mcp: config.mcp,
      approvals:
        config.mcp.mutations === 'approve'
          ? new Approvals({
              pipeline,
              plans: services.agentPlans,
              codec: mcpCodec,
              approveUrl: (planId) => `${mcpPublicUrl()}/approvals?plan=${planId}`,
              dryRun: (...args) => agentDryRun.run(...args),
              // A plan is a write of the app's (stored, bounded): one creation point, before any work.
              charge: (caller) => services.rateLimits.take(caller, 'creations'),
              approval: config.mcp.approval,
              documentNow: (documentId) => {
                const now = live.trusted?.admit({ documentId });
                return now?.ok ? now.query : undefined;
              },
            })
          : null,
      // wait_for_events spends one point of the app's reads budget per call, before it reads or waits.
      events: {
        waitForEvents: async (caller, options) => {
          await services.rateLimits.take(caller, 'reads');
          return services.events.reader.waitForEvents(caller, options);
        },
        onResourceChanged: (caller, kind, key, listener) =>
          services.events.reader.onResourceChanged(caller, kind, key, listener),
      },
      // The schema as a resource only where introspection shows it to every app anyway.
      sdl: config.introspection ? printSchema(schema) : null,
    });
    if (mcpSurface.skipped.length > 0) {
      logger.warn(
        { tools: mcpSurface.skipped },
        'MCP leaves out the operations the GraphQL limits refuse: raise the limits named to offer them as tools',
      );
    }
    if (mcpSurface.unplanned.length > 0) {
      logger.warn(
        { tools: mcpSurface.unplanned },
        'MCP_MUTATIONS=approve does not offer the mutations that cannot be planned: an approval must show what is sent',
      );
    }
    const publicHost = config.publicUrl ? new URL(config.publicUrl).hostname : null;
    const mcp = mcpRoutes({
      surface: mcpSurface,
      authenticate,
      allowedHosts: [
        ...localhostAllowedHostnames(),
        ...(config.host !== '0.0.0.0' && config.host !== '::'
          ? [config.host.includes(':') ? `[${config.host}]` : config.host]
          : []),
        ...(options.host && options.host !== '0.0.0.0' ? [options.host] : []),
        ...(publicHost ? [publicHost] : []),
        ...config.mcp.allowedHosts,
      ],
      publicUrl: mcpPublicUrl,
      // With several providers (AUTH_ISSUERS) the scopes a 403 names carry the first provider's prefix.
      oauth: config.jwtAuth
        ? {
            issuers: config.jwtAuth.issuers.map((i) => i.issuer),
            scopePrefix: config.jwtAuth.issuers[0]!.scopePrefix,
            scopes: SCOPES,
          }
        : null,
      maxBodyBytes: config.graphqlLimits.maxBodyBytes,
      codec: mcpCodec as RequestStateCodec<unknown>,
      logger,
    });

    const routes: Route[] = [
      ...(graphiql
        ? [
            {
              method: 'ANY',
              path: new RegExp(`^${GRAPHIQL_ASSETS_PATH}[^/]+$`),
              name: 'graphiql-asset',
              handle: (req, res) => {
                if (!graphiql.serveAsset(req, res))
                  sendOAuthError(res, 404, WebhookErrorCode.NOT_FOUND, 'no such GraphiQL asset');
              },
            } satisfies Route,
          ]
        : []),
      graphqlRoute({
        ...(graphiql
          ? {
              graphiql: {
                wants: (req) => prefersHtml(req.headers.accept),
                serve: (req, res) => void graphiql.servePage(req, res),
              },
            }
          : {}),
        apollo,
        trusted,
        plans,
        maxBodyBytes: config.graphqlLimits.maxBodyBytes,
        checkSource: (source) => limits.checkTokens(source),
        context: async (req, ctx) => {
          const result = authenticate(req.headers.authorization);
          const auth = result instanceof Promise ? await result : result;
          if (!auth.ok) throw authFailureHttpError(auth);
          ctx.app = auth.caller.app;
          return createContext(services, auth.caller, ctx.requestId, () => ctx.logger);
        },
      }),
      ...healthRoutes({ store, metrics, notReady: () => replicated?.notReady() ?? null, circuits: upstreams.circuits }),
      reloadRoute({ authenticate, reload: () => reload('POST /admin/reload') }),
      ...approvalsRoutes(),
      verificationWebhookRoute({ identity: services.identity, metrics }),
      identificationWebhookRoute({ identity: services.identity, metrics }),
      mobileIdWebhookRoute({ mobileId: services.mobileId, metrics, pauseAt: pause }),
      sse,
      // Last: the routes are matched in order, and the hot paths above pay nothing for MCP's.
      ...mcp,
    ];
    // Spans for GraphQL over HTTP and every webhook intake (SSE operations get theirs from graphql-sse's execution).
    const traced = routes.map((r) =>
      r.name === 'graphql' || r.name.startsWith('POST /webhooks/') ? tracedRoute(r, tracing) : r,
    );
    if (starting) server.off('request', starting);
    server.on('request', createRequestHandler({ routes: traced, logger, metrics }));

    const ws = createWsServer({
      schema,
      logger,
      authenticate,
      expiry,
      pipeline,
      maxMessageBytes: config.graphqlLimits.maxBodyBytes,
      subscriberBufferBytes: config.subscriberBufferBytes,
      onClosed: (reason) => metrics.subscriptionsClosed.inc({ reason }),
      context: (caller, requestId) => createContext(services, caller, requestId, () => logger.child({ requestId })),
    });
    metrics.measureSubscriberLag(() => ws.lag());
    server.on('upgrade', (req, socket, head) => {
      const path = (req.url ?? '').split('?')[0];
      if (path !== '/graphql') {
        socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n');
        return;
      }
      ws.handleUpgrade(req, socket, head);
    });

    if (!starting) await listen();
    const url = listenedUrl;
    const publicUrl = config.publicUrl ?? url;

    // Shutdown order: stop accepting, close subscriptions, let in-flight requests finish, then the rest.
    cleanups.push(async () => {
      await ws.close();
      await sse.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Keep-alive connections go idle once their in-flight response is written: close them as they do,
        // and cut whatever is left after the drain limit.
        const sweep = setInterval(() => server.closeIdleConnections(), 50);
        const cut = setTimeout(() => server.closeAllConnections(), SHUTDOWN.drainMs);
        server.once('close', () => {
          clearInterval(sweep);
          clearTimeout(cut);
        });
        server.closeIdleConnections();
      });
    });

    let closing: Promise<void> | null = null;
    return {
      url,
      publicUrl,
      server,
      services,
      sandbox: upstreams.sandbox,
      circuits: upstreams.circuits,
      logger,
      httpPlans: plans,
      documents,
      limits,
      reload,
      close() {
        closing ??= closeAll();
        return closing;
      },
    };
  } catch (err) {
    await closeAll();
    throw err;
  }
}
