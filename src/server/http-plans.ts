import type { IncomingMessage, ServerResponse } from 'node:http';
import { HeaderMap, type ApolloServer, type ApolloServerPlugin } from '@apollo/server';
import {
  GraphQLError,
  Kind,
  execute,
  getOperationAST,
  getVariableValues,
  parse,
  specifiedRules,
  validate,
  type DocumentNode,
  type ExecutionResult,
  type GraphQLFormattedError,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type ValidationRule,
} from 'graphql';
import { compileQuery, isCompiledQuery, type CompiledQuery } from 'graphql-jit';
import { LRUCache } from 'lru-cache';
import Negotiator from 'negotiator';
import type { Caller } from '../caller.js';
import type { GraphQLContext } from '../graphql/context.js';
import type { RateLimitedError } from '../ratelimit/buckets.js';
import { noStoreValue } from './cache-control.js';
import { nameOperationSpan, recordOperationErrors } from './tracing.js';

/**
 * Cached plans for POST /graphql (decision 035): per document text, the parse and the validation (Apollo's own
 * rules, the abuse limits among them) happen once, and a request whose answer is provably the one Apollo Server
 * would give runs without Apollo's per-request pipeline (the HeaderMap copy, the sha256 of the text, content
 * negotiation twice, a whatwg-mimetype parse, the dispatch of seven plugins' hooks, the copy of the context).
 *
 * Apollo still answers everything else (`run` returns false before anything observable has happened): GET,
 * batches, other content types, APQ (`extensions.persistedQuery`), a text that does not parse or validate, an
 * operation that cannot be picked, subscriptions, a refused cost, a failed context (401), an Accept header that
 * allows no JSON type. What the fast path does itself, it does as Apollo 5.5 does it (src/server/http-plans.ts
 * mirrors requestPipeline.js, runHttpQuery.js and errorNormalize.js), and test/server/http-plans.test.ts sends
 * each kind of request to a gateway with and without plans and compares status, headers and body byte for byte.
 */
export interface HttpPlansOptions {
  apollo: ApolloServer<GraphQLContext>;
  schema: GraphQLSchema;
  /** The plugins given to Apollo whose effects the fast path reproduces (any other plugin turns plans off). */
  plugins: readonly ApolloServerPlugin<GraphQLContext>[];
  /** The cost limit (src/server/limits.ts); a refusal is left to Apollo. */
  checkCost(document: DocumentNode, variables: Record<string, unknown> | undefined): GraphQLError | undefined;
  /** The rate limit (src/server/rate-limit.ts admitOperation): null at once when no bucket is limited. */
  admit(caller: Caller, document: DocumentNode, operation: OperationDefinitionNode, variables: Record<string, unknown> | undefined): Promise<RateLimitedError | null> | null;
  /** Whether the operation span plugin is installed (tracing on). */
  tracing: boolean;
  /** Document texts kept (bounded by count and by total text size). */
  max?: number;
  /**
   * Root query fields whose whole tree only reads the gateway's own store (no upstream call, no write): a query
   * made only of these runs compiled by graphql-jit, and again by graphql-js when that answer holds any error.
   * Empty: graphql-js alone.
   */
  compiledRoots?: ReadonlySet<string>;
}

interface Plan {
  readonly document: DocumentNode;
  /** The operation picked without operationName (null: none or several), and its type. */
  readonly anonymous: OperationDefinitionNode | null;
  /** graphql-jit's compilation per operation that qualifies (null: it does not, or compilation failed). */
  readonly compiled: Map<OperationDefinitionNode, CompiledQuery | null>;
}

/** A parse or validation failure: Apollo answers it (and caches nothing for it either). */
const UNPLANNABLE = Symbol('unplannable');

/** What Apollo's internals hold that the fast path relies on (Apollo Server 5; checked at start-up). */
interface ApolloInternals {
  formatError?: (formatted: GraphQLFormattedError, error: unknown) => GraphQLFormattedError;
  validationRules: ValidationRule[];
  laterValidationRules?: ValidationRule[];
  dangerouslyDisableValidation: boolean;
  validationOptions: Record<string, unknown>;
  parseOptions: Record<string, unknown>;
  executionOptions: Record<string, unknown>;
  includeStacktraceInErrorResponses: boolean;
  rootValue?: unknown;
  fieldResolver?: unknown;
  gatewayExecutor: unknown;
  status400ForVariableCoercionErrors: boolean;
  csrfPreventionRequestHeaders: readonly string[] | null;
  stringifyResult: (value: unknown) => string | Promise<string>;
  __testing_incrementalExecutionResults?: unknown;
  legacyExperimentalExecuteIncrementally?: unknown;
  plugins: Array<ApolloServerPlugin<GraphQLContext> & { __internal_plugin_id__?: string; __is_disabled_plugin__?: boolean }>;
  state: { phase: string; schemaManager?: { getSchemaDerivedData(): { schema: GraphQLSchema } } };
}

