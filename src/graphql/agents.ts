import type { AgentPlanModel as AgentPlan } from '../agents/plans.js';
import type { Resolvers } from '../generated/graphql.js';
import { SPENT_APPROVAL } from '../store/agent-plans.js';
import { pageSize } from './common.js';
import { PAGE_CAPS } from './pages.js';

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
    agentPlan: (_p, { id }, ctx) => ctx.services.agentPlans.visibleTo(ctx.caller, id),
    pendingAgentPlans: (_p, { first }, ctx) =>
      ctx.services.agentPlans.pendingFor(ctx.caller, pageSize('first', first, 50, PAGE_CAPS.Query.pendingAgentPlans)),
    agentAudit: async (_p, { planId, first }, ctx) =>
      (
        await ctx.services.agentPlans.auditTrail({
          planId: planId ?? undefined,
          first: pageSize('first', first, 100, PAGE_CAPS.Query.agentAudit),
        })
      ).map((e) => ({ ...e, at: new Date(e.at) })),
  },
  Mutation: {
    declinePlan: (_p, { planId }, ctx) => ctx.services.agentPlans.decide(ctx.caller, planId, 'decline'),
    approvePlan: (_p, { planId, status }, ctx) =>
      ctx.services.agentPlans.decide(ctx.caller, planId, 'approve', status ?? undefined),
  },
  Subscription: {
    pendingAgentPlansChanged: {
      subscribe: (_p, { first }, ctx) =>
        mapped(
          ctx.services.agentPlans.watchPendingFor(
            ctx.caller,
            pageSize('first', first, 50, PAGE_CAPS.Subscription.pendingAgentPlansChanged),
          ),
          (plans) => ({
            pendingAgentPlansChanged: plans,
          }),
        ),
    },
  },
  AgentPlan: {
    rateLimitPoints: (p: AgentPlan) => p.points,
    status: (p: AgentPlan) => (p.expired ? 'EXPIRED' : (p.status.toUpperCase() as 'PENDING')),
    approvedBy: (p: AgentPlan) => p.approval?.by ?? null,
    declinedBy: (p: AgentPlan) => p.declinedBy,
    expiresAt: (p: AgentPlan) => (p.expiresAt === null ? null : new Date(p.expiresAt)),
    // A spent approval (SPENT_APPROVAL) holds no longer: it has no expiry to show.
    approvalExpiresAt: (p: AgentPlan) =>
      p.approval && p.approval.expiresAt !== SPENT_APPROVAL ? new Date(p.approval.expiresAt) : null,
    createdAt: (p: AgentPlan) => new Date(p.createdAt),
  },
};
