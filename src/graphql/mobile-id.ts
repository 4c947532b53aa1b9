import DataLoader from 'dataloader';
import type { MobileIdAuthenticationResult, Resolvers } from '../generated/graphql.js';
import { checkAuthReqId, type MobileIdAuthentication } from '../mobile-id/service.js';
import type { GraphQLContext } from './context.js';

function toGraphQL(a: MobileIdAuthentication): MobileIdAuthenticationResult {
  if (a.outcome === 'failure') {
    const { outcome: _o, ...rest } = a;
    return { __typename: 'MobileIdAuthenticationFailed', ...rest };
  }
  const { outcome: _o, ...rest } = a;
  return { __typename: 'MobileIdAuthenticated', ...rest };
}

function loader(ctx: GraphQLContext): DataLoader<string, MobileIdAuthentication | null> {
  return ctx.loaders.custom('mobileIdAuthentication', () => new DataLoader((ids: readonly string[]) => ctx.services.mobileId.getMany(ctx.caller, ids)));
}

/**
 * An async iterator whose `return()` (graphql-ws calls it when the client completes or disconnects) aborts
 * the stream at once, even while it waits for an event that may never come.
 */
function abortable<T>(start: (signal: AbortSignal) => AsyncGenerator<T>): AsyncGenerator<T> {
  const controller = new AbortController();
  const inner = start(controller.signal);
  const outer: AsyncGenerator<T> = {
    next: () => inner.next(),
    return: async (value?: unknown) => {
      controller.abort();
      return inner.return(value as never);
    },
    throw: async (err?: unknown) => {
      controller.abort();
      return inner.throw(err);
    },
    [Symbol.asyncIterator]: () => outer,
  };
  return outer;
}

export const mobileIdResolvers: Resolvers = {
  Query: {
    mobileIdAuthentication: async (_p, { authReqId }, ctx) => {
      checkAuthReqId(authReqId);
      const a = await loader(ctx).load(authReqId);
      return a ? toGraphQL(a) : null;
    },
  },
  Subscription: {
    mobileIdAuthentication: {
      subscribe: (_p, { authReqId }, ctx) =>
        abortable(async function* (signal) {
          for await (const a of ctx.services.mobileId.watch(ctx.caller, authReqId, signal)) yield { mobileIdAuthentication: toGraphQL(a) };
        }),
    },
  },
  Mutation: {
    issueMobileIdNotificationToken: (_p, { authReqId, ttlSeconds }, ctx) =>
      ctx.services.mobileId.issueNotificationToken(ctx.caller, { authReqId: authReqId ?? null, ttlSeconds: ttlSeconds ?? null }),
    sandboxCompleteMobileIdAuthentication: (_p, { authReqId, outcome }, ctx) =>
      ctx.services.mobileId.sandboxComplete(ctx.caller, authReqId, outcome ?? 'SUCCESS'),
  },
  MobileIdAuthenticationResult: {
    __resolveType: (r) => r.__typename!,
  },
};