const JSON_TYPE = 'application/json; charset=utf-8';
const SINGLE_RESULT_TYPES = [JSON_TYPE, 'application/graphql-response+json; charset=utf-8', 'application/json; callbackSpec=1.0; charset=utf-8'];
/** Distinct Accept headers whose negotiation is kept (clients send a handful; the rest are negotiated each time). */
const ACCEPT_CACHE_MAX = 64;

export class HttpPlans {
  private readonly plans: LRUCache<string, Plan | typeof UNPLANNABLE>;
  private readonly accepted = new Map<string, string | null>();
  private readonly rules: readonly ValidationRule[];
  /** JSON POSTs answered by a plan, and those left to Apollo (tests check which path a request took). */
  readonly stats = { planned: 0, apollo: 0, compiled: 0, recompiled: 0 };

  private constructor(
    private readonly options: HttpPlansOptions,
    private readonly internals: ApolloInternals,
  ) {
    this.rules = [...specifiedRules, ...internals.validationRules];
    const max = options.max ?? 1000;
    this.plans = new LRUCache({ max, maxSize: 8 * 1024 * 1024, sizeCalculation: (_v, k) => k.length || 1 });
  }

  /**
   * Plans for this (started) Apollo Server, or null when its configuration is not the one the fast path
   * reproduces: then every request goes through Apollo, as before.
   */
  static create(options: HttpPlansOptions): HttpPlans | null {
    const internals = (options.apollo as unknown as { internals?: ApolloInternals }).internals;
    if (!internals || !reproducible(internals, options)) return null;
    return new HttpPlans(options, internals);
  }

  /** How many document texts have a cached plan (or a cached "Apollo answers"). */
  get cachedPlans(): number {
    return this.plans.size;
  }

  /** The plan of a text, made on first use; undefined when Apollo must answer (it does not parse or validate). */
  plan(query: string): Plan | undefined {
    let plan = this.plans.get(query);
    if (plan === undefined) {
      plan = this.make(query);
      this.plans.set(query, plan);
    }
    return plan === UNPLANNABLE ? undefined : plan;
  }

  private make(query: string): Plan | typeof UNPLANNABLE {
    let document: DocumentNode;
    try {
      document = parse(query, this.internals.parseOptions);
    } catch {
      return UNPLANNABLE;
    }
    if (validate(this.options.schema, document, this.rules, this.internals.validationOptions).length) return UNPLANNABLE;
    if (this.internals.laterValidationRules && validate(this.options.schema, document, this.internals.laterValidationRules).length) return UNPLANNABLE;
    return { document, anonymous: getOperationAST(document) ?? null, compiled: new Map() };
  }

  /** The compiled query of a store-only query operation (decision 035), made on first use; null otherwise. */
  private compiledQuery(plan: Plan, operation: OperationDefinitionNode): CompiledQuery | null {
    let compiled = plan.compiled.get(operation);
    if (compiled === undefined) {
      compiled = null;
      const roots = this.options.compiledRoots;
      const storeOnly =
        !!roots?.size &&
        operation.operation === 'query' &&
        operation.selectionSet.selections.every((s) => s.kind === Kind.FIELD && !s.directives?.length && (roots.has(s.name.value) || s.name.value === '__typename'));
      if (storeOnly) {
        try {
          const made = compileQuery(this.options.schema, plan.document, operation.name?.value);
          if (isCompiledQuery(made)) compiled = made;
        } catch {
          compiled = null;
        }
      }
      plan.compiled.set(operation, compiled);
    }
    return compiled;
  }

