/**
 * The architecture check (run by test/architecture.test.ts inside `npm test`): every import runs down.
 *
 *   main.ts, gateway/                  composition root: gateway/upstreams.ts is the only code that knows the sandbox exists
 *   server/                            transports: HTTP routes, WebSocket, SSE, webhooks, GraphiQL, MCP (server/mcp/)
 *   agents/                            the agent-plan workflow (MCP, approvePlan, the approvals page): what needs an
 *                                      approval, dry runs, make, approve, execute, audit; its SQL is store/agent-plans.ts
 *   execution/                         the execution pipeline every transport runs: prepare, admit, run, present
 *   graphql/, services.ts              resolvers and the bundle of services they call
 *   provisioning/                      composite creations (plans, runs) built on the cloud domain
 *   cloud/ identity/ mobile-id/        domains, one per upstream
 *   upstream/ events/ ratelimit/ telemetry/   what every upstream call shares; the event log and bus; budgets; tracing
 *   secret.ts                          the gateway's secret (sealing what is stored)
 *   config/                            the variables, the upstream table, paths: read once, handed down
 *   auth/                              callers, tenancy, API keys, JWTs, JWKS, the apps and issuers files
 *   store/                             SQL (and the modules that own a table: events/log.ts, events/postgres-bus.ts, identity/
 *                                      callbacks, mobile-id/ pending, tokens, quarantine; docs/architecture.md)
 *   catalog/ generated/ errors fingerprint logger metrics phases   the bottom
 *
 *   sandbox/ stands apart: it simulates the upstreams from the spec and shares no code with the gateway.
 */
const DOMAIN = '^src/(cloud|identity|mobile-id|provisioning)/';
const ROOT = '^src/(main[.]ts$|gateway/)';
/** Sandbox modules the config may read to validate SANDBOX_* values: plain data, importing nothing. */
const SANDBOX_VOCABULARY = '^src/sandbox/cloud-shapes[.]ts$';
const BOTTOM = '^src/((errors|fingerprint|logger|metrics|phases)[.]ts$|catalog/|generated/)';
/** Everything above the shared layers: what auth/, config/ and store/ never import. */
const ABOVE_SHARED = [
  '^src/(cloud|identity|mobile-id|provisioning|agents|upstream|events|ratelimit|telemetry|graphql|execution|server)/',
  '^src/(services|secret)[.]ts$',
  ROOT,
];

