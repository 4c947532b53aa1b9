import { approvable, mayApprove } from '../agents/approvers.js';
import type { AgentPlanModel as AgentPlan } from '../agents/plans.js';
import { ErrorCode, GatewayError } from '../errors.js';
import type { Resolvers } from '../generated/graphql.js';

/** `source`'s values through `map`, ending `source` when the subscription ends. */
function mapped<T, U>(source: AsyncIterableIterator<T>, map: (value: T) => U): AsyncIterableIterator<U> {
  const out: AsyncIterableIterator<U> = {
    next: async () => {
      const r = await source.next();
      return r.done ? { done: true, value: undefined } : { done: false, value: map(r.value) };
    },
    return: async () => {
      await source.return?.();
      return { done: true, value: undefined };
    },
    [Symbol.asyncIterator]: () => out,
  };
  return out;
}

/** The agents' plans (docs/decisions/060): what an approver reads and approves, and the operators' audit trail. */
export const agentResolvers: Resolvers = {
  Query: {
    // A plan this approver may not approve reads as one that does not exist (src/agents/approvers.ts).
    agentPlan: (_p, { id }, ctx) =>
      ctx.services.agentPlans.get(id).then((p) => (p && mayApprove(ctx.caller, p) ? p : null)),
    pendingAgentPlans: (_p, { first }, ctx) =>
      ctx.services.agentPlans.pending(Math.max(1, Math.min(first ?? 50, 1000)), approvable(ctx.caller)),
    agentAudit: async (_p, { planId, first }, ctx) =>
      (await ctx.services.agentPlans.auditTrail({ planId: planId ?? undefined, first: first ?? 100 })).map((e) => ({
        ...e,
        at: new Date(e.at),
      })),
  },
  Mutation: {
    declinePlan: async (_p, { planId }, ctx) => {
      const plan = await ctx.services.agentPlans.get(planId);
      if (!plan || !mayApprove(ctx.caller, plan))
        throw new GatewayError(ErrorCode.NOT_FOUND, `no plan ${planId}`, { field: 'planId' });
      const declined = await ctx.services.agentPlans.decline(planId, {
        owner: ctx.caller.scope,
        name: ctx.caller.app ?? ctx.caller.scope,
      });
      if (declined.ok) return declined.plan;
      throw new GatewayError(
        declined.reason === 'not-found' ? ErrorCode.NOT_FOUND : ErrorCode.CONFLICT,
        declined.message,
        { field: 'planId' },
      );
    },
    approvePlan: async (_p, { planId }, ctx) => {
      const plan = await ctx.services.agentPlans.get(planId);
      if (!plan || !mayApprove(ctx.caller, plan))
        throw new GatewayError(ErrorCode.NOT_FOUND, `no plan ${planId}`, { field: 'planId' });
      const approved = await ctx.services.agentPlans.approve(
        planId,
        { owner: ctx.caller.scope, name: ctx.caller.app ?? ctx.caller.scope },
        'approvePlan',
      );
      if (approved.ok) return approved.plan;
      throw new GatewayError(
        approved.reason === 'not-found' ? ErrorCode.NOT_FOUND : ErrorCode.CONFLICT,
        approved.message,
        { field: 'planId' },
      );
    },
  },
  Subscription: {
    pendingAgentPlansChanged: {
      subscribe: (_p, { first }, ctx) =>
        mapped(
          ctx.services.agentPlans.watchPending(Math.max(1, Math.min(first ?? 50, 1000)), approvable(ctx.caller)),
          (plans) => ({ pendingAgentPlansChanged: plans }),
        ),
    },
  },
  AgentPlan: {
    rateLimitPoints: (p: AgentPlan) => p.points,
    status: (p: AgentPlan) => (p.expired ? 'EXPIRED' : (p.status.toUpperCase() as 'PENDING')),
    approvedBy: (p: AgentPlan) => p.approval?.by ?? null,
    declinedBy: (p: AgentPlan) => p.declinedBy,
    expiresAt: (p: AgentPlan) => (p.expiresAt === null ? null : new Date(p.expiresAt)),
    approvalExpiresAt: (p: AgentPlan) => (p.approval ? new Date(p.approval.expiresAt) : null),
    createdAt: (p: AgentPlan) => new Date(p.createdAt),
  },
};
