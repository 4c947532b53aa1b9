import DataLoader from 'dataloader';

import type { EventRecord } from '../events/index.js';
import type { MobileIdAuthenticationResult, Resolvers } from '../generated/graphql.js';
import { checkAuthReqId } from '../mobile-id/stored.js';
import type { MobileIdAuthentication } from '../mobile-id/views.js';
import { pageSize } from './common.js';
import type { GraphQLContext } from './context.js';
import { PAGE_CAPS } from './pages.js';
import { resumeAfter } from './subscriptions.js';

/** The GraphQL type of a view, from its outcome (MobileIdAuthenticationResult's resolveType). */
function typeNameOf(a: MobileIdAuthentication): 'MobileIdAuthenticationFailed' | 'MobileIdAuthenticated' {
  return a.outcome === 'failure' ? 'MobileIdAuthenticationFailed' : 'MobileIdAuthenticated';
}

/**
 * The view itself, read field by field by GraphQL: not a copy, which would read (so open) the sealed tokens the view
 * opens only when a selection asks for them (src/mobile-id/views.ts). Not an object over it either
 * (`Object.create(view)`, as before): a prototype per view cost V8 a transition per delivery (decision 062);
 * the union's type comes from the outcome instead of a `__typename` set on it.
 */
function toGraphQL(a: MobileIdAuthentication): MobileIdAuthenticationResult {
  return a as unknown as MobileIdAuthenticationResult;
}

function loader(ctx: GraphQLContext): DataLoader<string, MobileIdAuthentication | null> {
  return ctx.loaders.custom(
    'mobileIdAuthentication',
    () => new DataLoader((ids: readonly string[]) => ctx.services.mobileId.getMany(ctx.caller, ids)),
  );
}

export const mobileIdResolvers: Resolvers = {
  Query: {
    mobileIdAuthentication: async (_p, { authReqId }, ctx) => {
      checkAuthReqId(authReqId);
      const a = await loader(ctx).load(authReqId);
      return a ? toGraphQL(a) : null;
    },
    mobileIdRejections: (_p, { first, authReqId }, ctx) =>
      ctx.services.mobileId.rejections(ctx.caller, {
        first: pageSize('first', first, 50, PAGE_CAPS.Query.mobileIdRejections),
        authReqId: authReqId ?? null,
      }),
  },
  Subscription: {
    mobileIdAuthentication: {
      // `resolve` maps each event, rather than a generator around the stream: one suspended generator less per
      // waiting subscription (bench scenario 5), and the mapping (which opens the sealed tokens) runs once per event
      // for all identical subscriptions, whose execution is shared (docs/decisions/030).
      subscribe: (_p, { authReqId, after }, ctx) =>
        ctx.services.mobileId.watch(ctx.caller, authReqId, resumeAfter(after, ctx)),
      resolve: (event: EventRecord, _a: unknown, ctx: GraphQLContext) =>
        toGraphQL(ctx.services.mobileId.authentication(event)),
    },
  },
  Mutation: {
    issueMobileIdNotificationToken: (_p, { authReqId, ttlSeconds }, ctx) =>
      ctx.services.mobileId.issueNotificationToken(ctx.caller, {
        authReqId: authReqId ?? null,
        ttlSeconds: ttlSeconds ?? null,
      }),
    sandboxCompleteMobileIdAuthentication: (_p, { authReqId, outcome }, ctx) =>
      ctx.services.mobileId.sandboxComplete(ctx.caller, authReqId, outcome ?? 'SUCCESS'),
  },
  MobileIdAuthenticationResult: {
    __resolveType: (r) => typeNameOf(r as unknown as MobileIdAuthentication),
  },
};
