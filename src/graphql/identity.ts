import DataLoader from 'dataloader';

import { ownerCaller } from '../auth/caller.js';
import type { EventRecord } from '../events/index.js';
import type { Resolvers } from '../generated/graphql.js';
import { completionFields } from '../identity/completions.js';
import {
  nonEmpty as checkedId,
  IdentityService,
  type IdentificationSpec,
  type VerificationSpec,
} from '../identity/service.js';
import { callbackStatus, rfmInCatalog, type VerificationResultItem } from '../identity/views.js';
import type { LedgerRecord, ResourceKind } from '../store/ledger.js';
import { creationPayload } from './common.js';
import type { GraphQLContext } from './context.js';
import { resumeAfter } from './subscriptions.js';

/**
 * The request's loader of verification results. Every `verificationResults` alias and every
 * `Verification.result` of one operation lands in the same batch: dispatch waits for setImmediate, i.e.
 * until the execution has run everything it can without network I/O (ledger reads on SQLite included),
 * instead of DataLoader's default of the current tick. See docs/decisions/004.
 */
function resultsLoader(ctx: GraphQLContext): DataLoader<string, VerificationResultItem | null> {
  return ctx.loaders.custom(
    'verificationResults',
    () =>
      new DataLoader<string, VerificationResultItem | null>(
        (ids) => ctx.services.identity.results(ctx.caller, ids, ctx),
        {
          maxBatchSize: ctx.services.config.resultsBatchSize,
          batchScheduleFn: (dispatch) => setImmediate(dispatch),
        },
      ),
  );
}

/** Verifications by the external id the app knows them by (src/identity/service.ts verificationsOf). */
function verificationsLoader(ctx: GraphQLContext): DataLoader<string, LedgerRecord | null> {
  return ctx.loaders.custom(
    'verificationsByExternalId',
    () => new DataLoader<string, LedgerRecord | null>((ids) => ctx.services.identity.verificationsOf(ctx.caller, ids)),
  );
}

function completionsLoader(ctx: GraphQLContext): DataLoader<string, EventRecord | null> {
  return ctx.loaders.custom(
    'verificationCompletions',
    () => new DataLoader<string, EventRecord | null>((ids) => ctx.services.identity.completions(ctx.caller, ids)),
  );
}

function identificationCompletionsLoader(ctx: GraphQLContext): DataLoader<string, EventRecord | null> {
  return ctx.loaders.custom(
    'identificationCompletions',
    () =>
      new DataLoader<string, EventRecord | null>((ids) =>
        ctx.services.identity.identificationCompletions.latest(ctx.caller, ids),
      ),
  );
}

const identification = (r: LedgerRecord) => r.spec as unknown as IdentificationSpec;
const verification = (r: LedgerRecord) => r.spec as unknown as VerificationSpec;

