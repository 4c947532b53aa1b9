import type { ApolloServerPlugin } from '@apollo/server';
import type { ExecutionResult } from 'graphql';
import type { GraphQLContext } from '../graphql/context.js';

/**
 * A result with the operation's warnings added as `extensions.warnings` (unchanged when there are none).
 * Warnings are not errors: the data is complete as far as the gateway knows it (DESIGN.md, Errors).
 */
export function withWarnings<T extends ExecutionResult>(result: T, context: GraphQLContext | undefined): T {
  const warnings = context?.warnings;
  if (!warnings?.length) return result;
  return { ...result, extensions: { ...result.extensions, warnings: [...warnings] } };
}

/** Apollo Server plugin: HTTP responses carry `extensions.warnings`. */
export function warningsPlugin(): ApolloServerPlugin<GraphQLContext> {
  return {
    async requestDidStart() {
      return {
        async willSendResponse({ response, contextValue }) {
          if (response.body.kind !== 'single') return;
          const warnings = contextValue.warnings;
          if (!warnings?.length) return;
          const result = response.body.singleResult;
          result.extensions = { ...result.extensions, warnings: [...warnings] };
        },
      };
    },
  };
}
