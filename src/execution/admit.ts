// The *admit* stage of the execution pipeline (docs/decisions/044): after authentication (each transport's, from its
// own header or connection parameters) and before anything runs, the operation's cost, then the caller's rate limit.
// One function for HTTP (Apollo's plugin and the planned path), graphql-ws and graphql-sse.
import type { DocumentNode, GraphQLError, GraphQLSchema, OperationDefinitionNode } from 'graphql';
import type { Caller } from '../caller.js';
import { RateLimitedError, type RateLimits } from '../ratelimit/buckets.js';
import { operationCost } from '../ratelimit/cost.js';
import type { OperationLimits } from './limits.js';

/**
 * Admits an operation or refuses it whole: null when admitted (at once when nothing is limited, without a promise
 * on the common path), else the refusal: the cost limit's GRAPHQL_VALIDATION_FAILED or RATE_LIMITED. The cost runs
 * first, so an operation refused as too costly spends no rate-limit points.
 */
export type Admission = (
  caller: Caller,
  document: DocumentNode,
  operation: OperationDefinitionNode,
  variables: Record<string, unknown> | null | undefined,
) => Promise<GraphQLError | null> | GraphQLError | null;

export function createAdmission(o: { schema: GraphQLSchema; limits: OperationLimits; rateLimits: RateLimits }): Admission {
  const { schema, limits, rateLimits } = o;
  return (caller, document, operation, variables) => {
    const tooCostly = limits.checkCost(schema, document, variables);
    if (tooCostly) return tooCostly;
    return spendPoints(rateLimits, schema, caller, document, operation, variables);
  };
}

/**
 * Spends an operation's rate-limit points. Returns null at once when no bucket is limited (the common case costs
 * nothing); otherwise the RATE_LIMITED error, or null when admitted.
 */
function spendPoints(
  limits: RateLimits,
  schema: GraphQLSchema,
  caller: Caller,
  document: DocumentNode,
  operation: OperationDefinitionNode,
  variables: Record<string, unknown> | null | undefined,
): Promise<RateLimitedError | null> | null {
  if (!limits.limited('creations') && !limits.limited('reads')) return null;
  const cost = operationCost(schema, document, operation, variables);
  if (!limits.limited(cost.bucket)) return null;
  return limits.take(caller, cost.bucket, cost.points).then(
    () => null,
    (err: unknown) => {
      if (err instanceof RateLimitedError) return err;
      throw err;
    },
  );
}
