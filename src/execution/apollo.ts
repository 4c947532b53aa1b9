// Apollo Server as the HTTP framework of the execution pipeline (docs/decisions/044, 065): its request handling,
// content negotiation, CSRF prevention, parse and validation (with the prepare stage's rules), then, once it has
// picked the operation, the pipeline's one entry (src/execution/pipeline.ts runOperation) answers for it: admit, run
// and present run there, as on every transport. The options object built here is the one given to `new ApolloServer`;
// the direct path of POST /graphql (src/server/direct-path.ts) reads what it reproduces from this same object, never
// from Apollo's private state.
import { HeaderMap, type ApolloServerOptions, type ApolloServerPlugin } from '@apollo/server';
import {
  ApolloServerPluginCacheControlDisabled,
  ApolloServerPluginInlineTraceDisabled,
  ApolloServerPluginLandingPageDisabled,
} from '@apollo/server/plugin/disabled';
import {
  GraphQLError,
  type FormattedExecutionResult,
  type GraphQLFormattedError,
  type GraphQLSchema,
  type OperationTypeNode,
} from 'graphql';

import type { GraphQLContext } from '../graphql/context.js';
import type { Logger } from '../logger.js';
import { nameOperationSpan, recordOperationErrors } from '../telemetry/operations.js';
import { namingValidationStop, type OperationLimits } from './limits.js';
import type { Pipeline } from './pipeline.js';
import {
  ensureGraphQLError,
  formatError,
  HttpPresenter,
  noStoreValue,
  SingleResultTypes,
  thrown,
  type ApolloErrorOptions,
  type HttpAnswer,
} from './present.js';

/** The Apollo options the gateway runs with, and the plugins among them whose effects the direct path reproduces. */
export interface ApolloSetup {
  readonly options: ApolloServerOptions<GraphQLContext> & {
    readonly validationRules: NonNullable<ApolloServerOptions<GraphQLContext>['validationRules']>;
    readonly formatError: ApolloErrorOptions['formatError'];
    readonly includeStacktraceInErrorResponses: false;
  };
  readonly gatewayPlugins: readonly ApolloServerPlugin<GraphQLContext>[];
  /** The content type a single result is answered with, per Accept header (the plugin's and the direct path's). */
  readonly contentTypes: SingleResultTypes;
  /**
   * What the context of a request Apollo answers rejects with when making it threw `failure`: the error Apollo makes
   * of it (ensureGraphQLError with its prefix), which its error response then logs with `requestId`.
   */
  contextFailed(failure: unknown, requestId: string): GraphQLError;
}

