// The *present* stage of the execution pipeline (docs/decisions/044): what every transport does to a result before
// it is written. Errors are masked by one rule, warnings added by one rule, and the cache-control answer is one value.
import { HeaderMap } from '@apollo/server';
import { ApolloServerErrorCode, unwrapResolverError } from '@apollo/server/errors';
import {
  GraphQLError,
  Kind,
  type DocumentNode,
  type ExecutionResult,
  type GraphQLFormattedError,
  type OperationDefinitionNode,
  type OperationTypeNode,
} from 'graphql';
import Negotiator from 'negotiator';

import { ErrorCode, INTERNAL_ERROR_MESSAGE, shownCode } from '../errors.js';
import type { GraphQLContext } from '../graphql/context.js';
import { logUnexpected, type Logger } from '../logger.js';
import { RateLimitedError } from '../ratelimit/buckets.js';
import { nameOperationSpan, recordOperationErrors } from '../telemetry/operations.js';

/** Apollo's own request errors' codes: the client's to see as they are, beside the contract's (shownCode). */
const APOLLO_REQUEST_CODES = new Set<string>([
  ApolloServerErrorCode.GRAPHQL_PARSE_FAILED,
  ApolloServerErrorCode.GRAPHQL_VALIDATION_FAILED,
  ApolloServerErrorCode.OPERATION_RESOLUTION_FAILURE,
  ApolloServerErrorCode.PERSISTED_QUERY_NOT_FOUND,
  ApolloServerErrorCode.PERSISTED_QUERY_NOT_SUPPORTED,
]);

/**
 * One masking rule for HTTP (Apollo's formatError, and the direct path) and the streaming transports: an error is the
 * client's to read only when it was raised on purpose, a GraphQLError (a GatewayError, Apollo's) with a code of the
 * contract, or graphql-js's own refusal of the request. Anything else reaches the client as INTERNAL_SERVER_ERROR with
 * nothing of its own (its path and locations kept), and the log in full with the request's id (`requestId`, when the
 * error belongs to an operation). INTERNAL_SERVER_ERROR itself is never a reason to pass: Apollo's pipeline and the
 * direct path fill it in for every error without a code before this rule runs, so it says nothing of how the error
 * was raised.
 */
export function formatError(
  formatted: GraphQLFormattedError,
  error: unknown,
  logger: Logger,
  hideSuggestions = false,
  requestId?: string,
  connection?: string,
): GraphQLFormattedError {
  const code = formatted.extensions?.code;
  const original = unwrapResolverError(error);
  const coded = shownCode(code, APOLLO_REQUEST_CODES);
  if (coded && (original instanceof GraphQLError || !(original instanceof Error))) {
    const shown = withVariableField(withoutEchoedValue(withoutHttp(formatted), error));
    return hideSuggestions ? withoutSuggestions(shown) : shown;
  }
  // graphql-js's own errors carry no original error and no code of their own (over HTTP, the INTERNAL_SERVER_ERROR
  // filled in). Those of the request (a text that does not parse or validate, sent as they are over SSE) have no
  // path: the client's to read. Those of the execution (a null in a non-null field, a value an enum or a scalar
  // cannot serialize, an abstract type it cannot resolve) have one: a resolver or a stored row broke the schema's
  // promise, which is unexpected. An error that was thrown (`thrown`) is never a refusal of the request, which the
  // pipeline returns, so one without a code and a path is a bug's GraphQLError, not graphql-js's words.
  if (
    original instanceof GraphQLError &&
    !thrownErrors.has(original) &&
    !original.originalError &&
    formatted.path === undefined &&
    (code === undefined || code === ErrorCode.INTERNAL_SERVER_ERROR)
  )
    return formatted;
  logUnexpected(
    logger,
    original,
    connection === undefined ? { requestId } : { requestId, connection },
    'unexpected error in a GraphQL operation',
  );
  return {
    message: INTERNAL_ERROR_MESSAGE,
    locations: formatted.locations,
    path: formatted.path,
    extensions: { code: ErrorCode.INTERNAL_SERVER_ERROR },
  };
}

/**
 * What a streaming transport ends an operation with when it failed past its result stream (the stream threw, or a
 * result JSON cannot write), by the one masking rule (formatError): the error as it is when the gateway raised it on
 * purpose with a code of the contract, else INTERNAL_SERVER_ERROR with nothing of its own, and the error in full in
 * the log.
 */
