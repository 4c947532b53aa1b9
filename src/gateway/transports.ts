// The transports over the one pipeline: POST/GET /graphql (with GraphiQL), graphql-ws, graphql-sse, MCP, the
// webhooks, health and the reload route. Each builds its GraphQL context with the one `contextFor`.
import type http from 'node:http';
import type { RequestStateCodec } from '@modelcontextprotocol/server';
import { printSchema, type GraphQLSchema } from 'graphql';

import { AgentDryRun } from '../agents/dry-run.js';
import { AgentWorkflow } from '../agents/workflow.js';
import { SCOPES, type Caller } from '../auth/caller.js';
import { scheduleAfter, type AuthExpiry } from '../auth/jwt.js';
import { authorizationOf, type AuthResult } from '../auth/keys.js';
import { everyUpstreamSandboxed, type Config } from '../config/index.js';
import { WebhookErrorCode } from '../errors.js';
import type { PostgresBus } from '../events/postgres-bus.js';
import type { GraphQLContext } from '../graphql/context.js';
import { logUnexpected, type Logger } from '../logger.js';
import type { PauseAt } from '../phases.js';
import { approvalsRoutes } from '../server/approvals.js';
import { DEFAULT_QUERY, graphiqlExamples } from '../server/graphiql-examples.js';
import {
  createGraphiqlHandler,
  defaultGraphiqlAssetsDir,
  GRAPHIQL_ASSETS_PATH,
  prefersHtml,
} from '../server/graphiql.js';
import { authFailureHttpError, graphqlRoute } from '../server/graphql.js';
import { healthRoutes } from '../server/health.js';
import { HeldCredentials } from '../server/held-credentials.js';
import { requestIdOf, requestTarget, shownPath, type Route, type RouteContext } from '../server/http.js';
import { Approvals } from '../server/mcp/approval.js';
import { mcpRoutes } from '../server/mcp/http.js';
import { requestStateCodec } from '../server/mcp/sdk.js';
import { buildSurface } from '../server/mcp/surface.js';
import { reloadRoute } from '../server/reload.js';
import { refuseOnSocket, sendOAuthError } from '../server/respond.js';
import { createSseRoute } from '../server/sse.js';
import { tracedRoute } from '../server/tracing.js';
import { identificationWebhookRoute } from '../server/webhooks/identification.js';
import { mobileIdWebhookRoute } from '../server/webhooks/mobile-id.js';
import { verificationWebhookRoute } from '../server/webhooks/verification.js';
import { createWsServer } from '../server/ws.js';
import type { Services } from '../services.js';
import type { Tracing } from '../telemetry/tracing.js';
import type { LiveConfiguration } from './live.js';
import type { GatewayOptions } from './options.js';
import type { BuiltPipeline, ContextFor } from './pipeline.js';
import type { BuiltServices } from './services.js';
import type { Upstreams } from './upstreams.js';

export interface Transports {
  /** The HTTP routes, in the order they are matched (spans on GraphQL and the webhooks). */
  readonly routes: Route[];
  /** Upgrades GET /graphql to graphql-ws. */
  upgrade(req: http.IncomingMessage, socket: import('node:stream').Duplex, head: Buffer): void;
  /** Ends every WebSocket and SSE stream (shutdown). */
  close(): Promise<void>;
}

