// Who may approve an agent's plan (docs/decisions/060), decided in this one place for approvePlan, agentPlan,
// pendingAgentPlans and the approvals page: the approve scope of every kind of write the plan makes (`cloud:approve`
// for cloud creations, `identity:approve` for identity checks, which carry personal data), and, when the apps file
// says so (`approves`), only the plans of the apps it names. To anyone else a plan reads as one that does not exist.
import type { Caller, Scope } from '../auth/caller.js';
import type { WriteDomain } from './writes.js';

const APPROVE_SCOPE: Readonly<Record<WriteDomain, Scope>> = {
  cloud: 'cloud:approve',
  identity: 'identity:approve',
};

/** The approve scope a plan of `domain` needs. */
export function approveScopeOf(domain: string): Scope {
  return APPROVE_SCOPE[domain as WriteDomain] ?? 'cloud:approve';
}

/** Whether `caller` may see and approve (or decline) a plan of `app` whose writes are of `domains`. */
export function mayApprove(
  caller: Caller,
  plan: { readonly app: string; readonly domains: readonly string[] },
): boolean {
  if (plan.domains.length === 0) return false;
  if (!plan.domains.every((d) => caller.grants.has(approveScopeOf(d)))) return false;
  return caller.approves === undefined || caller.approves.includes(plan.app);
}

/**
 * What `caller` may approve, as the store filters pending plans: the domain sets, the apps (undefined: every app), and
 * never its own (`notOwner`: a plan is approved by another app than the one that made it).
 */
export function approvable(caller: Caller): Approvable {
  const held = (Object.keys(APPROVE_SCOPE) as WriteDomain[]).filter((d) => caller.grants.has(APPROVE_SCOPE[d]));
  // Stored as the sorted, comma-joined domains of the plan: every non-empty subset of those held.
  const domains: string[] = [];
  for (let mask = 1; mask < 1 << held.length; mask++)
    domains.push(
      held
        .filter((_, i) => mask & (1 << i))
        .sort()
        .join(','),
    );
  return { domains, apps: caller.approves, notOwner: caller.scope };
}

/** The pending plans an approver may approve, as the store filters them (approvable). */
export interface Approvable {
  domains: readonly string[];
  apps: readonly string[] | undefined;
  notOwner: string;
}