export function streamFailure(err: unknown, logger: Logger, requestId?: string, connection?: string): GraphQLError {
  const shown = formatError(ensureGraphQLError(err).toJSON(), thrown(err), logger, false, requestId, connection);
  return new GraphQLError(shown.message, { path: shown.path, extensions: shown.extensions });
}

/**
 * The errors that reached formatError by a throw (a presenter's `threw`, an HTTP failure, a stream's failure) rather
 * than in a result or a refused stage: graphql-js's refusals of a request never come this way (the pipeline returns
 * them), so formatError shows none of these for having no code, path or original error.
 */
const thrownErrors = new WeakSet<object>();

export function thrown<E>(err: E): E {
  if (typeof err === 'object' && err !== null) thrownErrors.add(err);
  return err;
}

/**
 * The error without its `http` extension: the HTTP presenters take the status and headers off it before this rule
 * runs; on graphql-ws, SSE and MCP they are nothing the client should read.
 */
function withoutHttp(formatted: GraphQLFormattedError): GraphQLFormattedError {
  if (!formatted.extensions || !('http' in formatted.extensions)) return formatted;
  const { http: _http, ...extensions } = formatted.extensions;
  return { ...formatted, extensions };
}

const INVALID_VARIABLE = /^Variable "\$([^"]+)" got invalid value /;
const SUGGESTION = / ?Did you mean [^?]*\?/g;

/**
 * The message without graphql-js's "Did you mean …?" (introspection off). Apollo's own pipeline coerces variables
 * without graphql-js's hideSuggestions, so its BAD_USER_INPUT for an enum value would still name the schema's values.
 */
function withoutSuggestions(formatted: GraphQLFormattedError): GraphQLFormattedError {
  return formatted.message.includes('Did you mean')
    ? { ...formatted, message: formatted.message.replace(SUGGESTION, '') }
    : formatted;
}

/**
 * graphql-js words a variable it cannot coerce as `Variable "$input" got invalid value <the whole value> at "path";
 * <reason>`, and the whole value may hold a password (found by test/fuzz/mutation-fuzzing.test.ts). The value is left
 * out; the variable, the path and the reason stay.
 */
function withoutEchoedValue(formatted: GraphQLFormattedError, error: unknown): GraphQLFormattedError {
  const name = INVALID_VARIABLE.exec(formatted.message)?.[1];
  if (name === undefined) return formatted;
  const inner = error instanceof GraphQLError ? error.originalError : undefined;
  const reason = inner?.message;
  if (!reason || !formatted.message.endsWith(`; ${reason}`)) {
    return { ...formatted, message: `Variable "$${name}" got an invalid value` };
  }
  const prefix = formatted.message.slice(0, -(reason.length + 2));
  const at = new RegExp(` at "${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}[^"]*"$`).exec(prefix)?.[0] ?? '';
  return { ...formatted, message: `Variable "$${name}" got invalid value${at}; ${reason}` };
}

/**
 * The field a refusal of graphql-js's variable coercion is about, as the gateway's own BAD_USER_INPUT names one
 * (`input.acls[2].pattern`: graphql-js writes its paths so), read from its words: the variable, the place in it
 * (`at "input.bandwidthMbps"`), and a field of an input object that is unknown or missing. Undefined for other words.
 * MCP's argumentOf (src/server/mcp/operations.ts) reads the same words: a transport may not import this stage.
 */
function variableFieldOf(message: string): string | undefined {
  const m = /^Variable "\$([^"]+)" (?:got (?:an )?invalid value(?: at "([^"]+)")?|of (?:required|non-null) type)/.exec(
    message,
  );
  if (!m) return undefined;
  const at = m[2] ?? m[1]!;
  const inner = /Field "([^"]+)" (?:of required type|is not defined)/.exec(message);
  return inner ? `${at}.${inner[1]}` : at;
}

/**
 * docs/contract.md: a BAD_USER_INPUT names its field in `extensions.field`. graphql-js's refusals of the variables
 * name it only in their words, which a client cannot read reliably: the field is added from them.
 */
function withVariableField(formatted: GraphQLFormattedError): GraphQLFormattedError {
  if (formatted.extensions?.code !== ErrorCode.BAD_USER_INPUT || formatted.extensions.field !== undefined)
    return formatted;
  const field = variableFieldOf(formatted.message);
  return field === undefined ? formatted : { ...formatted, extensions: { ...formatted.extensions, field } };
}