export function buildTransports(
  config: Config,
  parts: {
    schema: GraphQLSchema;
    built: BuiltPipeline;
    services: Services;
    live: LiveConfiguration;
    upstreams: Upstreams;
    replicated: PostgresBus | null;
    cloudLookup: BuiltServices['cloudLookup'];
    contextFor: ContextFor;
    logger: Logger;
    tracing: Tracing;
    now: () => number;
    pause: PauseAt | undefined;
    options: GatewayOptions;
    /** The public address as shown (PUBLIC_URL without its user info, or where the gateway listens), once it listens. */
    publicUrl: () => string;
    digest: (text: string) => string;
    reload: () => ReturnType<LiveConfiguration['reload']>;
    /** True once the shutdown has begun (/readyz answers 503 from then on). */
    stopping: () => boolean;
  },
): Transports {
  const { schema, built, services, live, contextFor, logger, tracing } = parts;
  const { pipeline, limits } = built;
  const testing = parts.options.testing ?? {};
  const { metrics } = services;
  const authenticate = live.authenticate;
  /** POST /graphql's context for what `authenticate` answered: the caller's, or its refusal thrown. */
  const httpContext = (auth: AuthResult, ctx: RouteContext): GraphQLContext => {
    if (!auth.ok) throw authFailureHttpError(auth);
    ctx.app = auth.caller.app;
    return contextFor(auth.caller, ctx.requestId, () => ctx.logger);
  };
  const trusted = built.trusted;
  const expiry = authExpiry(parts);
  // A reload authenticates again what credentials hold open, on every transport (decision 057).
  const held = new HeldCredentials({ authenticate, generation: () => live.generation, logger });
  live.onReloaded(() => held.recheckAll());

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
            notificationToken: config.open ? (parts.upstreams.sandbox.mobileId?.notificationToken ?? null) : null,
            url: config.publicUrl ? parts.publicUrl() : `http://localhost:${config.port}`,
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
    ...(testing.sseConnectionAccepted ? { connectionAccepted: testing.sseConnectionAccepted } : {}),
    subscriberBufferBytes: config.subscriberBufferBytes,
    onClosed: (reason) => metrics.subscriptionsClosed.inc({ reason }),
    context: (caller, requestId) => contextFor(caller, requestId),
    held,
  });

  const ws = createWsServer({
    schema,
    logger,
    authenticate,
    expiry,
    pipeline,
    maxMessageBytes: config.graphqlLimits.maxBodyBytes,
    subscriberBufferBytes: config.subscriberBufferBytes,
    completeWithLast: config.delivery.completeWithLast,
    oneWrite: config.delivery.oneWrite,
    directWrite: config.delivery.directWrite,
    keepAliveSweep: config.wsKeepAliveSweep,
    onClosed: (reason) => metrics.subscriptionsClosed.inc({ reason }),
    context: (caller, requestId, connection) => contextFor(caller, requestId, undefined, connection),
    held,
  });
  metrics.measureSubscriberLag(() => ws.lag());

  const mcp = mcpTransport(config, parts, held);
  const routes: Route[] = [
    ...(graphiql
      ? [
          {
            method: 'ANY',
            path: new RegExp(`^${GRAPHIQL_ASSETS_PATH}[^/]+$`),
            name: 'graphiql-asset',
            // What fails unexpectedly is the router's to log with the request id and answer (server_error).
            handle: (req, res, ctx) => {
              const served = graphiql.serveAsset(req, res, ctx);
              if (served) return served;
              sendOAuthError(res, 404, WebhookErrorCode.NOT_FOUND, 'no such asset');
            },
          } satisfies Route,
        ]
      : []),
    graphqlRoute({
      ...(graphiql
        ? {
            graphiql: {
              wants: (req) => prefersHtml(req.headers.accept),
              serve: (req, res) => graphiql.servePage(req, res),
            },
          }
        : {}),
      apollo: built.apollo,
      contextFailed: built.contextFailed,
      trusted,
      direct: built.direct,
      maxBodyBytes: config.graphqlLimits.maxBodyBytes,
      checkSource: (source) => limits.checkTokens(source),
      context: (req, ctx) => {
        const result = live.authenticateRequest(authorizationOf(req), ctx);
        return result instanceof Promise ? result.then((auth) => httpContext(auth, ctx)) : httpContext(result, ctx);
      },
    }),
    ...healthRoutes({
      store: services.store,
      metrics,
      notReady: () => parts.replicated?.notReady() ?? null,
      stopping: parts.stopping,
      circuits: parts.upstreams.circuits,
    }),
    reloadRoute({ authenticate, reload: parts.reload }),
    ...approvalsRoutes(),
    verificationWebhookRoute({ identity: services.identity, metrics }),
    identificationWebhookRoute({ identity: services.identity, metrics }),
    mobileIdWebhookRoute({ mobileId: services.mobileId, metrics, pauseAt: parts.pause }),
    sse,
    // Last: the routes are matched in order, and the hot paths above pay nothing for MCP's.
    ...mcp.routes,
  ];
  return {
    // Spans for GraphQL over HTTP and every webhook intake (SSE operations get theirs from graphql-sse's execution).
    routes: routes.map((r) =>
      r.name === 'graphql' || r.name.startsWith('POST /webhooks/') ? tracedRoute(r, tracing) : r,
    ),
    upgrade(req, socket, head) {
      // Node takes its own 'error' listener off a socket it hands to 'upgrade': without one, a client's reset after
      // the answer (ECONNRESET) is an uncaught exception, which ends the process. ws adds its own on what it takes.
      socket.on('error', destroySocket);
      const { path } = requestTarget(req.url);
      if (path !== '/graphql') {
        // In the words of a request to a path no route serves (src/server/http.ts).
        const description = `no route for ${shownPath(path)}`;
        refuseOnSocket(socket, '404 Not Found', WebhookErrorCode.NOT_FOUND, description, requestIdOf(req));
        return;
      }
      ws.handleUpgrade(req, socket, head);
    },
    async close() {
      await ws.close();
      await sse.close();
      mcp.close();
    },
  };
}

