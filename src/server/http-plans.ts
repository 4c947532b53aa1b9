import type { IncomingMessage, ServerResponse } from 'node:http';
import { HeaderMap } from '@apollo/server';
import { GraphQLError, Kind, getOperationAST, type ExecutionResult, type GraphQLFormattedError } from 'graphql';
import Negotiator from 'negotiator';
import type { Admission } from '../execution/admit.js';
import type { ApolloSetup } from '../execution/apollo.js';
import type { DocumentCache } from '../execution/prepare.js';
import { forHttp, noStoreValue } from '../execution/present.js';
import type { OperationRunner } from '../execution/run.js';
import { nameOperationSpan, recordOperationErrors } from '../execution/tracing.js';
import { ErrorCode } from '../errors.js';
import type { GraphQLContext } from '../graphql/context.js';

/**
 * The planned path of POST /graphql (decision 035, revised by 044): a request whose answer is provably the one Apollo
 * Server would give is answered by the execution pipeline's stages without Apollo's per-request pipeline (the
 * HeaderMap copy, the sha256 of the text, content negotiation twice, a whatwg-mimetype parse, the dispatch of seven
 * plugins' hooks, the copy of the context). Everything it needs of Apollo's configuration it reads from the options
 * object the gateway gives `new ApolloServer` (src/execution/apollo.ts), never from Apollo's private state.
 *
 * Apollo still answers everything else (`run` returns false before anything observable has happened): GET,
 * batches, other content types, APQ (`extensions.persistedQuery`), a text that does not parse or validate, an
 * operation that cannot be picked, subscriptions, a refused cost, a failed context (401), an Accept header that
 * allows no JSON type. What the planned path does itself, it does as Apollo 5.5 does it (requestPipeline.js,
 * runHttpQuery.js and errorNormalize.js; @apollo/server is pinned exactly for that reason), and
 * test/server/http-plans.test.ts sends each kind of request to a gateway with and without plans and compares status,
 * headers and body byte for byte. Off: `httpPlans: false`, or on its own (with a warning) when the environment makes
 * Apollo install plugins of its own (APOLLO_KEY, APOLLO_SCHEMA_REPORTING).
 */
export interface HttpPlansOptions {
  /** The Apollo options and the gateway's plugins among them (the same object Apollo was built from). */
  apollo: ApolloSetup;
  /** The prepare stage's cache (shared with graphql-ws and graphql-sse). */
  documents: DocumentCache;
  /** The admit stage: the cost (a refusal is left to Apollo), then the rate limit. */
  admit: Admission;
  /** The run stage for queries and mutations. */
  runner: OperationRunner;
  /** Whether the operation span plugin is installed (tracing on). */
  tracing: boolean;
}

const JSON_TYPE = 'application/json; charset=utf-8';
const SINGLE_RESULT_TYPES = [JSON_TYPE, 'application/graphql-response+json; charset=utf-8', 'application/json; callbackSpec=1.0; charset=utf-8'];
/** Distinct Accept headers whose negotiation is kept (clients send a handful; the rest are negotiated each time). */
const ACCEPT_CACHE_MAX = 64;

export class HttpPlans {
  private readonly accepted = new Map<string, string | null>();
  /** JSON POSTs answered by a plan, and those left to Apollo (tests check which path a request took). */
  readonly stats: { planned: number; apollo: number; readonly compiled: number; readonly recompiled: number };

  private constructor(private readonly options: HttpPlansOptions) {
    const runner = options.runner;
    this.stats = {
      planned: 0,
      apollo: 0,
      get compiled() {
        return runner.stats.compiled;
      },
      get recompiled() {
        return runner.stats.recompiled;
      },
    };
  }

  /**
   * The planned path, or null when the environment makes Apollo install plugins whose effects it does not reproduce
   * (usage or schema reporting): then every request goes through Apollo, and the operator is told once.
   */
  static create(options: HttpPlansOptions, reporting: readonly string[], warn: (message: string) => void): HttpPlans | null {
    if (reporting.length) {
      warn(`the planned path of POST /graphql is off: ${reporting.join(' and ')} ${reporting.length > 1 ? 'make' : 'makes'} Apollo Server install plugins of its own, so every request goes through Apollo's pipeline`);
      return null;
    }
    return new HttpPlans(options);
  }

  /** How many document texts are prepared (the prepare stage's cache, shared with the streaming transports). */
  get cachedPlans(): number {
    return this.options.documents.size;
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
    const prepared = this.options.documents.get(query);
    if (Array.isArray(prepared.document)) return false;
    const document = prepared.document as import('graphql').DocumentNode;
    const operationName = typeof rawName === 'string' ? rawName : undefined;
    const operation = operationName === undefined ? prepared.anonymous : getOperationAST(document, operationName);
    if (!operation || operation.operation === 'subscription') return false;
    const variables = isRecord(rawVariables) ? rawVariables : undefined;

    // didResolveOperation: the admit stage. A refused cost is left to Apollo (nothing has been spent yet); once the
    // rate limit has spent points, the answer is this path's.
    if (this.options.tracing) nameOperationSpan(operation.operation, operation.name?.value || null);
    let refusal: GraphQLError | undefined;
    try {
      const admitted = this.options.admit(contextValue.caller, document, operation, variables);
      const refused = admitted instanceof Promise ? await admitted : admitted;
      if (refused && refused.extensions.code !== ErrorCode.RATE_LIMITED) return false;
      if (refused) refusal = forHttp(refused);
    } catch (err) {
      refusal = ensureGraphQLError(err);
    }
    if (refusal) {
      this.send(res, this.errorResult([refusal], contextValue), contentType);
      return true;
    }

    let result: ExecutionResult;
    try {
      result = await this.options.runner.execute(prepared, operation, operationName, contextValue, variables);
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
      // Apollo 5's status400ForVariableCoercionErrors, on by default and not set by the gateway.
      if (marked.length && result.data === undefined && !head.status) head.status = 400;
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
    const { formatError, includeStacktraceInErrorResponses } = this.options.apollo.options;
    const enrich = (maybeError: unknown): GraphQLFormattedError => {
      const graphqlError = ensureGraphQLError(maybeError);
      const extensions: Record<string, unknown> = { ...graphqlError.extensions, code: graphqlError.extensions.code ?? ErrorCode.INTERNAL_SERVER_ERROR };
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
        return { message: 'Internal server error', extensions: { code: ErrorCode.INTERNAL_SERVER_ERROR } };
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
    super(error.message, { nodes: error.nodes, originalError: error.originalError ?? error, extensions: { ...error.extensions, code: ErrorCode.BAD_USER_INPUT } });
    this.name = 'UserInputError';
  }
}

function userInputError(error: GraphQLError): GraphQLError {
  return new UserInputError(error);
}