  /**
   * Executes the operation: graphql-js, or for a store-only query its compiled form when graphql-js accepts the
   * variables and the compiled answer holds no error. Any error (a resolver's, a null in a non-null field) runs
   * graphql-js again on the same context, so that error wording, paths and null propagation are graphql-js's;
   * the second run repeats store reads only (the request's DataLoaders already hold most of them).
   */
  private async execute(plan: Plan, operation: OperationDefinitionNode, operationName: string | undefined, contextValue: GraphQLContext, variables: Record<string, unknown> | undefined): Promise<ExecutionResult> {
    const compiled = operation.operation === 'query' ? this.compiledQuery(plan, operation) : null;
    if (compiled) {
      const coerced = operation.variableDefinitions?.length ? getVariableValues(this.options.schema, operation.variableDefinitions, variables ?? {}) : undefined;
      if (!coerced?.errors) {
        let result: ExecutionResult | undefined;
        try {
          result = await compiled.query(undefined, contextValue, variables ?? {});
        } catch {
          result = undefined;
        }
        if (result && !result.errors?.length) {
          this.stats.compiled++;
          return { data: result.data };
        }
        this.stats.recompiled++;
      }
    }
    return execute({ schema: this.options.schema, document: plan.document, contextValue, variableValues: variables, operationName });
  }

  /** Apollo's choice of content type for a single result (null: 406, left to Apollo), kept per Accept value. */
  private contentType(accept: string | undefined): string | null {
    if (!accept) return JSON_TYPE;
    let type = this.accepted.get(accept);
    if (type === undefined) {
      type = new Negotiator({ headers: { accept } }).mediaType(SINGLE_RESULT_TYPES) ?? null;
      if (this.accepted.size < ACCEPT_CACHE_MAX) this.accepted.set(accept, type);
    }
    return type;
  }

  /**
   * Answers a POST whose JSON body (already parsed, trusted documents already admitted) is `body`, or returns
   * false, having done nothing observable, for Apollo to answer.
   */
  async run(req: IncomingMessage, res: ServerResponse, body: unknown, context: () => Promise<GraphQLContext>): Promise<boolean> {
    const answered = await this.answer(req, res, body, context);
    if (answered) this.stats.planned++;
    else this.stats.apollo++;
    return answered;
  }

  private async answer(req: IncomingMessage, res: ServerResponse, body: unknown, context: () => Promise<GraphQLContext>): Promise<boolean> {
    // runHttpQuery's POST checks, narrowed to what needs no error: an object with a non-empty query string,
    // variables and extensions objects or null, operationName a string or null, no persisted query.
    if (!body || typeof body !== 'object' || Array.isArray(body)) return false;
    const params = body as { query?: unknown; variables?: unknown; operationName?: unknown; extensions?: unknown };
    const query = params.query;
    if (typeof query !== 'string' || query === '') return false;
    const rawVariables = params.variables;
    if (rawVariables !== undefined && rawVariables !== null && !isRecord(rawVariables)) return false;
    const rawName = params.operationName;
    if (rawName !== undefined && rawName !== null && typeof rawName !== 'string') return false;
    const extensions = params.extensions;
    if (extensions !== undefined && extensions !== null && (!isRecord(extensions) || 'persistedQuery' in extensions)) return false;
    const contentType = this.contentType(req.headers.accept);
    if (contentType === null) return false;

    // Authentication first, as Apollo makes the context before it parses: a request without a valid key parses,
    // validates and caches nothing here, and its 401 is Apollo's to answer.
    let contextValue: GraphQLContext;
    try {
      contextValue = await context();
    } catch {
      return false;
    }
    const plan = this.plan(query);
    if (!plan) return false;
    const operationName = typeof rawName === 'string' ? rawName : undefined;
    const operation = operationName === undefined ? plan.anonymous : getOperationAST(plan.document, operationName);
    if (!operation || operation.operation === 'subscription') return false;
    const variables = isRecord(rawVariables) ? rawVariables : undefined;

    // didResolveOperation: the cost (a refusal goes to Apollo: nothing has been spent yet), the span's name, the
    // rate limit (points spent: from here on the answer is this path's).
    if (this.options.checkCost(plan.document, variables)) return false;
    const operationNameOfSpan = operation.name?.value || null;
    if (this.options.tracing) nameOperationSpan(operation.operation, operationNameOfSpan);
    let refusal: GraphQLError | undefined;
    try {
      const refused = await this.options.admit(contextValue.caller, plan.document, operation, variables);
      if (refused) {
        refusal = new GraphQLError(refused.message, {
          extensions: { ...refused.extensions, http: { status: 429, headers: new HeaderMap([['retry-after', String(refused.retryAfterSeconds)]]) } },
        });
      }
    } catch (err) {
      refusal = ensureGraphQLError(err);
    }
    if (refusal) {
      this.send(res, this.errorResult([refusal], contextValue), contentType);
      return true;
    }

    let result: ExecutionResult;
    try {
      result = await this.execute(plan, operation, operationName, contextValue, variables);
    } catch (err) {
      this.send(res, this.errorResult([ensureGraphQLError(err)], contextValue), contentType);
      return true;
    }
    this.send(res, this.executionResult(result, contextValue), contentType);
    return true;
  }