/**
 * A result with the operation's warnings added as `extensions.warnings` (unchanged when there are none).
 * Warnings are not errors: the data is complete as far as the gateway knows it (docs/contract.md, Error codes).
 */
export function withWarnings<T extends ExecutionResult>(result: T, context: GraphQLContext | undefined): T {
  const warnings = context?.warnings;
  if (!warnings?.length) return result;
  return { ...result, extensions: { ...result.extensions, warnings: [...warnings] } };
}

const masked = new WeakMap<ExecutionResult, ExecutionResult>();

/**
 * What a streaming transport sends for `result`: the operation's warnings added (as over HTTP), and errors marked and
 * masked like over HTTP (a variable graphql-js could not coerce is BAD_USER_INPUT, `markedVariableError`; unexpected
 * errors become INTERNAL_SERVER_ERROR for the client, and the log in full). Unchanged
 * results are returned as they are; a masked one is kept per result object, so the subscribers sharing one
 * execution (src/execution/shared.ts) share its masking too, logged once.
 */
export function deliverable(
  result: ExecutionResult,
  context: GraphQLContext | undefined,
  logger: Logger,
): ExecutionResult {
  const warned = withWarnings(result, context);
  const errors = warned.errors;
  if (!errors?.length) return warned;
  const known = warned === result ? masked.get(result) : undefined;
  if (known) return known;
  const out = {
    ...warned,
    errors: errors.map((e) => {
      const marked = markedVariableError(e);
      return formatError(marked.toJSON(), marked, logger, false, context?.requestId, context?.connection);
    }) as unknown as GraphQLError[],
  };
  if (warned === result) masked.set(result, out);
  return out;
}

/** The results `writable` found JSON can write: a result shared by a group of subscribers is checked once. */
const writableResults = new WeakSet<ExecutionResult>();

/**
 * `result` as it is when JSON can write it; else (a BigInt, a cycle in a JSON scalar's value) INTERNAL_SERVER_ERROR
 * with no message of its own in its place, and the error logged with the request id, as graphql-ws answers a result
 * it cannot write. For a transport whose library writes the result itself (graphql-sse), where the throw would end the
 * whole event stream with nothing said. The cursor is kept, so a client resuming from it is not handed the same event.
 */
export function writable(result: ExecutionResult, logger: Logger, requestId?: string): ExecutionResult {
  if (writableResults.has(result)) return result;
  try {
    JSON.stringify(result);
  } catch (err) {
    const cursor = result.extensions?.cursor;
    return {
      errors: [streamFailure(err, logger, requestId)],
      ...(typeof cursor === 'string' ? { extensions: { cursor } } : {}),
    };
  }
  writableResults.add(result);
  return result;
}

/** A Cache-Control value Apollo's cache-control plugin can read (and would only tighten). */
const CACHEABLE_HEADER = /^max-age=(\d+), (public|private)$/;

/**
 * The cache-control header Apollo's default cache-control plugin leaves on a response of this schema, given the
 * one already set (by an error's `http` extension): `no-store`, unless another part set a value it cannot parse.
 */
export function noStoreValue(existing: string | undefined): string {
  return existing && existing !== 'no-store' && !CACHEABLE_HEADER.test(existing) ? existing : 'no-store';
}

/**
 * An admission refusal as HTTP answers it (Apollo's `http` error extension, removed before the response is written):
 * 429 with `Retry-After` for RATE_LIMITED, 403 for FORBIDDEN, 400 for a limit or for an operation of a type the call
 * does not run (a subscription over HTTP). Over HTTP a refused operation is a refused request; the streaming transports
 * send the same error without a status.
 */
export function forHttp(refusal: GraphQLError): GraphQLError {
  const http =
    refusal instanceof RateLimitedError
      ? { status: 429, headers: new HeaderMap([['retry-after', String(refusal.retryAfterSeconds)]]) }
      : refusal.extensions.code === ErrorCode.FORBIDDEN
        ? { status: 403 }
        : { status: 400 };
  return new GraphQLError(refusal.message, { extensions: { ...refusal.extensions, http }, originalError: refusal });
}

/** Why an operation did not run, by stage; nothing was executed (a rate-limit refusal spent no points). */
export type Refusal = {
  readonly ok: false;
  readonly stage: RefusalStage;
  /** Formatted (masked) as the client sees them. */
  readonly errors: readonly GraphQLFormattedError[];
};