export function apolloSetup(o: {
  schema: GraphQLSchema;
  limits: OperationLimits;
  pipeline: Pipeline;
  logger: Logger;
  tracing: boolean;
}): ApolloSetup {
  // A result JSON cannot write reaches Apollo's own error response, which knows no request: its error is not logged
  // there but carried out of Apollo (`stringifyResult`) to the route, which answers and logs it with the request's id.
  const carried = new WeakMap<GraphQLFormattedError, UnwritableResult>();
  // A context that could not be made reaches Apollo's own error response too: the error Apollo answers it with is
  // made here, once per request, so that it names its request (the direct path passes the id itself).
  const failedContexts = new WeakMap<object, string>();
  const formatOne = (formatted: GraphQLFormattedError, error: unknown, requestId?: string) => {
    if (error instanceof UnwritableResult) {
      carried.set(formatted, error);
      return formatted;
    }
    const id = requestId ?? (error instanceof GraphQLError ? failedContexts.get(error) : undefined);
    return formatError(formatted, error, o.logger, !o.limits.introspection, id);
  };
  const present = new HttpPresenter({ formatError: formatOne, includeStacktraceInErrorResponses: false }, o.tracing);
  // Apollo's default (prettyJSONStringify), but a result it cannot write throws an UnwritableResult, and the error
  // response Apollo then writes for it throws that out of executeHTTPGraphQLRequest.
  const stringifyResult = (value: FormattedExecutionResult): string => {
    const first = value.errors?.[0];
    const out = first === undefined ? undefined : carried.get(first);
    if (out !== undefined) throw out;
    try {
      return JSON.stringify(value) + '\n';
    } catch (err) {
      throw new UnwritableResult(err, present);
    }
  };
  const contentTypes = new SingleResultTypes();
  const gatewayPlugins = [
    noStorePlugin(),
    pipelinePlugin(o.pipeline, present, contentTypes),
    warningsPlugin(),
    ...(o.tracing ? [operationSpanPlugin()] : []),
  ];
  return {
    gatewayPlugins,
    contentTypes,
    contextFailed(failure, requestId) {
      // Apollo's own words (ApolloServer.executeHTTPGraphQLRequest), which it takes as they are; thrown, as the direct
      // path's (HttpPresenter.failure), so that a GraphQLError without a code is masked, never shown.
      const error = thrown(ensureGraphQLError(failure, 'Context creation failed: '));
      failedContexts.set(error, requestId);
      return error;
    },
    options: {
      schema: o.schema,
      // GRAPHQL_INTROSPECTION is one of the shared validation rules (limits.validationRules), the same rules WebSocket
      // and SSE validate with; Apollo's own switch would be a second, HTTP-only copy of it.
      introspection: true,
      // Off with introspection: no "Did you mean …?" in Apollo's validation and variable errors either.
      hideSchemaDetailsFromClientErrors: !o.limits.introspection,
      includeStacktraceInErrorResponses: false,
      // The gateway's own SIGTERM and SIGINT handlers drain it (src/main.ts). Left to its default, Apollo adds its own
      // wherever NODE_ENV is not `test` (so in production, never in the suite): they stopped Apollo at once, beside
      // the drain, and sent the signal again.
      stopOnTerminationSignals: false,
      // Batched requests (a JSON array of operations) stay refused: Apollo's default, kept explicit (docs/graphql-api).
      allowBatchedHttpRequests: false,
      // Apollo's APQ cache is one for every app: a hash alone would run, for any app, a text another app registered
      // (an oracle of what it sent). So nothing is kept: a hash alone is PERSISTED_QUERY_NOT_FOUND and the client sends
      // the text with it. TRUSTED_DOCUMENTS=allow keeps texts per app (src/server/trusted-documents.ts). The route
      // refuses a wrong extension before Apollo reads it (untrustedHttp), in graphql-ws's and SSE's words.
      persistedQueries: { cache: KEEP_NOTHING },
      csrfPrevention: true,
      validationRules: [...o.limits.validationRules],
      // The cache-control plugin is replaced by its answer for this schema, without its per-field hook (noStorePlugin).
      // Apollo's inline trace answers only a federation gateway, and this schema is no subgraph: its plugin would do
      // nothing here but load Apollo's usage-reporting protobuf into the heap (docs/decisions/124).
      plugins: [
        ApolloServerPluginLandingPageDisabled(),
        ApolloServerPluginCacheControlDisabled(),
        ApolloServerPluginInlineTraceDisabled(),
        ...gatewayPlugins,
      ],
      formatError: formatOne,
      stringifyResult,
    },
  };
}

/**
 * A result JSON cannot write (a BigInt, a cycle in a JSON scalar's value), thrown out of Apollo to the route: its
 * answer is Apollo's error response (ApolloServer.errorResponse, as the direct path makes it), logged with the id of
 * the request, which the answer's X-Request-Id carries.
 */
export class UnwritableResult extends Error {
  constructor(
    readonly error: unknown,
    private readonly present: HttpPresenter,
  ) {
    super('a result JSON cannot write');
  }

  answer(contentType: string, requestId: string): HttpAnswer {
    return this.present.failure(this.error, contentType, requestId);
  }
}

/** A cache that keeps nothing (Apollo's APQ cache: see `persistedQueries` above). */
const KEEP_NOTHING: NonNullable<
  Exclude<ApolloServerOptions<GraphQLContext>['persistedQueries'], false | undefined>['cache']
> = {
  get: () => Promise.resolve(undefined),
  set: () => Promise.resolve(),
  delete: () => Promise.resolve(true),
};

const QUERIES_AND_MUTATIONS = ['query', 'mutation'] as OperationTypeNode[];

/**
 * Apollo's path through the pipeline's one entry: once Apollo has parsed, validated and picked the operation, the
 * pipeline admits, runs and presents it (the prepare stage finds the text in its cache after the first time), and
 * Apollo writes the answer. An operation Apollo could not pick is left to Apollo's own answer.
 */