export const identityResolvers: Resolvers = {
  Query: {
    identificationCallbackUrl: (_p, { workflowId }, ctx) => {
      const wf = checkedId('workflowId', workflowId);
      return ctx.services.identity.identificationCompletions.callbackUrl(ctx.caller, wf);
    },
    identification: (_p, { id }, ctx) => ctx.loaders.ofKind(id, 'identification'),
    verificationResults: (_p, { externalIds }, ctx) => {
      const ids = ctx.services.identity.checkResultIds(externalIds);
      const loader = resultsLoader(ctx);
      // One promise per entry, not Promise.all: a batch the upstream fails nulls its own entries, each with its error,
      // never the non-null list and with it the whole operation's data. (The generated type has no promise of null for
      // an entry; graphql-js resolves each entry, null included.)
      return ids.map((id) => loader.load(id) as Promise<VerificationResultItem>);
    },
  },
  // The context goes along as each call's RequestLog: its logger, naming the request id, is made only if the call
  // writes a line (an upstream attempt that failed, an unknown outcome), not on every mutation.
  Mutation: {
    createIdentification: async (_p, { input, idempotencyKey }, ctx) => {
      const out = await ctx.services.identity.createIdentification(ctx.caller, input, idempotencyKey, ctx);
      for (const w of out.warnings ?? []) ctx.warn({ ...w, path: ['createIdentification', 'identification'] });
      return creationPayload('identification', out);
    },
    registerVerification: async (_p, { input, idempotencyKey }, ctx) => {
      const out = await ctx.services.identity.registerVerification(ctx.caller, input, idempotencyKey, ctx);
      for (const w of out.warnings ?? []) ctx.warn({ ...w, path: ['registerVerification', 'verification'] });
      return creationPayload('verification', out);
    },
    checkRfm: async (_p, { input, idempotencyKey }, ctx) => {
      const out = await ctx.services.identity.checkRfm(ctx.caller, input, idempotencyKey, ctx);
      return { ...creationPayload('result', out), inCatalog: rfmInCatalog(out.result) };
    },
  },
  Subscription: {
    identificationCompleted: {
      subscribe: (_p, { id, after }, ctx) =>
        ctx.services.identity.identificationCompletions.watch(ctx.caller, id, resumeAfter(after, ctx)),
      resolve: (event: EventRecord) => event,
    },
    verificationCompleted: {
      subscribe: (_p, { externalId, after }, ctx) =>
        ctx.services.identity.watch(ctx.caller, externalId, resumeAfter(after, ctx)),
      resolve: (event: EventRecord) => event,
    },
  },
  Identification: {
    id: (r) => r.id,
    idShort: (r, _a, ctx) => ctx.services.identity.identificationSecrets(r).idShort,
    url: (r, _a, ctx) => ctx.services.identity.identificationSecrets(r).url,
    workflowId: (r) => identification(r).workflowId,
    applicantExternalId: (r, _a, ctx) => ctx.services.identity.identificationSecrets(r).applicantExternalId,
    environment: (r) => identification(r).environment,
    linkLifetimeInMinutes: (r) => identification(r).linkLifetimeInMinutes,
    redirectUrl: (r, _a, ctx) => ctx.services.identity.identificationSecrets(r).redirectUrl,
    expiresAt: (r) => identification(r).expiresAt,
    expired: (r, _a, ctx) => ctx.services.identity.linkExpired(r),
    createdAt: (r) => r.createdAt,
    raw: (r, _a, ctx) => ctx.services.identity.identificationSecrets(r).response,
    status: async (r, _a, ctx) => {
      const event = await identificationCompletionsLoader(ctx).load(r.id);
      return event ? completionFields(ctx.services.identity.callbackBody(event)).status : null;
    },
    completion: (r, _a, ctx) => identificationCompletionsLoader(ctx).load(r.id),
    // The address belongs to the key that created the identification, the only key that can read it.
    callbackUrl: (r, _a, ctx) =>
      ctx.services.identity.identificationCompletions.callbackUrl(
        ownerCaller(r.createdBy),
        identification(r).workflowId,
      ),
  },
  IdentificationCompletion: {
    id: (e) => e.key,
    status: (e, _a, ctx) => completionFields(ctx.services.identity.callbackBody(e)).status,
    event: (e, _a, ctx) => completionFields(ctx.services.identity.callbackBody(e)).event,
    payload: (e, _a, ctx) => ctx.services.identity.callbackBody(e),
    receivedAt: (e) => e.receivedAt,
    identification: (e, _a, ctx) => ctx.loaders.ofKind(e.key, 'identification'),
  },
  Verification: {
    id: (r) => r.id,
    externalId: (r) => IdentityService.externalIdOf(r),
    workflowId: (r) => verification(r).workflowId,
    status: (r) => verification(r).status,
    jobResults: (r) => verification(r).jobResults,
    callback: (r) => verification(r).callback,
    result: (r, _a, ctx) => resultsLoader(ctx).load(IdentityService.externalIdOf(r)),
    completion: (r, _a, ctx) => completionsLoader(ctx).load(IdentityService.externalIdOf(r)),
    createdAt: (r) => r.createdAt,
    raw: (r) => r.response,
  },
  VerificationResult: {
    externalId: (item) => item.externalId,
    status: (item) => item.status,
    data: (item) => item.data,
    verification: (item, _a, ctx) => verificationsLoader(ctx).load(item.externalId),
  },
  VerificationCompletion: {
    externalId: (e) => e.key,
    status: (e, _a, ctx) => callbackStatus(ctx.services.identity.callbackBody(e)),
    payload: (e, _a, ctx) => ctx.services.identity.callbackBody(e),
    receivedAt: (e) => e.receivedAt,
    verification: (e, _a, ctx) => verificationsLoader(ctx).load(e.key),
  },
};