  /** requestPipeline.js after execute: errors marked, reported to the span, formatted; the 400 of a variable error. */
  private executionResult(result: ExecutionResult, contextValue: GraphQLContext): Answer {
    const head: Head = { status: undefined, headers: undefined };
    let errors: GraphQLFormattedError[] | undefined;
    if (result.errors) {
      const marked = result.errors.map((e) => (isBadUserInputGraphQLError(e) && e.extensions?.code == null ? userInputError(e) : e));
      if (this.options.tracing) recordOperationErrors(marked);
      errors = this.formatErrors(marked, head);
      if (this.internals.status400ForVariableCoercionErrors && marked.length && result.data === undefined && !head.status) head.status = 400;
    }
    return this.willSend(head, { errors, data: result.data, extensions: result.extensions }, contextValue);
  }

  /** requestPipeline.js sendErrorResponse: errors only, status 500 unless an error sets one. */
  private errorResult(errors: GraphQLError[], contextValue: GraphQLContext): Answer {
    const head: Head = { status: undefined, headers: undefined };
    if (this.options.tracing) recordOperationErrors(errors);
    const formatted = this.formatErrors(errors, head);
    head.status ??= 500;
    return this.willSend(head, { errors: formatted, data: undefined, extensions: undefined }, contextValue);
  }

  /** The willSendResponse hooks of the gateway's plugins: cache-control (noStorePlugin) and warnings (warningsPlugin). */
  private willSend(head: Head, result: { errors: GraphQLFormattedError[] | undefined; data: unknown; extensions: Record<string, unknown> | undefined }, contextValue: GraphQLContext): Answer {
    const headers = (head.headers ??= new HeaderMap());
    headers.set('cache-control', noStoreValue(headers.get('cache-control')));
    const warnings = contextValue.warnings;
    if (warnings?.length) result.extensions = { ...result.extensions, warnings: [...warnings] };
    return { head, result };
  }

  /** errorNormalize.js normalizeAndFormatErrors with the gateway's formatError. */
  private formatErrors(errors: readonly GraphQLError[], head: Head): GraphQLFormattedError[] {
    const { formatError, includeStacktraceInErrorResponses } = this.internals;
    const enrich = (maybeError: unknown): GraphQLFormattedError => {
      const graphqlError = ensureGraphQLError(maybeError);
      const extensions: Record<string, unknown> = { ...graphqlError.extensions, code: graphqlError.extensions.code ?? 'INTERNAL_SERVER_ERROR' };
      if (isPartialHead(extensions.http)) {
        const http = extensions.http as { status?: number; headers?: Map<string, string> };
        if (http.status) head.status = http.status;
        if (http.headers) for (const [name, value] of http.headers) (head.headers ??= new HeaderMap()).set(name, value);
        delete extensions.http;
      }
      if (includeStacktraceInErrorResponses) extensions.stacktrace = graphqlError.stack?.split('\n');
      return { ...graphqlError.toJSON(), extensions };
    };
    return errors.map((error) => {
      try {
        return formatError ? formatError(enrich(error), error) : enrich(error);
      } catch (formattingError) {
        if (includeStacktraceInErrorResponses) return enrich(formattingError);
        return { message: 'Internal server error', extensions: { code: 'INTERNAL_SERVER_ERROR' } };
      }
    });
  }