function pipelinePlugin(
  pipeline: Pipeline,
  present: HttpPresenter,
  contentTypes: SingleResultTypes,
): ApolloServerPlugin<GraphQLContext> {
  const listener: Awaited<ReturnType<NonNullable<ApolloServerPlugin<GraphQLContext>['requestDidStart']>>> = {
    // graphql-js's word that it stopped validating, in the gateway's (namingValidationStop), as the prepare stage has
    // it: Apollo answers the very array it hands here, so its last error is replaced where it is. Only a document
    // that does not validate pays for it (Apollo keeps those that do, and validates them no more).
    async validationDidStart() {
      return async (errors) => {
        if (!errors?.length) return;
        const named = namingValidationStop(errors as readonly GraphQLError[]);
        if (named !== errors) (errors as GraphQLError[])[errors.length - 1] = named[named.length - 1]!;
      };
    },
    async responseForOperation({ contextValue, document, operation, request, source }) {
      if (!operation || source === undefined) return null;
      // An Accept that allows no JSON type: Apollo answers 406 once the operation has run (runHttpQuery.js), so it
      // is not run; this answer is replaced by that 406 (the response's content type is left unset for it).
      if (request.http && contentTypes.of(request.http.headers.get('accept')) === null)
        return { http: { status: 406, headers: new HeaderMap() }, body: { kind: 'single', singleResult: {} } };
      const answer = await pipeline.runOperation({
        caller: contextValue.caller,
        params: {
          query: source,
          operationName: request.operationName ?? undefined,
          variables: request.variables ?? undefined,
        },
        transport: 'http',
        requestId: contextValue.requestId,
        context: contextValue,
        // As the direct path: a subscription (POST or GET) is refused, BAD_REQUEST; it runs over WebSocket and SSE.
        allow: QUERIES_AND_MUTATIONS,
        trustedResolved: true,
        validated: document,
        variables: 'in-run',
        present,
      });
      return {
        http: { status: answer.status, headers: answer.headers },
        body: { kind: 'single', singleResult: answer.result as FormattedExecutionResult },
      };
    },
  };
  return { requestDidStart: async () => listener };
}

/** HTTP responses carry `extensions.warnings` (src/execution/present.ts withWarnings, for Apollo's response). */
function warningsPlugin(): ApolloServerPlugin<GraphQLContext> {
  const listener: Awaited<ReturnType<NonNullable<ApolloServerPlugin<GraphQLContext>['requestDidStart']>>> = {
    async willSendResponse({ response, contextValue }) {
      if (response.body.kind !== 'single') return;
      const warnings = contextValue.warnings;
      if (!warnings?.length) return;
      const result = response.body.singleResult;
      result.extensions = { ...result.extensions, warnings: [...warnings] };
    },
  };
  return { requestDidStart: async () => listener };
}

/**
 * What Apollo's default cache-control plugin does for this schema, without its per-field work: the schema has
 * no cache hints and no resolver sets one, so every response is uncacheable, and the plugin's answer is always
 * `cache-control: no-store` (kept as it is only when another part set a header it cannot parse). The plugin
 * itself ran a `willResolveField` hook for every field of every operation (a cache policy object each) and
 * defined a property on the context per request. Installed with ApolloServerPluginCacheControlDisabled.
 */
function noStorePlugin(): ApolloServerPlugin<GraphQLContext> {
  const listener: Awaited<ReturnType<NonNullable<ApolloServerPlugin<GraphQLContext>['requestDidStart']>>> = {
    async willSendResponse({ response }) {
      response.http.headers.set('cache-control', noStoreValue(response.http.headers.get('cache-control')));
    },
  };
  return { requestDidStart: async () => listener };
}

/**
 * Names the request's span after its GraphQL operation (`mutation CreateProject`) once Apollo has resolved it,
 * and records the error codes of a failed one. Never the document or the variables: they may hold secrets.
 * The direct path of POST /graphql calls the same two functions.
 */
function operationSpanPlugin(): ApolloServerPlugin<GraphQLContext> {
  return {
    async requestDidStart() {
      return {
        async didResolveOperation(rc) {
          if (!rc.operation) return;
          nameOperationSpan(rc.operation.operation, rc.operationName);
        },
        async didEncounterErrors(rc) {
          recordOperationErrors(rc.errors);
        },
      };
    },
  };
}
