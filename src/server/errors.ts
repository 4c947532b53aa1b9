import { unwrapResolverError } from '@apollo/server/errors';
import { GraphQLError, type GraphQLFormattedError } from 'graphql';
import { ErrorCode } from '../errors.js';
import type { Logger } from '../logger.js';

/** Error codes that are the client's to see as they are (Apollo's own request errors included). */
const EXPECTED_CODES = new Set<string>([
  ...Object.values(ErrorCode),
  'GRAPHQL_PARSE_FAILED',
  'GRAPHQL_VALIDATION_FAILED',
  'OPERATION_RESOLUTION_FAILURE',
  'PERSISTED_QUERY_NOT_FOUND',
  'PERSISTED_QUERY_NOT_SUPPORTED',
]);

/**
 * One masking rule for HTTP (Apollo's formatError) and WebSocket (graphql-ws onNext): expected errors
 * pass as they are; anything else reaches the client as INTERNAL_SERVER_ERROR and the log in full.
 */
export function formatError(formatted: GraphQLFormattedError, error: unknown, logger: Logger): GraphQLFormattedError {
  const code = formatted.extensions?.code;
  if (typeof code === 'string' && EXPECTED_CODES.has(code)) return withoutEchoedValue(formatted, error);
  const original = unwrapResolverError(error);
  // graphql-js's own errors (validation, coercion) carry no original error and no code.
  if (original instanceof GraphQLError && !original.originalError && !code) return formatted;
  logger.error({ err: original }, 'unexpected error in a GraphQL operation');
  return { message: 'Internal server error', locations: formatted.locations, path: formatted.path, extensions: { code: ErrorCode.INTERNAL_SERVER_ERROR } };
}

const INVALID_VARIABLE = /^Variable "\$([^"]+)" got invalid value /;

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
