import { createCloudService, type CloudEndpoint, type CloudService } from '../cloud/index.js';
import type { Config, UpstreamTable } from '../config/index.js';
import type { Events } from '../events/index.js';
import { createIdentityService, type IdentityEndpoints, type IdentityService } from '../identity/index.js';
import type { Logger } from '../logger.js';
import type { Metrics } from '../metrics.js';
import { createMobileIdService, type MobileIdEndpoint, type MobileIdService } from '../mobile-id/index.js';
import type { PauseAt } from '../phases.js';
import { resolveCloudShape, type CloudResponseShape } from '../sandbox/cloud-shapes.js';
import {
  SANDBOX_IDENTIFICATION_TOKEN,
  SANDBOX_SERVICE_ACCOUNT_TOKEN,
  SANDBOX_VERIFICATION_TOKEN,
  startSandboxes,
  type Sandboxes,
} from '../sandbox/index.js';
import type { SecretBox } from '../secret.js';
import type { AppStorage } from '../store/app-storage.js';
import type { Store } from '../store/index.js';
import type { Ledger } from '../store/ledger.js';
import type { Tracing } from '../telemetry/tracing.js';
import { CircuitBreaker, type BreakerState } from '../upstream/breaker.js';
import { UpstreamHttp } from '../upstream/http.js';
import type { Idempotency } from '../upstream/idempotency.js';

/** The three upstream services, and the simulators that serve the sandboxed entries of the table. */
export interface Upstreams {
  readonly cloud: CloudService;
  readonly identity: IdentityService;
  readonly mobileId: MobileIdService;
  readonly sandbox: Sandboxes;
  /** Each upstream client's circuit breaker by name, `off` where UPSTREAM_CIRCUIT_BREAKER turns it off. */
  circuits(): Record<string, BreakerState | 'off'>;
}

/**
 * Part of the composition root, and the only code that knows the sandbox exists: starts a simulator for
 * each sandboxed entry of the table of upstreams (config.upstreams), turns every entry into an address
 * with credentials, and hands those to the three factories, one per upstream folder, all of one shape.
 * `onClose` registers what the gateway's shutdown must close.
 */
