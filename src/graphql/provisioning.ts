import type { Resolvers } from '../generated/graphql.js';
import type { Provisioning, ProvisionResult } from '../provisioning/service.js';
import type { ResourceKind } from '../store/ledger.js';
import { creationPayload } from './common.js';
import type { GraphQLContext } from './context.js';
import { resumeAfter } from './subscriptions.js';

/** The resource a step of `p` created or reused, through the request's DataLoader. */
const stepResource = <K extends ResourceKind>(ctx: GraphQLContext, p: Provisioning, step: string, kind: K) =>
  ctx.loaders.ofKind(p.steps.find((s) => s.name === step)?.resourceId, kind);

const payload = (r: ProvisionResult) => creationPayload('provisioning', r);

export const provisioningResolvers: Resolvers = {
  Query: {
    provisioning: (_p, { id }, ctx) => ctx.services.provisioning.get(ctx.caller, id),
    planKafkaCluster: (_p, { input, idempotencyKey }, ctx) =>
      ctx.services.plans.planKafkaCluster(ctx.caller, input, idempotencyKey),
    planVirtualMachine: (_p, { input, idempotencyKey }, ctx) =>
      ctx.services.plans.planVirtualMachine(ctx.caller, input, idempotencyKey),
  },
  Mutation: {
    provisionKafkaCluster: async (_p, { input, idempotencyKey }, ctx) =>
      payload(await ctx.services.provisioning.provisionKafkaCluster(ctx.caller, input, idempotencyKey, ctx.logger)),
    provisionVirtualMachine: async (_p, { input, idempotencyKey }, ctx) =>
      payload(await ctx.services.provisioning.provisionVirtualMachine(ctx.caller, input, idempotencyKey, ctx.logger)),
  },
  Subscription: {
    provisioningProgress: {
      subscribe: (_p, { id, after }, ctx) => ctx.services.provisioning.watch(ctx.caller, id, resumeAfter(after, ctx)),
      resolve: (p: Provisioning) => p,
    },
  },
  Provisioning: {
    project: (p, _a, ctx) => stepResource(ctx, p, 'project', 'project'),
    kafkaCluster: (p, _a, ctx) => stepResource(ctx, p, 'kafkaCluster', 'kafka_cluster'),
    virtualMachine: (p, _a, ctx) => stepResource(ctx, p, 'virtualMachine', 'virtual_machine'),
    publicAddress: (p) => p.steps.find((s) => s.name === 'kafkaCluster' && s.state === 'DONE')?.publicAddress ?? null,
  },
  ProvisioningPlanStep: {
    resource: (s, _a, ctx) => (s.action === 'REUSE' && s.inLedger ? ctx.loaders.cloudResource(s.resourceId) : null),
  },
  ProvisioningStep: {
    resource: (s, _a, ctx) => ctx.loaders.cloudResource(s.resourceId),
  },
};