module.exports = {
  forbidden: [
    {
      name: 'domain-not-to-transport',
      comment:
        'A domain (cloud, identity, mobile-id) never imports server/ or graphql/: transport and GraphQL call the domain, ' +
        'never the other way round, so a mutation reads straight down. Move what both need (e.g. the Caller) to a leaf module.',
      severity: 'error',
      from: { path: DOMAIN },
      to: { path: ['^src/(server|graphql)/', '^src/services[.]ts$', ROOT] },
    },
    {
      name: 'domains-independent',
      comment:
        'Each upstream folder stands alone; what two domains share belongs lower down (upstream/, events/, store/).',
      severity: 'error',
      from: { path: '^src/(cloud|identity|mobile-id)/' },
      to: { path: DOMAIN, pathNot: '^src/$1/' },
    },
    {
      name: 'provisioning-builds-on-cloud-only',
      comment:
        'Provisioning composes cloud creations (a Kafka cluster is a network, a subnet, an address and a cluster): it may use cloud/, and no other domain.',
      severity: 'error',
      from: { path: '^src/provisioning/' },
      to: { path: '^src/(identity|mobile-id)/' },
    },
    {
      name: 'sandbox-imports-nothing-of-the-gateway',
      comment:
        'The sandbox is written from the spec on its own (DESIGN.md "Sandbox"): if it imported the gateway\'s wire mappers or ' +
        'clients, a wrong field name would be mirrored instead of failing a test.',
      severity: 'error',
      from: { path: '^src/sandbox/' },
      to: { path: '^src/', pathNot: '^src/sandbox/' },
    },
    {
      name: 'only-the-composition-root-knows-the-sandbox',
      comment:
        'Whether an upstream is simulated is decided once, in the table of upstreams the composition root builds; ' +
        'no domain, resolver or route may reach for the simulator (a real deployment never gets a simulated answer by omission).',
      severity: 'error',
      from: { path: '^src/', pathNot: ['^src/sandbox/', ROOT, '^src/config/index[.]ts$'] },
      to: { path: '^src/sandbox/', pathNot: SANDBOX_VOCABULARY },
    },
    {
      name: 'store-imports-no-domain',
      comment:
        'store/ is SQL over plain rows: it knows no domain, upstream, event, resolver or route (they all sit above it).',
      severity: 'error',
      from: { path: '^src/store/' },
      to: { path: [...ABOVE_SHARED, '^src/(auth|config|sandbox)/'] },
    },
    {
      name: 'auth-below-config',
      comment:
        'auth/ knows who calls (keys, JWTs, the apps and issuers files) over plain rows of the store; the configuration ' +
        'reads its files through it, so auth never imports config/ (what it needs is handed to it) nor anything above.',
      severity: 'error',
      from: { path: '^src/auth/' },
      to: { path: [...ABOVE_SHARED, '^src/config/', '^src/sandbox/'] },
    },
    {
      name: 'config-below-the-shared-layers',
      comment:
        'config/ reads the environment once and is handed down: it imports only auth/ (to parse the apps and issuers ' +
        'files), the bottom, and the sandbox vocabulary it validates SANDBOX_CLOUD_SHAPE against.',
      severity: 'error',
      from: { path: '^src/config/' },
      to: { path: '^src/', pathNot: [BOTTOM, '^src/(auth|config)/', SANDBOX_VOCABULARY] },
    },
    {
      name: 'shared-layers-import-no-domain',
      comment: 'upstream/ and events/ serve every domain, so they import none of them, nor anything above.',
      severity: 'error',
      from: { path: '^src/(upstream|events)/' },
      to: {
        path: ['^src/(cloud|identity|mobile-id|provisioning|graphql|execution|server)/', '^src/services[.]ts$', ROOT],
      },
    },
    {
      name: 'upstream-and-events-apart',
      comment:
        'The upstream call machinery and the event log are siblings; what both need (the fingerprint) is a leaf module.',
      severity: 'error',
      from: { path: '^src/(upstream|events)/' },
      to: { path: '^src/(upstream|events)/', pathNot: '^src/$1/' },
    },
    {
      name: 'graphql-not-to-transport',
      comment:
        'Resolvers are transport-neutral: HTTP, WebSocket and SSE all run the same schema, so graphql/ never imports server/.',
      severity: 'error',
      from: { path: '^src/graphql/' },
      to: { path: ['^src/server/', ROOT] },
    },
    {
      name: 'graphql-not-to-wire',
      comment:
        'Wire shapes (snake_case, dotted spec keys) exist only in <upstream>/wire.ts and are read by their own domain; resolvers see typed views.',
      severity: 'error',
      from: { path: '^src/graphql/' },
      to: { path: '^src/(cloud|identity|mobile-id)/wire[.]ts$' },
    },
    {
      name: 'server-not-to-root',
      comment: 'Routes are handed what they need by the composition root; they never import it.',
      severity: 'error',
      from: { path: '^src/server/' },
      to: { path: ROOT },
    },
    {
      name: 'bottom-imports-only-bottom',
      comment:
        'The catalog, errors and the other leaves sit at the bottom: everything may use them, so they use nothing above.',
      severity: 'error',
      from: { path: BOTTOM },
      to: { path: '^src/', pathNot: BOTTOM },
    },
    {
      name: 'execution-not-to-transport',
      comment:
        'The execution pipeline (src/execution/) is what every transport runs: it never imports a transport, so a rule ' +
        'written there holds on HTTP, WebSocket and SSE alike (docs/decisions/044); nor does it call back up into one ' +
        '(what a transport needs of a stage is an argument of runOperation: the presenter, the result sink; 065).',
      severity: 'error',
      from: { path: '^src/execution/' },
      to: { path: ['^src/server/', ROOT] },
    },
    {
      name: 'transports-through-the-pipeline',
      comment:
        'HTTP, graphql-ws and graphql-sse only translate their wire: every operation goes through the one entry of the ' +
        'execution pipeline (src/execution/pipeline.ts runOperation, docs/decisions/065), and its answer is made by ' +
        'src/execution/present.ts. A route never calls a stage (prepare, admit, run, the shared execution) itself, so ' +
        "nothing reaches a stage beside the pipeline: no symbol on graphql-js's ExecutionArgs, no module state " +
        "read by both (a subscription's sink is an argument of runOperation).",
      severity: 'error',
      from: { path: '^src/server/' },
      to: {
        path: '^src/execution/',
        pathNot: [
          '^src/execution/(pipeline|present)[.]ts$',
          '^src/execution/apollo[.]ts$',
          '^src/execution/limits[.]ts$',
        ],
      },
    },
    {
      name: 'streaming-transports-independent',
      comment:
        'graphql-ws, graphql-sse and the webhooks do not import each other or the HTTP GraphQL route: what they share is ' +
        'the execution pipeline (src/execution/) or a shared server module (auth, respond, streaming options).',
      severity: 'error',
      from: { path: '^src/server/(ws|sse|webhooks)\\b' },
      to: { path: '^src/server/(ws|sse|graphql|direct-path|webhooks)\\b', pathNot: '^src/server/$1\\b' },
    },
    {
      name: 'http-transport-independent',
      comment: 'POST /graphql (the route and its direct path) imports no other transport.',
      severity: 'error',
      from: { path: '^src/server/(graphql|direct-path)[.]ts$' },
      to: { path: '^src/server/(ws|sse|webhooks)\\b' },
    },
    {
      name: 'mcp-through-the-pipeline',
      comment:
        'MCP is a transport: every tool call goes through the one entry of the execution pipeline (src/execution/pipeline.ts, ' +
        'docs/decisions/060), never through its stages one by one, nor a resolver, a domain or an upstream client: ' +
        'authentication, scopes, cost, rate limit, trusted documents and masking then hold for agents as for every app. ' +
        'Of the server it uses what every route shares: the Route of src/server/http.ts, the body reading of src/server/respond.ts ' +
        'and, with graphql-ws and SSE, what a credential holds open, authenticated again after a reload (src/server/held-credentials.ts).',
      severity: 'error',
      from: { path: '^src/server/mcp/' },
      to: {
        path: [
          '^src/execution/',
          '^src/(graphql|cloud|identity|mobile-id|provisioning|upstream|events)/',
          '^src/server/(?!mcp/|http[.]ts$|respond[.]ts$|held-credentials[.]ts$)',
          '^src/services[.]ts$',
          ROOT,
        ],
        pathNot: ['^src/execution/pipeline[.]ts$', '^src/graphql/schema[.]ts$', '^src/events/kinds[.]ts$'],
      },
    },
    {
      name: 'agents-below-the-transports',
      comment:
        'src/agents/ is the agent-plan workflow (what needs an approval, the dry run, approve, claim, finish, audit, replay) ' +
        'that MCP, approvePlan and the approvals page share: it sits below server/, graphql/ (whose approvePlan reads it) ' +
        'and the composition root, and imports no execution/ (which runs graphql/): what it needs of the pipeline, an ' +
        'estimate, is handed to it, and MCP runs a plan through the pipeline itself (docs/decisions/060).',
      severity: 'error',
      from: { path: '^src/agents/' },
      to: { path: ['^src/server/', '^src/graphql/', '^src/execution/', '^src/services[.]ts$', ROOT] },
    },
    {
      name: 'nothing-imports-mcp',
      comment: 'Only the composition root wires the MCP transport; no other layer reaches for it.',
      severity: 'error',
      from: { path: '^src/', pathNot: ['^src/server/mcp/', ROOT] },
      to: { path: '^src/server/mcp/' },
    },
    {
      name: 'nothing-imports-the-browser-app',
      comment: 'src/graphiql-app is the GraphiQL page bundled for the browser; the server only serves its built files.',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/graphiql-app/' },
      to: { path: '^src/graphiql-app/' },
    },
    {
      name: 'the-otel-sdk-on-demand',
      comment:
        'The OpenTelemetry SDK is loaded only when tracing is on (docs/decisions/123): telemetry/tracing-sdk.ts alone imports it (types aside).',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/telemetry/tracing-sdk[.]ts$' },
      to: {
        path: '@opentelemetry/(sdk-|exporter-|resources|core|context-async-hooks)',
        dependencyTypesNot: ['type-only'],
      },
    },
    {
      name: 'tracing-sdk-by-dynamic-import',
      comment: 'telemetry/tracing-sdk.ts is loaded by createTracing when tracing is on, never by a static import.',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^src/telemetry/tracing-sdk[.]ts$', dynamic: false },
    },
    {
      name: 'libraries-on-demand',
      comment:
        "Loaded where they are used, never up front (docs/decisions/124): the MCP server SDK by the endpoint's first request (server/mcp/sdk.ts imports it with import(), the rest reads it through mcpSdk()), and undici's index (its whole API) where a JWKS is fetched or the sandbox calls back, the upstreams importing only Pool and the header parser. Type imports aside.",
      severity: 'error',
      from: { path: '^src/' },
      to: {
        // undici resolved to its index, or unresolved (a bare specifier) where no node_modules is at hand.
        path: '@modelcontextprotocol/server|(^|node_modules/)undici(/index[.]js)?$',
        dynamic: false,
        dependencyTypesNot: ['type-only'],
      },
    },
    {
      name: 'no-folder-cycles',
      comment:
        'Two folders that import each other are one tangled unit: every import runs down, so no folder reaches back up.',
      severity: 'error',
      scope: 'folder',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'no-module-cycles',
      comment: 'A module cycle makes load order matter and hides an upward import.',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^src/generated/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.tsx', '.js', '.mjs', '.cjs', '.json'] },
  },
};