/** The stage of the pipeline (src/execution/pipeline.ts) that refused an operation. */
export type RefusalStage = 'trusted' | 'parse' | 'validate' | 'operation' | 'allow' | 'variables' | 'admit';

/** The operation ran: its result, masked and with its warnings. */
export type Executed = {
  readonly ok: true;
  readonly result: ExecutionResult & { errors?: readonly GraphQLFormattedError[] };
};

/**
 * A subscription's results, which its transport can end early with a last result of its own (SSE: the caller's
 * token expired): `end` stops the source at once and hands `last` to the waiting (or next) `next()` instead of the
 * source's end, then the stream is done. The source's `return()` must end a `next()` that waits (an EventStream's
 * does, as does the heartbeat's iterator; an async generator waiting between two ticks would hold `last` back).
 */
export interface ResultStream extends AsyncGenerator<ExecutionResult> {
  end(last: ExecutionResult): void;
  /**
   * Whether its results may be delivered now (src/server/held-credentials.ts Delivery: held while a reload checks the
   * credential it runs for). A result made while it is held waits, and the source is asked for nothing more, until it
   * resumes; `end` and `return` drop what waits. Set by the transport before the stream's first `next()`.
   */
  delivery?: DeliveryGate;
  /**
   * Called once when the stream's source ends by itself (not by `end`, `return` or a failure), before the stream
   * ends: where an event stream's own check of the caller's expiry (StreamOptions.endAt) ended it before the
   * transport's scheduled end ran, the transport ends it as that end would (`end` here gives the last result).
   */
  sourceEnded?: () => void;
  /**
   * Called once when the stream ends, for any reason: its source's end (a last event, an expiry), a failure, `end`,
   * `return` (a client's `complete`, a socket's close, a slow consumer's, shutdown). Set by the pipeline, before the
   * stream's first `next()`, to give back its count of the app's live subscriptions (APP_LIVE_SUBSCRIPTIONS).
   */
  ended?: () => void;
}

/** See ResultStream.delivery. */
export interface DeliveryGate {
  /** Read once per result: true while what the stream would deliver must wait. */
  readonly held: boolean;
  /** Runs `resume` once it is no longer held (never when the credential it waits for is refused). */
  whenResumed(resume: () => void): void;
}

/**
 * How a transport's answer is made from what the pipeline decided: the last stage of src/execution/pipeline.ts
 * runOperation, chosen by the transport. Every presenter lives here, so errors are formatted in this file only.
 */
export interface Presenter<T> {
  /** The operation is picked (HTTP names its request span after it). */
  picked?(operation: OperationTypeNode, name: string | null): void;
  /** A stage refused the operation: nothing ran. `errors` are raw; the presenter formats them. */
  refused(stage: RefusalStage, errors: readonly GraphQLError[], context: GraphQLContext | undefined): T;
  /** The run stage's result (`ran`: what ran, for the streaming transports). */
  executed(result: ExecutionResult, context: GraphQLContext, ran?: Ran): T;
  /** A subscription's stream (the streaming transports only): its results, or none when they go to the sink. */
  subscribed?(stream: ResultStream, context: GraphQLContext, ran: Ran): T;
  /** The admit or the run stage threw. */
  threw(err: unknown, context: GraphQLContext): T;
}

/**
 * What ran: the prepared text (one string shared by every operation of it), its document, the operation's name and
 * its node (what a reload checks a running subscription's scopes on: src/execution/pipeline.ts forbiddenNow).
 */
export interface Ran {
  readonly query: string;
  readonly document: DocumentNode;
  readonly operationName: string | null;
  readonly operation: OperationDefinitionNode;
}

/**
 * The outcome the MCP transport reads: formatted refusals by stage (a document that does not parse or validate named
 * as POST /graphql names it, `documentRefusal`), or the masked result with its warnings.
 */
export function outcomePresenter(logger: Logger, hideSuggestions: boolean): Presenter<Refusal | Executed> {
  return {
    refused: (stage, errors, context) => ({
      ok: false,
      stage,
      errors: documentRefusal(stage, errors).map((e) =>
        formatError(e.toJSON(), e, logger, hideSuggestions, context?.requestId),
      ),
    }),
    executed: (result, context) => ({ ok: true, result: deliverable(result, context, logger) as Executed['result'] }),
    threw: (err) => {
      throw err;
    },
  };
}