export async function startUpstreams(
  config: Config,
  deps: {
    logger: Logger;
    metrics: Metrics;
    store: Store;
    ledger: Ledger;
    idempotency: Idempotency;
    events: Events;
    tracing: Tracing;
    /** The address upstreams call back on (PUBLIC_URL, or where the gateway listens). */
    publicUrl: () => string;
    /** The gateway's own loopback address, known once it listens. */
    selfUrl: () => string;
    onClose: (close: () => Promise<void>) => void;
    /**
     * The gateway secret (TOKEN_ENCRYPTION_KEY, or its key file): it seals mobile-ID tokens and derives the
     * verification and identification callback tokens (docs/decisions/018) and the sandbox's notification token,
     * so replicas sharing DATABASE_URL must share it.
     */
    box: SecretBox;
    /** Per-app storage bounds (docs/decisions/051). */
    storage: AppStorage;
    /** Tests only (GATEWAY_TEST_PAUSE_AT, src/phases.ts). */
    pauseAt?: PauseAt;
    /**
     * Tests only (GatewayTesting.clock): the clock of mobile-ID expiries, pending notifications and JWKS retries, of
     * the circuit breakers' reset timeouts, of the per-minute bound of identification callback addresses and of the
     * leases an identification callback reads.
     */
    clock?: (() => number) | undefined;
  },
): Promise<Upstreams> {
  const box = deps.box;
  const table: UpstreamTable = config.upstreams;
  const sandbox = await startSandboxes({
    cloud: table.cloud.sandbox,
    ...(table.cloud.sandbox ? { cloudShape: cloudSandboxShape(config, deps.logger) } : {}),
    faultRate: config.sandbox.faultRate,
    latencyMs: config.sandbox.latencyMs,
    cloudCredentials: config.cloud.credentials,
    identification: table.identification.sandbox,
    verification: table.verification.sandbox || table.rfm.sandbox,
    callbackDelayMs: config.sandbox.callbackDelayMs,
    mobileId: table.mobileId.sandbox,
    // A secret of this data directory (or of TOKEN_ENCRYPTION_KEY), never a published constant: whoever holds it
    // posts results every app reads, so it is shown only where the operator looks (start-up line, GraphiQL).
    mobileIdNotificationToken: `sandbox-${box.digest('sandbox mobile-ID client_notification_token').slice(0, 32)}`,
  });
  deps.onClose(() => sandbox.close());

  const { metrics, logger } = deps;
  // Spec, Events 1: the verification interface POSTs its result to the callbackUrl the gateway hands it. Unset,
  // PUBLIC_URL is the address the gateway listens on, which an interface on another host cannot reach: each
  // registration would be accepted and its result never delivered. Said once, here, where the table is known.
  if (!table.verification.sandbox && config.publicUrl === undefined) {
    const host = new URL(table.verification.url).hostname;
    if (!isLoopbackHost(host))
      logger.warn(
        { upstream: 'verification', host },
        `PUBLIC_URL is unset: the verification interface at ${host} is handed the callbackUrl <listening address>/webhooks/verification/<token>, which another host cannot reach; set PUBLIC_URL to the address it reaches this gateway at`,
      );
  }
  const circuits = new Map<string, CircuitBreaker | null>();
  const circuitEvents = {
    transition(upstream: string, from: BreakerState, to: BreakerState) {
      metrics.upstreamCircuitState.set({ upstream }, to === 'closed' ? 0 : to === 'open' ? 1 : 2);
      metrics.upstreamCircuitTransitions.inc({ upstream, from, to });
      if (to === 'open')
        logger.warn(
          { upstream, from, to },
          `${upstream} circuit open: calls needing it are refused at once (UPSTREAM_UNAVAILABLE) until trial calls succeed`,
        );
      else logger.info({ upstream, from, to }, `${upstream} circuit ${to}`);
    },
    shortCircuit(upstream: string) {
      metrics.upstreamCircuitShortCircuits.inc({ upstream });
    },
  };
  // One breaker per upstream client; both identification environments use identification's settings.
  const breakerOf = (name: string): CircuitBreaker | undefined => {
    const settings =
      config.upstream.breakers[
        name === 'identification-prodlike' ? 'identification' : (name as keyof typeof config.upstream.breakers)
      ];
    const breaker = settings?.enabled ? new CircuitBreaker(name, settings, circuitEvents, deps.clock) : null;
    circuits.set(name, breaker);
    if (breaker) metrics.upstreamCircuitState.set({ upstream: name }, 0);
    return breaker ?? undefined;
  };
  const http = (name: string, baseUrl: string) => {
    const client = new UpstreamHttp({
      breaker: breakerOf(name),
      name,
      baseUrl,
      timeoutMs: config.upstream.timeoutMs,
      maxAnswerBytes: config.upstream.maxAnswerBytes,
      retryBudgetMs: config.upstream.retryBudgetMs,
      maxRetries: config.upstream.maxRetries,
      // The cloud API documents Idempotency-Key (and asking its token endpoint again changes nothing); the identity
      // endpoints do not, unless the operator says so (IDEMPOTENT_UPSTREAMS). Both identification environments share
      // the identification setting.
      retryUnknownOutcome:
        name === 'cloud' ||
        name === 'cloud-token' ||
        config.upstream.idempotent.includes(name.replace(/-prodlike$/, '')),
      metrics: deps.metrics,
      logger: deps.logger,
      tracing: deps.tracing,
    });
    deps.onClose(() => client.close());
    return client;
  };
  const started = <T>(s: T | null, what: string): T => {
    if (!s) throw new Error(`the ${what} simulator was not started`);
    return s;
  };

  // In sandbox mode the cloud token step still runs when CLOUD_API_CREDENTIALS is given (the simulator then
  // accepts exactly those), as it would against the real API.
  const cloud: CloudEndpoint = table.cloud.sandbox
    ? {
        url: started(sandbox.cloud, 'cloud').url,
        auth: config.cloud.token
          ? { token: config.cloud.token }
          : config.cloud.credentials
            ? { credentials: config.cloud.credentials }
            : { token: SANDBOX_SERVICE_ACCOUNT_TOKEN },
      }
    : { url: table.cloud.url, auth: table.cloud.auth };

  // A token configured beside a simulated interface is sent to the simulator, as it would be to the real
  // one (a test of a wrong token sees the 401); without one, the simulator's own token.
  const identificationToken = config.identification.token ?? SANDBOX_IDENTIFICATION_TOKEN;
  const simulatedVerification = (token: string) => ({ url: started(sandbox.verification, 'verification').url, token });
  const identity: IdentityEndpoints = {
    identification: table.identification.sandbox
      ? {
          url: started(sandbox.identification, 'identification').url,
          token: identificationToken,
          prodlike: {
            url: started(sandbox.identificationProdlike, 'identification PRODLIKE').url,
            token: config.identification.prodlikeToken ?? identificationToken,
          },
        }
      : table.identification,
    verification: table.verification.sandbox
      ? simulatedVerification(config.verification.token ?? SANDBOX_VERIFICATION_TOKEN)
      : table.verification,
    // A simulated rfm check beside a real verification interface gets the simulator's token, not the real JWT.
    rfm: table.rfm.sandbox
      ? simulatedVerification(
          table.verification.sandbox
            ? (config.verification.token ?? SANDBOX_VERIFICATION_TOKEN)
            : SANDBOX_VERIFICATION_TOKEN,
        )
      : table.rfm,
  };

  const mobileId: MobileIdEndpoint = table.mobileId.sandbox
    ? (() => {
        const sim = started(sandbox.mobileId, 'mobile-ID');
        return {
          notificationTokens: [{ token: sim.notificationToken, scope: null }],
          jwks: { jwksUrl: sim.jwksUrl },
          issuer: sim.issuer,
          clientId: sim.clientId,
          notifier: sim,
        };
      })()
    : {
        notificationTokens: table.mobileId.notificationTokens,
        jwks: { jwksUrl: table.mobileId.jwksUrl, jwksFile: table.mobileId.jwksFile },
        issuer: table.mobileId.issuer,
        clientId: table.mobileId.clientId,
        notifier: null,
      };

  const simulatedIdentification = table.identification.sandbox
    ? [sandbox.identification, sandbox.identificationProdlike]
    : [];

  return {
    cloud: createCloudService(cloud, {
      http,
      ledger: deps.ledger,
      idempotency: deps.idempotency,
      logger: deps.logger,
      shapePaths: config.shapePaths,
      ...(deps.pauseAt ? { pauseAt: deps.pauseAt } : {}),
    }),
    identity: createIdentityService(identity, {
      http,
      store: deps.store,
      ledger: deps.ledger,
      idempotency: deps.idempotency,
      events: deps.events,
      publicUrl: deps.publicUrl,
      shapePaths: config.shapePaths,
      secret: box,
      storage: deps.storage,
      callbackBodyKeptBytes: config.callbackBodyKeptBytes,
      onTruncated: (kind: string) => deps.metrics.webhookFieldsDropped.inc({ endpoint: kind }),
      now: deps.clock,
      // The simulated platform gets each workflow's callback address as an operator would configure the real one.
      ...(simulatedIdentification.length
        ? {
            onCallbackAddress: (workflowId: string, url: string) =>
              simulatedIdentification.forEach((s) => s?.configureCallback(workflowId, url)),
          }
        : {}),
    }),
    mobileId: createMobileIdService(mobileId, {
      config,
      store: deps.store,
      events: deps.events,
      logger: deps.logger,
      selfUrl: deps.selfUrl,
      box,
      storage: deps.storage,
      metrics: deps.metrics,
      now: deps.clock,
    }),
    sandbox,
    circuits: () => Object.fromEntries([...circuits].map(([name, b]) => [name, b ? b.state : 'off'])),
  };
}

/** SANDBOX_CLOUD_SHAPE, printed at start-up (with the seed of a random one, so that a run can be repeated). */
function cloudSandboxShape(config: Config, logger: Logger): CloudResponseShape {
  const { mode, seed } = resolveCloudShape(config.sandbox.cloudShape, config.sandbox.cloudShapeSeed);
  if (seed === null) logger.info({ shape: mode.name }, `cloud sandbox answers in shape ${mode.name}`);
  else
    logger.info(
      { shape: mode.name, seed },
      `cloud sandbox answers in random shape ${mode.name} (SANDBOX_CLOUD_SHAPE_SEED=${seed} repeats it)`,
    );
  return mode.shape;
}

/** Whether a URL's hostname names this host: localhost, 127.0.0.0/8 or ::1, as URL writes them. */
function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase();
  return h === 'localhost' || h.endsWith('.localhost') || /^127\.\d+\.\d+\.\d+$/.test(h) || h === '[::1]';
}
