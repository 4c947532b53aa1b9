// The *admit* stage of the execution pipeline (docs/decisions/044): after authentication (each transport's, from its
// own header or connection parameters) and before anything runs, the app's scopes (docs/decisions/046), the
// operation's cost, then the caller's rate limit.
// One function for HTTP (Apollo's plugin and the direct path), graphql-ws and graphql-sse.
import type { DocumentNode, GraphQLError, GraphQLSchema, OperationDefinitionNode } from 'graphql';

import { ALL_GRANTS, type Caller } from '../auth/caller.js';
import { RateLimitedError, type RateLimits } from '../ratelimit/buckets.js';
import { operationCost, withDefaults } from '../ratelimit/cost.js';
import type { OperationLimits } from './limits.js';
import { scopeCheck } from './scopes.js';

/**
 * Admits an operation or refuses it whole: null when admitted (at once when nothing is limited, without a promise
 * on the common path), else the refusal: FORBIDDEN (a field the app's scopes do not cover), the cost limit's
 * GRAPHQL_VALIDATION_FAILED or RATE_LIMITED. The scopes and the cost come first, so an operation refused for either
 * spends no rate-limit points.
 */
export type Admission = (
  caller: Caller,
  document: DocumentNode,
  operation: OperationDefinitionNode,
  variables: Record<string, unknown> | null | undefined,
  /**
   * Whether the run stage will take the variables, for a transport that coerces them in the run: asked only before
   * points are spent, and an operation whose variables it will refuse is admitted without spending any (bad input
   * spends nothing; the run answers it).
   */
  runTakes?: () => boolean,
) => Promise<GraphQLError | null> | GraphQLError | null;

export function createAdmission(o: {
  schema: GraphQLSchema;
  limits: OperationLimits;
  rateLimits: RateLimits;
  /** Told of every operation an app sends, admitted or not (the operator's list of apps and their last activity). */
  seen?: (caller: Caller) => void;
}): Admission {
  const { schema, limits, rateLimits, seen } = o;
  const scopes = scopeCheck(schema);
  return (caller, document, operation, variables, runTakes) => {
    seen?.(caller);
    // An app with every scope (an operator's key, the open sandbox gateway) needs no look at the operation.
    const forbidden = caller.grants === ALL_GRANTS ? null : scopes(caller.grants, document, operation);
    if (forbidden) return forbidden;
    // The variables as the run reads them (a left-out one at its declared default), for the cost and the points.
    const read = withDefaults(operation, variables);
    const tooCostly = limits.checkCost(schema, document, read);
    if (tooCostly) return tooCostly;
    return spendPoints(rateLimits, schema, caller, document, operation, read, runTakes);
  };
}

/**
 * Spends an operation's rate-limit points. Returns null at once when no bucket is limited (the common case costs
 * nothing) or when the run will refuse the variables (nothing runs, nothing is spent); otherwise the RATE_LIMITED
 * error, or null when admitted.
 */
function spendPoints(
  limits: RateLimits,
  schema: GraphQLSchema,
  caller: Caller,
  document: DocumentNode,
  operation: OperationDefinitionNode,
  variables: Record<string, unknown> | null | undefined,
  runTakes: (() => boolean) | undefined,
): Promise<RateLimitedError | null> | null {
  if (!limits.limited('creations') && !limits.limited('reads')) return null;
  const cost = operationCost(schema, document, operation, variables);
  if (!limits.limited(cost.bucket)) return null;
  if (runTakes && !runTakes()) return null;
  return limits.take(caller, cost.bucket, cost.points).then(
    () => null,
    (err: unknown) => {
      if (err instanceof RateLimitedError) return err;
      throw err;
    },
  );
}