/** The content types Apollo Server answers a single result with, in its order (ApolloServer.js MEDIA_TYPES). */
const SINGLE_RESULT_TYPES = [
  'application/json; charset=utf-8',
  'application/graphql-response+json; charset=utf-8',
  'application/json; callbackSpec=1.0; charset=utf-8',
];

/** Distinct Accept headers whose negotiation is kept (clients send a handful; the rest are negotiated each time). */
const ACCEPT_CACHE_MAX = 64;

/**
 * Apollo's choice of content type for a single result (chooseContentTypeForSingleResultResponse), kept per Accept
 * value: JSON without an Accept header; null when the header allows no JSON type, which Apollo answers 406. One per
 * gateway (ApolloSetup.contentTypes), asked by the pipeline's plugin and by the direct path.
 */
export class SingleResultTypes {
  private readonly kept = new Map<string, string | null>();

  of(accept: string | undefined): string | null {
    if (!accept) return SINGLE_RESULT_TYPES[0]!;
    let type = this.kept.get(accept);
    if (type === undefined) {
      type = new Negotiator({ headers: { accept } }).mediaType(SINGLE_RESULT_TYPES) ?? null;
      if (this.kept.size < ACCEPT_CACHE_MAX) this.kept.set(accept, type);
    }
    return type;
  }
}

/** An HTTP answer as Apollo Server 5.5 would give it: status, headers (in Apollo's order), and the result to write. */
export interface HttpAnswer {
  readonly status: number;
  readonly headers: HeaderMap;
  readonly result: {
    errors: GraphQLFormattedError[] | undefined;
    data?: unknown;
    extensions?: Record<string, unknown> | undefined;
  };
}

/** What the HTTP presenter reads of Apollo's options (src/execution/apollo.ts ApolloSetup.options, the same object). */
export interface ApolloErrorOptions {
  /** Apollo calls it with two arguments; the presenter adds the operation's request id, for the log. */
  readonly formatError: (formatted: GraphQLFormattedError, error: unknown, requestId?: string) => GraphQLFormattedError;
  readonly includeStacktraceInErrorResponses: boolean;
}

interface Head {
  status: number | undefined;
  headers: HeaderMap | undefined;
}

/**
 * POST /graphql's answers, made as Apollo Server 5.5 makes them (requestPipeline.js, errorNormalize.js,
 * internalErrorClasses.js; @apollo/server is pinned exactly for this), so that the direct path and Apollo's own
 * pipeline answer byte for byte alike (test/server/direct-path.test.ts): a refused document is Apollo's
 * GRAPHQL_PARSE_FAILED or GRAPHQL_VALIDATION_FAILED (400), an operation that cannot be picked its
 * OPERATION_RESOLUTION_FAILURE (400), an admission refusal its status (src/execution/present.ts forHttp), a
 * subscription BAD_REQUEST (400: it runs over WebSocket and SSE only), a variable error BAD_USER_INPUT (400); every
 * answer but an authentication failure carries the gateway's plugins' effects (cache-control, warnings), and with
 * tracing on the operation span is named and its error codes recorded.
 */
export class HttpPresenter implements Presenter<HttpAnswer> {
  constructor(
    private readonly apollo: ApolloErrorOptions,
    private readonly tracing: boolean,
  ) {}

  picked(operation: OperationTypeNode, name: string | null): void {
    if (this.tracing) nameOperationSpan(operation, name);
  }

  refused(stage: RefusalStage, errors: readonly GraphQLError[], context: GraphQLContext | undefined): HttpAnswer {
    const apolloErrors =
      stage === 'operation'
        ? errors.map((e) => new OperationResolutionError(e))
        : stage === 'admit' || stage === 'allow' || stage === 'variables'
          ? errors.map(forHttp)
          : documentRefusal(stage, errors);
    return this.errorResult(apolloErrors, context);
  }

  /** requestPipeline.js after execute: errors marked, reported to the span, formatted; the 400 of a variable error. */
  executed(result: ExecutionResult, context: GraphQLContext): HttpAnswer {
    const head: Head = { status: undefined, headers: undefined };
    let errors: GraphQLFormattedError[] | undefined;
    if (result.errors) {
      const marked = result.errors.map(markedVariableError);
      if (this.tracing) recordOperationErrors(marked);
      errors = this.formatErrors(marked, head, context.requestId);
      // Apollo 5's status400ForVariableCoercionErrors, on by default and not set by the gateway.
      if (marked.length && result.data === undefined && !head.status) head.status = 400;
    }
    return this.willSend(head, { errors, data: result.data, extensions: result.extensions }, context);
  }

