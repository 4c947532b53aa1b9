import { HeaderMap, type ApolloServerPlugin } from '@apollo/server';
import { GraphQLError, type DocumentNode, type GraphQLSchema, type OperationDefinitionNode } from 'graphql';
import type { GraphQLContext } from '../graphql/context.js';
import { RateLimitedError, type RateLimits } from '../ratelimit/buckets.js';
import { operationCost } from '../ratelimit/cost.js';
import type { Caller } from '../caller.js';

/**
 * Spends an operation's cost before it runs, for every transport. Returns null at once when no bucket is
 * limited (the common case costs nothing); otherwise the RATE_LIMITED error, or null when admitted.
 */
export function admitOperation(
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

/**
 * Over HTTP a refused operation is a refused request: nothing of it runs, and Apollo answers 429 with
 * `Retry-After` (the `http` extension is Apollo's way to set status and headers from an error; it is
 * removed before the response is written).
 */
export function rateLimitPlugin(limits: RateLimits): ApolloServerPlugin<GraphQLContext> {
  return {
    async requestDidStart() {
      if (!limits.limited('creations') && !limits.limited('reads')) return;
      return {
        async didResolveOperation({ contextValue, schema, document, operation, request }) {
          if (!operation) return;
          const refused = await admitOperation(limits, schema, contextValue.caller, document, operation, request.variables);
          if (!refused) return;
          throw new GraphQLError(refused.message, {
            extensions: {
              ...refused.extensions,
              http: { status: 429, headers: new HeaderMap([['retry-after', String(refused.retryAfterSeconds)]]) },
            },
          });
        },
      };
    },
  };
}