/** A socket's failure (its peer reset it) as Node's HTTP server takes one: the socket is destroyed, nothing thrown. */
function destroySocket(this: import('node:stream').Duplex): void {
  this.destroy();
}

/**
 * The Model Context Protocol endpoint (src/server/mcp/, docs/decisions/060): every tool call goes through the one
 * entry of the execution pipeline, as one more transport.
 */
/** The one expiry rule of every streaming transport (graphql-ws, SSE, MCP): the gateway's clock and scheduler. */
function authExpiry(parts: Parameters<typeof buildTransports>[1]): AuthExpiry {
  return { now: parts.now, schedule: parts.options.testing?.scheduleAuthExpiry ?? scheduleAfter };
}

function mcpTransport(
  config: Config,
  parts: Parameters<typeof buildTransports>[1],
  held: HeldCredentials,
): ReturnType<typeof mcpRoutes> {
  const { schema, services, logger, live } = parts;
  const { pipeline } = parts.built;
  const expiry = authExpiry(parts);
  if (config.mcp.mutations === 'all') {
    logger.warn(
      'MCP_MUTATIONS is all: agents run creations and provisionings over MCP without anyone approving them; use approve unless every agent is trusted automation',
    );
  }
  // The requestState of an approval's elicitation travels through the client: sealed with a key every replica derives
  // from the gateway secret, so any replica verifies what another minted.
  const codec = requestStateCodec<{ planId: string; hash: string; owner: string; status: string; changedAt: number }>({
    key: parts.digest('mcp request state'),
    ttlSeconds: 600,
  });
  // An agent plan's exact upstream requests: the services' own code, nothing sent (src/agents/dry-run.ts).
  const readEvents = (caller: Caller) => services.rateLimits.take(caller, 'reads');
  const agentDryRun = new AgentDryRun({ schema, lookup: parts.cloudLookup, ...services });
  const surface = buildSurface({
    schema,
    pipeline,
    // The manifest in force: the tools are made again after each reload (below), so that they list, and plan, the
    // documents that run.
    manifest: () => live.trustedDocuments()?.documents(),
    builtIn: config.trustedDocuments.mode !== 'enforce',
    mcp: config.mcp,
    approvals:
      config.mcp.mutations === 'approve'
        ? new Approvals(
            new AgentWorkflow({
              estimate: (params) => pipeline.estimate(params, { trustedResolved: true }),
              plans: services.agentPlans,
              approveUrl: (planId) => `${parts.publicUrl()}/approvals?plan=${planId}`,
              dryRun: (...args) => agentDryRun.run(...args),
              // A plan is a write of the app's (stored, bounded): one creation point, before any work, given back
              // when the plan is refused.
              charge: (caller) => services.rateLimits.charge(caller, 'creations'),
              digest: parts.digest,
              approval: config.mcp.approval,
              // The text a trusted document has now: an approved plan whose document a reload changed is refused.
              documentNow: (documentId) => {
                const now = live.trustedAdmission()?.admit({ documentId }, null);
                return now?.ok ? now.query : undefined;
              },
            }),
            pipeline,
            codec,
            logger,
          )
        : null,
    // wait_for_events and subscriptions/listen spend one point of the app's reads budget each, as a subscription over
    // graphql-ws or SSE does, before they read, wait or watch (once their input is taken: bad input spends nothing; a
    // cursor refused by the first read, before purged events, gets its point back).
    events: {
      admit: readEvents,
      waitForEvents: (caller, options) =>
        services.events.reader.waitForEvents(caller, {
          ...options,
          admit: () => services.rateLimits.charge(caller, 'reads'),
        }),
      onResourceChanged: (caller, kind, key, listener) =>
        services.events.reader.onResourceChanged(caller, kind, key, listener),
    },
    // The schema as a resource only where introspection shows it to every app anyway.
    sdl: config.introspection ? printSchema(schema) : null,
    expiry,
    // A waiting wait_for_events is one of its app's live subscriptions (APP_LIVE_SUBSCRIPTIONS), as a listen is.
    live: services.liveSubscriptions,
  });
  const warnLeftOut = () => {
    if (surface.skipped.length > 0) {
      logger.warn(
        { tools: surface.skipped },
        "MCP leaves out the operations the GraphQL limits refuse, and those named as one of the gateway's own tools, " +
          'as an operation of an earlier trusted document or with a name longer than an MCP tool may have: ' +
          'raise the limits named, or rename the operation, to offer them as tools',
      );
    }
    if (surface.unplanned.length > 0) {
      logger.warn(
        { tools: surface.unplanned },
        'MCP_MUTATIONS=approve does not offer the mutations that cannot be planned: an approval must show what is sent',
      );
    }
  };
  warnLeftOut();
  // A reload may have changed the manifest: the tools follow it, and what they leave out is logged again. Should
  // making them fail, the tools made before are kept: a plan of a changed document is then refused as changed.
  live.onReloaded(() => {
    try {
      const { missing } = surface.reload();
      warnLeftOut();
      if (missing.length > 0) {
        logger.warn(
          { toolsets: missing },
          'MCP_TOOLSETS names tools the reloaded trusted documents no longer make: those toolsets offer the rest',
        );
      }
    } catch (err) {
      logUnexpected(logger, err, {}, 'unexpected error making the MCP tools of the reloaded trusted documents');
    }
  });
  const publicHost = config.publicUrl ? new URL(config.publicUrl).hostname : null;
  const host = parts.options.host;
  return mcpRoutes({
    surface,
    authenticate: live.authenticate,
    allowedHosts: [
      ...(config.host !== '0.0.0.0' && config.host !== '::'
        ? [config.host.includes(':') ? `[${config.host}]` : config.host]
        : []),
      ...(host && host !== '0.0.0.0' ? [host] : []),
      ...(publicHost ? [publicHost] : []),
      ...config.mcp.allowedHosts,
    ],
    publicUrl: parts.publicUrl,
    // With several providers (AUTH_ISSUERS) the scopes a 403 names carry the first provider's prefix.
    oauth: config.jwtAuth
      ? {
          issuers: config.jwtAuth.issuers.map((i) => i.issuer),
          scopePrefix: config.jwtAuth.issuers[0]!.scopePrefix,
          scopes: SCOPES,
        }
      : null,
    maxBodyBytes: config.graphqlLimits.maxBodyBytes,
    codec: codec as RequestStateCodec<unknown>,
    logger,
    expiry,
    held,
    live: services.liveSubscriptions,
  });
}