  threw(err: unknown, context: GraphQLContext): HttpAnswer {
    return this.errorResult([thrown(ensureGraphQLError(err))], context);
  }

  /**
   * ApolloServer.errorResponse: a failure outside the request pipeline (the context, so authentication, failed; the
   * result could not be serialized): formatted, its own status (else 500), no plugin's effect; an unexpected one logged
   * with the request's id, which the answer's X-Request-Id carries.
   */
  failure(err: unknown, contentType: string, requestId: string, prefix = ''): HttpAnswer {
    const head: Head = { status: undefined, headers: undefined };
    const errors = this.formatErrors([thrown(ensureGraphQLError(err, prefix))], head, requestId);
    const headers = head.headers ?? new HeaderMap();
    headers.set('content-type', contentType);
    return { status: head.status ?? 500, headers, result: { errors } };
  }

  /** requestPipeline.js sendErrorResponse: errors only, status 500 unless an error sets one. */
  private errorResult(errors: readonly GraphQLError[], context: GraphQLContext | undefined): HttpAnswer {
    const head: Head = { status: undefined, headers: undefined };
    if (this.tracing) recordOperationErrors(errors);
    const formatted = this.formatErrors(errors, head, context?.requestId);
    head.status ??= 500;
    return this.willSend(head, { errors: formatted, data: undefined, extensions: undefined }, context);
  }

  /** The willSendResponse hooks of the gateway's plugins: cache-control (noStorePlugin) and warnings (warningsPlugin). */
  private willSend(head: Head, result: HttpAnswer['result'], context: GraphQLContext | undefined): HttpAnswer {
    const headers = (head.headers ??= new HeaderMap());
    headers.set('cache-control', noStoreValue(headers.get('cache-control')));
    const warnings = context?.warnings;
    if (warnings?.length) result.extensions = { ...result.extensions, warnings: [...warnings] };
    return { status: head.status ?? 200, headers, result };
  }

  /** errorNormalize.js normalizeAndFormatErrors with the gateway's formatError. */
  private formatErrors(errors: readonly GraphQLError[], head: Head, requestId?: string): GraphQLFormattedError[] {
    const { formatError, includeStacktraceInErrorResponses } = this.apollo;
    const enrich = (maybeError: unknown): GraphQLFormattedError => {
      const graphqlError = ensureGraphQLError(maybeError);
      const extensions: Record<string, unknown> = {
        ...graphqlError.extensions,
        code: graphqlError.extensions.code ?? ErrorCode.INTERNAL_SERVER_ERROR,
      };
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
        return formatError(enrich(error), error, requestId);
      } catch (formattingError) {
        if (includeStacktraceInErrorResponses) return enrich(formattingError);
        return { message: INTERNAL_ERROR_MESSAGE, extensions: { code: ErrorCode.INTERNAL_SERVER_ERROR } };
      }
    });
  }
}

/**
 * A document's refusal named by the stage that refused it, as Apollo names it (on every transport): a text that does
 * not parse is GRAPHQL_PARSE_FAILED, a document that does not validate (graphql-js's rules, the limits, the
 * introspection policy) GRAPHQL_VALIDATION_FAILED. graphql-js's own errors carry no code; without this one, they
 * would read as INTERNAL_SERVER_ERROR over HTTP and carry no code at all over graphql-ws and SSE. An error that has a
 * code keeps it (a limit's, GRAPHQL_VALIDATION_FAILED, even when the parse refused). `http`: with
 * Apollo's status (400) in `extensions.http`, which HTTP's formatting takes out; the streaming transports write the
 * errors as they are, so theirs carry none. Other stages' errors are returned as they are.
 */
export function documentRefusal(
  stage: RefusalStage,
  errors: readonly GraphQLError[],
  http = true,
): readonly GraphQLError[] {
  if (stage === 'parse') return errors.map((e) => new ApolloSyntaxError(e, http));
  if (stage === 'validate') return errors.map((e) => new ApolloValidationError(e, http));
  return errors;
}