  /** runHttpQuery.js for a single result, and the route's write: headers in Apollo's order, then the body. */
  private send(res: ServerResponse, { head, result }: Answer, contentType: string): void {
    let text: string;
    try {
      // Apollo's default stringifyResult (checked at start-up), with its field order: errors, data, extensions.
      text = JSON.stringify({ errors: result.errors, data: result.data, extensions: result.extensions }) + '\n';
    } catch (err) {
      // ApolloServer.errorResponse: the failure formatted (masked), its own status (500), no plugin's header.
      const failed: Head = { status: undefined, headers: undefined };
      const errors = this.formatErrors([ensureGraphQLError(err)], failed);
      const headers = failed.headers ?? new HeaderMap();
      headers.set('content-type', contentType);
      for (const [k, v] of headers) res.setHeader(k, v);
      res.statusCode = failed.status ?? 500;
      res.end(JSON.stringify({ errors }) + '\n');
      return;
    }
    const headers = head.headers!;
    if (!headers.get('content-type')) headers.set('content-type', contentType);
    for (const [k, v] of headers) res.setHeader(k, v);
    res.statusCode = head.status ?? 200;
    res.end(text);
  }
}

interface Head {
  status: number | undefined;
  headers: HeaderMap | undefined;
}

interface Answer {
  head: Head;
  result: { errors: GraphQLFormattedError[] | undefined; data: unknown; extensions: Record<string, unknown> | undefined };
}

function isRecord(o: unknown): o is Record<string, unknown> {
  return !!o && typeof o === 'object' && !Buffer.isBuffer(o) && !Array.isArray(o);
}

function isPartialHead(x: unknown): boolean {
  return !!x && typeof x === 'object' && (!('status' in x) || typeof x.status === 'number') && (!('headers' in x) || x.headers instanceof Map);
}

function ensureGraphQLError(maybeError: unknown): GraphQLError {
  const error = maybeError instanceof Error ? maybeError : new GraphQLError('Unexpected error value: ' + String(maybeError));
  return error instanceof GraphQLError ? error : new GraphQLError(error.message, { originalError: error });
}

/** requestPipeline.js: graphql-js's variable errors become BAD_USER_INPUT. */
function isBadUserInputGraphQLError(error: GraphQLError): boolean {
  const node = error.nodes?.length === 1 ? error.nodes[0] : undefined;
  if (node?.kind !== Kind.VARIABLE_DEFINITION) return false;
  const name = node.variable.name.value;
  return (
    error.message.startsWith(`Variable "$${name}" has invalid value`) ||
    error.message.startsWith(`Variable "$${name}" got invalid value `) ||
    error.message.startsWith(`Variable "$${name}" of required type `) ||
    error.message.startsWith(`Variable "$${name}" of non-null type `)
  );
}

/** Apollo's UserInputError (internalErrorClasses.js), which it does not export. */
class UserInputError extends GraphQLError {
  constructor(error: GraphQLError) {
    super(error.message, { nodes: error.nodes, originalError: error.originalError ?? error, extensions: { ...error.extensions, code: 'BAD_USER_INPUT' } });
    this.name = 'UserInputError';
  }
}

function userInputError(error: GraphQLError): GraphQLError {
  return new UserInputError(error);
}


function reproducible(internals: ApolloInternals, options: HttpPlansOptions): boolean {
  const known = new Set<unknown>(options.plugins);
  const pluginsKnown = internals.plugins.every((p) => {
    if (known.has(p)) return true;
    const id = p.__internal_plugin_id__;
    if (id === 'CacheControl' || id === 'LandingPageDisabled') return p.__is_disabled_plugin__ === true;
    // Installed by Apollo for subgraph schemas only (__onlyIfSchemaIsSubgraph); this schema has no _service.
    if (id === 'InlineTrace') return !options.schema.getQueryType()?.getFields()._service;
    return false;
  });
  return (
    pluginsKnown &&
    internals.state.phase === 'started' &&
    internals.state.schemaManager?.getSchemaDerivedData().schema === options.schema &&
    Array.isArray(internals.validationRules) &&
    internals.dangerouslyDisableValidation === false &&
    internals.rootValue === undefined &&
    internals.fieldResolver === undefined &&
    internals.gatewayExecutor === null &&
    Object.keys(internals.executionOptions ?? {}).length === 0 &&
    internals.__testing_incrementalExecutionResults === undefined &&
    internals.legacyExperimentalExecuteIncrementally === undefined &&
    // CSRF prevention passes every request with a JSON content type, the only kind planned.
    typeof internals.stringifyResult === 'function' &&
    internals.stringifyResult.name === 'prettyJSONStringify'
  );
}
