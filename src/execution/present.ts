// The *present* stage of the execution pipeline (docs/decisions/044): what every transport does to a result before
// it is written. Errors are masked by one rule, warnings added by one rule, and the cache-control answer is one value.
import { HeaderMap } from '@apollo/server';
import { ApolloServerErrorCode, unwrapResolverError } from '@apollo/server/errors';
import { GraphQLError, type ExecutionResult, type GraphQLFormattedError } from 'graphql';
import { ErrorCode } from '../errors.js';
import { RateLimitedError } from '../ratelimit/buckets.js';
import type { GraphQLContext } from '../graphql/context.js';
import type { Logger } from '../logger.js';

/** Error codes that are the client's to see as they are (Apollo's own request errors included). */
const EXPECTED_CODES = new Set<string>([
  ...Object.values(ErrorCode),
  ApolloServerErrorCode.GRAPHQL_PARSE_FAILED,
  ApolloServerErrorCode.GRAPHQL_VALIDATION_FAILED,
  ApolloServerErrorCode.OPERATION_RESOLUTION_FAILURE,
  ApolloServerErrorCode.PERSISTED_QUERY_NOT_FOUND,
  ApolloServerErrorCode.PERSISTED_QUERY_NOT_SUPPORTED,
]);

/**
 * One masking rule for HTTP (Apollo's formatError, and the planned path) and the streaming transports: expected errors
 * pass as they are; anything else reaches the client as INTERNAL_SERVER_ERROR and the log in full.
 */
export function formatError(formatted: GraphQLFormattedError, error: unknown, logger: Logger, hideSuggestions = false): GraphQLFormattedError {
  const code = formatted.extensions?.code;
  if (typeof code === 'string' && EXPECTED_CODES.has(code)) {
    const shown = withoutEchoedValue(formatted, error);
    return hideSuggestions ? withoutSuggestions(shown) : shown;
  }
  const original = unwrapResolverError(error);
  // graphql-js's own errors (validation, coercion) carry no original error and no code.
  if (original instanceof GraphQLError && !original.originalError && !code) return formatted;
  logger.error({ err: original }, 'unexpected error in a GraphQL operation');
  return { message: 'Internal server error', locations: formatted.locations, path: formatted.path, extensions: { code: ErrorCode.INTERNAL_SERVER_ERROR } };
}

const INVALID_VARIABLE = /^Variable "\$([^"]+)" got invalid value /;
const SUGGESTION = / ?Did you mean [^?]*\?/g;

/**
 * The message without graphql-js's "Did you mean …?" (introspection off). Apollo's own pipeline coerces variables
 * without graphql-js's hideSuggestions, so its BAD_USER_INPUT for an enum value would still name the schema's values.
 */
function withoutSuggestions(formatted: GraphQLFormattedError): GraphQLFormattedError {
  return formatted.message.includes('Did you mean') ? { ...formatted, message: formatted.message.replace(SUGGESTION, '') } : formatted;
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
 * What a streaming transport sends for `result`: the operation's warnings added (as over HTTP), and errors masked
 * like over HTTP (unexpected ones become INTERNAL_SERVER_ERROR for the client, and the log in full). Unchanged
 * results are returned as they are; a masked one is kept per result object, so the subscribers sharing one
 * execution (src/execution/shared.ts) share its masking too, logged once.
 */
export function deliverable(result: ExecutionResult, context: GraphQLContext | undefined, logger: Logger): ExecutionResult {
  const warned = withWarnings(result, context);
  const errors = warned.errors;
  if (!errors?.length) return warned;
  const known = warned === result ? masked.get(result) : undefined;
  if (known) return known;
  const out = { ...warned, errors: errors.map((e) => formatError(e.toJSON(), e, logger)) as unknown as GraphQLError[] };
  if (warned === result) masked.set(result, out);
  return out;
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
 * 429 with `Retry-After` for RATE_LIMITED, 403 for FORBIDDEN, 400 for a limit. Over HTTP a refused operation is a refused request;
 * the streaming transports send the same error without a status.
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