function isPartialHead(x: unknown): boolean {
  return (
    !!x &&
    typeof x === 'object' &&
    (!('status' in x) || typeof x.status === 'number') &&
    (!('headers' in x) || x.headers instanceof Map)
  );
}

/** errorNormalize.js ensureGraphQLError: Apollo's error of a thrown value, with its prefix for one not a GraphQLError. */
export function ensureGraphQLError(maybeError: unknown, prefix = ''): GraphQLError {
  const error =
    maybeError instanceof Error ? maybeError : new GraphQLError('Unexpected error value: ' + String(maybeError));
  return error instanceof GraphQLError ? error : new GraphQLError(prefix + error.message, { originalError: error });
}

/**
 * requestPipeline.js: a variable error of graphql-js's (no code of its own yet) becomes BAD_USER_INPUT. Over HTTP after
 * execute, and on the streaming transports, which coerce the variables in the run (`variables: 'in-run'`).
 */
function markedVariableError(error: GraphQLError): GraphQLError {
  return isBadUserInputGraphQLError(error) && error.extensions?.code == null ? new UserInputError(error) : error;
}

/** requestPipeline.js: graphql-js's variable errors, by their variable definition and their words. */
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

// Apollo's error classes (internalErrorClasses.js), which it does not export: the same message, code, `http` and
// original error, so the same formatted error and status.
export class UserInputError extends GraphQLError {
  constructor(error: GraphQLError) {
    super(error.message, {
      nodes: error.nodes,
      originalError: error.originalError ?? error,
      extensions: { ...error.extensions, code: ErrorCode.BAD_USER_INPUT },
    });
    this.name = 'UserInputError';
  }
}

class ApolloSyntaxError extends GraphQLError {
  constructor(error: GraphQLError, http: boolean) {
    super(error.message, {
      source: error.source,
      positions: error.positions,
      extensions: {
        ...(http ? { http: { status: 400, headers: new HeaderMap() } } : {}),
        ...error.extensions,
        // A limit's refusal at the parse (GRAPHQL_MAX_TOKENS) has its own code already.
        code: error.extensions.code ?? ApolloServerErrorCode.GRAPHQL_PARSE_FAILED,
      },
      originalError: error,
    });
    this.name = 'SyntaxError';
  }
}

class ApolloValidationError extends GraphQLError {
  constructor(error: GraphQLError, http: boolean) {
    super(error.message, {
      nodes: error.nodes,
      extensions: {
        ...(http ? { http: { status: 400, headers: new HeaderMap() } } : {}),
        ...error.extensions,
        code: error.extensions.code ?? ApolloServerErrorCode.GRAPHQL_VALIDATION_FAILED,
      },
      originalError: error.originalError ?? error,
    });
    this.name = 'ValidationError';
  }
}

class OperationResolutionError extends GraphQLError {
  constructor(error: GraphQLError) {
    super(error.message, {
      nodes: error.nodes,
      originalError: error.originalError ?? error,
      extensions: {
        http: { status: 400, headers: new HeaderMap() },
        ...error.extensions,
        code: ApolloServerErrorCode.OPERATION_RESOLUTION_FAILURE,
      },
    });
    this.name = 'OperationResolutionError';
  }
}

/** What a streaming transport (graphql-ws, graphql-sse) gets of an operation: why it was refused, its result, or its stream. */
export type StreamOutcome =
  | { readonly refused: readonly GraphQLError[]; readonly stage: RefusalStage }
  /** `result` masked and with its warnings, each unexpected error logged once. */
  | { readonly result: ExecutionResult; readonly ran: Ran | undefined }
  | { readonly stream: ResultStream; readonly ran: Ran };

/**
 * The streaming transports' presentation: refusals as graphql-ws and graphql-sse send them (every stage before the run
 * refuses with an expected code, a document's parse and validation named as over HTTP: `documentRefusal`), a query's
 * or mutation's result masked and with its warnings (`deliverable`), a subscription's stream as it is (each result is
 * masked as it is written).
 */
export function streamPresenter(logger: Logger): Presenter<StreamOutcome> {
  return {
    refused: (stage, errors) => ({ refused: documentRefusal(stage, errors, false), stage }),
    executed: (raw, context, ran) => ({ result: deliverable(raw, context, logger), ran }),
    subscribed: (stream, _context, ran) => ({ stream, ran }),
    threw: (err) => {
      throw err;
    },
  };
}
