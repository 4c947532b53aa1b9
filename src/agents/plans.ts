import type { Caller } from '../auth/caller.js';
import { ErrorCode, GatewayError } from '../errors.js';
import type { Logger } from '../logger.js';
import {
  MAX_OPEN_PLAN_CHARS_PER_APP,
  MAX_OPEN_PLANS_PER_APP,
  type AgentPlanRow,
  type AgentPlanRows,
} from '../store/agent-plans.js';
import { approvable, mayApprove, type Approvable } from './approvers.js';

export type AgentPlanStatus = 'pending' | 'approved' | 'executing' | 'succeeded' | 'failed' | 'unknown' | 'declined';

/** Who approved a plan, and through what: the person through the agent's MCP client, or an approver app's approvePlan. */
export interface Approval {
  readonly by: string;
  readonly via: 'elicitation' | 'approvePlan';
  /** The plan's hash when it was approved: a plan whose requests changed since is refused. */
  readonly hash: string;
  readonly expiresAt: number;
}

export interface AgentPlan {
  readonly id: string;
  readonly owner: string;
  readonly app: string;
  readonly tool: string;
  readonly variables: Record<string, unknown>;
  /** The GraphQL document it runs, its keys filled in (execute_plan runs this text); null for plans of older versions. */
  readonly document: string | null;
  readonly operationName: string | null;
  /** The approve scopes' domains it needs: `cloud` (cloud:approve), `identity` (identity:approve). */
  readonly domains: readonly string[];
  readonly hash: string;
  readonly summary: string;
  readonly requests: unknown;
  readonly creations: number;
  readonly points: number;
  /**
   * `executing` only while the execution shows signs of life; a plan whose process stopped mid-execution reads as
   * `unknown` (see lostAt).
   */
  readonly status: AgentPlanStatus;
  /**
   * Executing, or lost (its process stopped: it reads as `unknown`): when its execution is, or was, taken for lost if
   * it shows no sign of life before then: its claim or its last heartbeat, plus IDEMPOTENCY_TAKEOVER. Null otherwise.
   */
  readonly lostAt: number | null;
  readonly approval: Approval | null;
  /** Who declined it (declinePlan), when it is declined. */
  readonly declinedBy: string | null;
  readonly outcome: unknown;
  readonly createdAt: number;
  /**
   * When its row last changed (made, approved, claimed, touched, released, finished, declined). Two reads of a plan
   * with the same status tell apart by it whether it ran between them: a person's answer to the form of an `unknown`
   * plan approves the next run only, not one after it, whose outcome may be unknown too.
   */
  readonly changedAt: number;
  /** Until when it may be approved and executed (null for plans made before plans expired). */
  readonly expiresAt: number | null;
  /**
   * Pending, approved or unknown (not run to its end), and past expiresAt: it can never run (execute_plan and
   * approvePlan say so).
   */
  readonly expired: boolean;
}

export interface AuditEntry {
  readonly at: number;
  readonly planId: string;
  readonly app: string;
  readonly actor: string;
  /** planned, approved, declined, refused, executed, replayed, failed, unknown. */
  readonly action: string;
  readonly detail: string;
}

/**
 * A plan this process claimed for execution, the approval its claim spent, and when it last wrote the plan's row (its
 * claim, then a heartbeat).
 */
export interface Claim {
  readonly plan: AgentPlan;
  readonly approval: Approval;
  touchedAt: number;
  /**
   * The request that claimed the plan, named on the lines its execution logs: the run goes on when the request's client
   * leaves before the answer, and an operator finds the call it belongs to by that id.
   */
  readonly requestId: string | undefined;
}

export type ApproveResult =
  { ok: true; plan: AgentPlan } | { ok: false; reason: 'not-found' | 'own-plan' | 'done'; message: string };

/**
 * A plan id as given (an agent's or approver's argument, the approvals page's `?plan=`) as it is stored: plan ids are
 * UUIDs, in any case; execute_plan, agentPlan, approvePlan, declinePlan and agentAudit find the same plan.
 */
export function planIdOf(text: string): string {
  return text.toLowerCase();
}

/** Most audit rows, or plans pending an approval, one read returns (a larger page size is clamped to it). */
export const MAX_AUDIT_ROWS = 1000;

/** How often a watch of the pending plans reads them again, for changes made on other replicas. */
const RECHECK_MS = 15_000;

/**
 * How long a plan may be approved and executed after it was made, at most; after that it is `expired`. Never longer
 * than IDEMPOTENCY_RETENTION (AgentPlans' lifetimeMs).
 */
const PLAN_LIFETIME_MS = 24 * 3_600_000;

/** A plan past its app's bound of open plans: RATE_LIMITED with the bound and its limit; nothing is stored. */
export class PlanBoundError extends GatewayError {
  constructor(bound: 'count' | 'chars', limit: number, message: string) {
    super(ErrorCode.RATE_LIMITED, message, { bound: `agent-plans:${bound}`, limit });
  }
}

/**
 * The plans agents make over MCP, their approvals and the audit trail (docs/decisions/060); the SQL is
 * src/store/agent-plans.ts. An approval is bound to the plan's hash, its app, its approver and an expiry; execution
 * claims an approved plan atomically, so two execute_plan calls never both run it, and keeps the outcome to replay.
 * A running execution touches its plan every third of IDEMPOTENCY_TAKEOVER, as a running idempotent call renews its
 * lease (docs/decisions/012): a plan left executing by a process that stopped (a crash, a lost replica) reads as
 * `unknown` once that long has passed without a touch, and is run again under the same idempotency keys.
 * The variables and the outcome are sealed with the gateway secret (they may hold passwords); the requests and the
 * summary are stored masked.
 */
export class AgentPlans {
  constructor(
    private readonly rows: AgentPlanRows,
    private readonly o: {
      seal: (plain: string, context: string) => string;
      open: (sealed: string, context: string) => string;
      approvalTtlMs: number;
      /**
       * MCP_APPROVAL=approver: only approvePlan approves, so a plan an agent's client approved (under elicitation,
       * before a restart or on another replica) is listed as one that needs an approval (src/agents/workflow.ts).
       */
      approverOnly: boolean;
      /** IDEMPOTENCY_TAKEOVER: how long an executing plan goes without a sign of life before it is taken for lost. */
      takeoverMs: number;
      /** IDEMPOTENCY_RETENTION: a plan lives no longer than the idempotency records of its runs are kept. */
      idempotencyRetentionMs: number;
      logger: Logger;
      now?: () => number;
    },
  ) {}

  private readonly listeners = new Set<() => void>();

  /**
   * Calls `listener` after each change of a plan made on this replica (made, approved, declined, finished): the
   * approvals page's live list. Returns the unsubscribe function.
   */
  private onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private changed(): void {
    for (const l of this.listeners) l();
  }

  /**
   * The pending plans (as `pending`), now and again after each change: at once for a change on this replica, and
   * within RECHECK_MS for one on another (the list is read again, and given only when it differs). Ends when the
   * iterator is returned.
   */
  private watchPending(first: number, of: Approvable): AsyncIterableIterator<AgentPlan[]> {
    let dirty = true;
    let wake: (() => void) | null = null;
    let done = false;
    let last = '';
    const poke = () => {
      dirty = true;
      wake?.();
    };
    const off = this.onChange(poke);
    const recheck = setInterval(poke, RECHECK_MS);
    recheck.unref();
    const iterator: AsyncIterableIterator<AgentPlan[]> = {
      next: async () => {
        for (;;) {
          // Changes that come while a list is read make one more read.
          while (!dirty && !done) await new Promise<void>((resolve) => (wake = resolve));
          wake = null;
          if (done) return { done: true, value: undefined };
          dirty = false;
          const plans = await this.pending(first, of);
          const seen = JSON.stringify(plans.map((p) => [p.id, p.status, p.hash, p.approval?.by ?? null]));
          if (seen === last) continue;
          last = seen;
          return { done: false, value: plans };
        }
      },
      return: async () => {
        done = true;
        off();
        clearInterval(recheck);
        wake?.();
        return { done: true, value: undefined };
      },
      [Symbol.asyncIterator]: () => iterator,
    };
    return iterator;
  }

  /** The clock approvals expire by. */
  now(): number {
    return (this.o.now ?? Date.now)();
  }

  /**
   * How long a new plan may be approved and executed: 24 hours, or IDEMPOTENCY_RETENTION if shorter. A run of the plan
   * begins at or after the plan was made, so the idempotency records of its requests are kept at least until the plan
   * expires: a later run (after an unknown outcome) within the plan's life replays the requests that completed rather
   * than sending them again, as it would once their records were purged (an identity check, its upstream not known to
   * honour the key, could create a second verification or link). Plans already stored keep their expiry.
   */
  private get lifetimeMs(): number {
    return Math.min(PLAN_LIFETIME_MS, this.o.idempotencyRetentionMs);
  }

  /** An executing plan last touched before this is lost: the process running it stopped. */
  private lostBefore(now: number): number {
    return now - this.o.takeoverMs;
  }

  /** Stores a new plan (its id is chosen by the caller: the plan's idempotency key derives from it). */
  async create(
    plan: Omit<
      AgentPlan,
      'status' | 'lostAt' | 'approval' | 'declinedBy' | 'outcome' | 'createdAt' | 'changedAt' | 'expiresAt' | 'expired'
    >,
  ): Promise<AgentPlan> {
    const id = plan.id;
    const at = this.now();
    const expiresAt = at + this.lifetimeMs;
    const variables = this.o.seal(JSON.stringify(plan.variables), `agent plan variables\u0000${id}`);
    const document = plan.document === null ? null : this.o.seal(plan.document, `agent plan document\u0000${id}`);
    // An identity plan's requests and summary name a person (the applicant): stored sealed, like its variables.
    const personal = plan.domains.includes('identity');
    const requests = personal
      ? this.o.seal(JSON.stringify(plan.requests), `agent plan requests\u0000${id}`)
      : JSON.stringify(plan.requests);
    const summary = personal ? this.o.seal(plan.summary, `agent plan summary\u0000${id}`) : plan.summary;
    const chars = variables.length + (document?.length ?? 0) + requests.length + summary.length;
    const held = await this.rows.insertWithinBounds({
      id,
      owner: plan.owner,
      app: plan.app,
      tool: plan.tool,
      variables,
      document,
      operation_name: plan.operationName,
      domains: plan.domains.join(','),
      bytes: chars,
      expires_at: expiresAt,
      hash: plan.hash,
      summary,
      requests,
      creations: plan.creations,
      points: plan.points,
      status: 'pending',
      approved_by: null,
      approved_via: null,
      approved_hash: null,
      approval_expires_at: null,
      outcome: null,
      created_at: at,
      updated_at: at,
    });
    if (held?.bound === 'count')
      throw new PlanBoundError(
        'count',
        MAX_OPEN_PLANS_PER_APP,
        `this app has ${held.plans} plans awaiting approval or execution, the most an app may hold (${MAX_OPEN_PLANS_PER_APP}): execute, or let expire, some of them first; nothing was planned`,
      );
    if (held?.bound === 'chars')
      throw new PlanBoundError(
        'chars',
        MAX_OPEN_PLAN_CHARS_PER_APP,
        `this app's plans awaiting approval or execution would hold ${held.chars + chars} characters, more than an app may hold (${MAX_OPEN_PLAN_CHARS_PER_APP}): execute, or let expire, some of them first; nothing was planned`,
      );
    await this.audit(
      id,
      plan.app,
      plan.app,
      'planned',
      `${plan.tool}: ${plan.creations} creation(s), hash ${plan.hash}`,
    );
    this.changed();
    return {
      ...plan,
      status: 'pending',
      lostAt: null,
      approval: null,
      declinedBy: null,
      outcome: null,
      createdAt: at,
      changedAt: at,
      expiresAt,
      expired: false,
    };
  }

  async get(id: string): Promise<AgentPlan | undefined> {
    const row = await this.rows.get(planIdOf(id));
    return row && this.fromRow(row);
  }

  /**
   * Plans that need an approval now (pending ones, unknown ones, approved ones whose approval lapsed or is no
   * approval under `approverOnly`), newest first
   * (at most `first`, 1 to MAX_AUDIT_ROWS): of these domain sets, and of these apps (undefined: every app).
   */
  private async pending(first: number, of: Approvable): Promise<AgentPlan[]> {
    if (of.domains.length === 0 || of.apps?.length === 0) return [];
    const now = this.now();
    const rows = await this.rows.pending({
      ...of,
      now,
      lostBefore: this.lostBefore(now),
      limit: Math.max(1, Math.min(first, MAX_AUDIT_ROWS)),
      approverOnly: this.o.approverOnly,
    });
    return rows.map((r) => this.fromRow(r));
  }

  /** A plan as `approver` sees it: one it may not approve reads as one that does not exist (src/agents/approvers.ts). */
  async visibleTo(approver: Caller, id: string): Promise<AgentPlan | null> {
    const plan = await this.get(id);
    return plan && mayApprove(approver, plan) ? plan : null;
  }

  /** The plans that need an approval now that `approver` may approve, newest first (at most `first`). */
  pendingFor(approver: Caller, first: number): Promise<AgentPlan[]> {
    return this.pending(first, approvable(approver));
  }

  /** pendingFor, now and again after each change (watchPending). */
  watchPendingFor(approver: Caller, first: number): AsyncIterableIterator<AgentPlan[]> {
    return this.watchPending(first, approvable(approver));
  }

  /**
   * approvePlan and declinePlan (the approvals page calls them): `approver`'s decision on plan `id`. A plan it may not
   * approve is NOT_FOUND, as one that does not exist; one that cannot be approved or declined now is CONFLICT.
   */
  async decide(approver: Caller, id: string, decision: 'approve' | 'decline', shown?: string): Promise<AgentPlan> {
    if (!(await this.visibleTo(approver, id)))
      throw new GatewayError(ErrorCode.NOT_FOUND, `no plan ${id}`, { field: 'planId' });
    const who = { owner: approver.scope, name: approver.app ?? approver.scope };
    const decided =
      decision === 'approve' ? await this.approve(id, who, 'approvePlan', shown) : await this.decline(id, who);
    if (decided.ok) return decided.plan;
    throw new GatewayError(decided.reason === 'not-found' ? ErrorCode.NOT_FOUND : ErrorCode.CONFLICT, decided.message, {
      field: 'planId',
    });
  }

  /**
   * Approves the plan as it is now (its hash), for the approval TTL. Through approvePlan the approver must be another
   * app than the plan's: an agent never approves its own plan. A plan run to its end is not approved again; one whose
   * last execution's outcome is unknown is (its approval was spent on that run, or lapsed): it stays unknown and
   * runs under the same idempotency keys, so a repeat creates nothing twice. `shown`: the status (as GraphQL names it)
   * the approver was shown; the plan is approved only while it has it (approving a pending plan runs it once, an
   * unknown one runs it again: a person who saw the one never approves the other). An unknown plan is approved only
   * with `shown` naming that state. `changedAt`: when the plan last changed as the approver was shown it (an elicited
   * form's), approved only while it is unchanged since: two runs of an unknown plan leave the same status.
   */
  async approve(
    id: string,
    approver: { owner: string; name: string },
    via: Approval['via'],
    shown?: string,
    changedAt?: number,
  ): Promise<ApproveResult> {
    const plan = await this.get(id);
    if (!plan) return { ok: false, reason: 'not-found', message: `no plan ${id}` };
    // Not readableBy (src/auth/tenancy.ts): the converse, the plan's own app is refused.
    if (via === 'approvePlan' && approver.owner === plan.owner) {
      await this.audit(
        plan.id,
        plan.app,
        approver.name,
        'refused',
        'approvePlan by the app that made the plan: an agent never approves its own plan',
      );
      return {
        ok: false,
        reason: 'own-plan',
        message: 'a plan is approved by another app than the one that made it (an agent never approves its own plan)',
      };
    }
    if (plan.expired) return { ok: false, reason: 'done', message: `plan ${plan.id} has expired: it can never run` };
    if (plan.status === 'declined')
      return { ok: false, reason: 'done', message: `plan ${plan.id} was declined: it can never run` };
    if (plan.status !== 'pending' && plan.status !== 'approved' && plan.status !== 'unknown') {
      return { ok: false, reason: 'done', message: `plan ${plan.id} is ${plan.status}: it was executed already` };
    }
    if (changedAt !== undefined && plan.changedAt !== changedAt)
      return {
        ok: false,
        reason: 'done',
        message: `plan ${plan.id} changed since it was shown: read it again; not approved`,
      };
    if (shown !== undefined && plan.status.toUpperCase() !== shown) {
      return {
        ok: false,
        reason: 'done',
        message: `plan ${plan.id} is ${plan.status.toUpperCase()} now, not ${shown} as shown: read it again; not approved`,
      };
    }
    // Approving an unknown plan sends it again, which a person decides having read that state: an approver's call
    // that names no status (an app's retry of its approval of the pending plan, its first answer lost while the plan
    // ran) would otherwise turn one approval into a second run, and a second creation upstream of a key not honoured.
    if (shown === undefined && plan.status === 'unknown') {
      return {
        ok: false,
        reason: 'done',
        message:
          `plan ${plan.id} is UNKNOWN: the outcome of its last run is unknown, and it may have been applied ` +
          'upstream; approve it to run again with status: UNKNOWN, having read it; not approved',
      };
    }
    const by = via === 'elicitation' ? `a person through ${approver.name}'s MCP client` : approver.name;
    if (plan.status === 'unknown' && plan.lostAt !== null) {
      // Its execution's process stopped, which could not say so: the plan's run is recorded as unknown here.
      const since = new Date(plan.lostAt - this.o.takeoverMs).toISOString();
      await this.audit(
        plan.id,
        plan.app,
        by,
        'unknown',
        `its execution stopped without an answer (no sign of life since ${since}; the process running it stopped): ` +
          'its outcome is unknown; approved again, it runs again under the same idempotency key',
      );
    }
    const now = this.now();
    const expiresAt = now + this.o.approvalTtlMs;
    const approval = { by, via, hash: plan.hash, expiresAt };
    if (!(await this.rows.approve(plan.id, plan.status, approval, now, this.lostBefore(now), changedAt)))
      return { ok: false, reason: 'done', message: `plan ${plan.id} was declined or executed meanwhile: not approved` };
    await this.audit(
      plan.id,
      plan.app,
      by,
      'approved',
      `via ${via}, hash ${plan.hash}, until ${new Date(expiresAt).toISOString()}${
        plan.status === 'unknown' ? ', to run again after an unknown outcome' : ''
      }`,
    );
    this.changed();
    const status = plan.status === 'unknown' ? 'unknown' : 'approved';
    return { ok: true, plan: { ...plan, status, lostAt: null, approval } };
  }

  /**
   * Declines the plan: it can never run (execute_plan says so). Only a plan not executed yet is declined, and never by
   * the app that made it (an agent that no longer wants its plan lets it expire).
   */
  private async decline(id: string, decliner: { owner: string; name: string }): Promise<ApproveResult> {
    const plan = await this.get(id);
    if (!plan) return { ok: false, reason: 'not-found', message: `no plan ${id}` };
    // Not readableBy (src/auth/tenancy.ts): the converse, the plan's own app is refused.
    if (decliner.owner === plan.owner)
      return { ok: false, reason: 'own-plan', message: 'a plan is declined by another app than the one that made it' };
    if (plan.expired) return { ok: false, reason: 'done', message: `plan ${plan.id} has expired: it can never run` };
    if (plan.status !== 'pending' && plan.status !== 'approved')
      return { ok: false, reason: 'done', message: `plan ${plan.id} is ${plan.status}: it cannot be declined now` };
    if (!(await this.rows.decline(plan.id, decliner.name, this.now())))
      return { ok: false, reason: 'done', message: `plan ${plan.id} is being executed: it cannot be declined now` };
    await this.audit(
      plan.id,
      plan.app,
      decliner.name,
      'declined',
      `via declinePlan, hash ${plan.hash}; it can never run`,
    );
    this.changed();
    return { ok: true, plan: { ...plan, status: 'declined', approval: null, declinedBy: decliner.name } };
  }

  /**
   * Claims an approved plan for execution, spending its approval (as `plan` was read, and checked, by the caller) in
   * the same write: a claim for exactly one caller while that approval holds, null for the others. The approval covers
   * this run alone: whatever becomes of it (an unknown outcome, a process that stops mid-run and is taken for lost),
   * the plan runs again only once approved again, under the same idempotency keys.
   */
  async claim(plan: AgentPlan, requestId?: string): Promise<Claim | null> {
    const { approval } = plan;
    if (approval === null) return null;
    const now = this.now();
    if (!(await this.rows.claim(plan.id, now, approval.expiresAt))) return null;
    return { plan, approval, touchedAt: now, requestId };
  }

  /**
   * Runs `run`, the execution of the plan this process claimed, touching the plan every third of the takeover time
   * while it runs: a live execution, however slow, is never taken for lost.
   */
  async running<T>(claim: Claim, run: () => Promise<T>): Promise<T> {
    const id = claim.plan.id;
    const { requestId } = claim;
    let touching: Promise<void> | null = null;
    const heartbeat = setInterval(
      () => {
        // One touch at a time: each is conditional on the one before it.
        if (touching) return;
        const at = this.now();
        touching = this.rows
          .touch(id, claim.touchedAt, at)
          .then((mine) => {
            if (mine) claim.touchedAt = at;
            else
              this.o.logger.warn({ planId: id, requestId }, 'agent plan taken over by another execution while it ran');
          })
          .catch((err: unknown) => this.o.logger.warn({ err, planId: id, requestId }, 'agent plan heartbeat failed'))
          .finally(() => (touching = null));
      },
      Math.max(10, Math.floor(this.o.takeoverMs / 3)),
    );
    heartbeat.unref();
    try {
      return await run();
    } finally {
      clearInterval(heartbeat);
      // A touch under way ends before the caller writes the outcome.
      await touching;
    }
  }

  /**
   * Gives back the claim of a run that sent nothing (refused before any upstream call): the plan is as it was before
   * the claim, approved or unknown, with the approval the claim spent. Only this execution's own claim: false, and the
   * plan left to it, when another call took it over meanwhile.
   */
  async release(claim: Claim): Promise<boolean> {
    const to = claim.plan.status === 'unknown' ? 'unknown' : 'approved';
    if (!(await this.rows.release(claim.plan.id, to, claim.touchedAt, this.now(), claim.approval.expiresAt)))
      return false;
    this.changed();
    return true;
  }

  /**
   * Stores the outcome of the run of the plan this process claimed. Only under this execution's own claim: false, and
   * nothing stored, when another call took the plan over meanwhile (this execution taken for lost): the plan's outcome
   * is that call's, which ran under the same idempotency keys.
   */
  async finish(claim: Claim, status: 'succeeded' | 'failed' | 'unknown', outcome: unknown): Promise<boolean> {
    const id = claim.plan.id;
    const sealed = this.o.seal(JSON.stringify(outcome ?? null), `agent plan outcome\u0000${id}`);
    if (!(await this.rows.finish(id, status, sealed, claim.touchedAt, this.now()))) {
      this.o.logger.warn(
        { planId: id, status, requestId: claim.requestId },
        'agent plan outcome not stored: another execution took the plan over',
      );
      return false;
    }
    this.changed();
    return true;
  }

  /**
   * One audit event: a log line and a row operators list (agentAudit). A refusal repeating the plan's last event (an
   * agent calling execute_plan again and again) is logged but adds no row: the table grows with what happens, not
   * with how often an agent asks. `requestId`: the request the event belongs to, named on the line (an execution's).
   */
  async audit(
    planId: string,
    app: string,
    actor: string,
    action: string,
    detail: string,
    requestId?: string,
  ): Promise<void> {
    const at = this.now();
    this.o.logger.info({ agentAudit: { planId, app, actor, action, detail }, requestId }, `agent plan ${action}`);
    if (action === 'refused') {
      const last = await this.rows.lastAudit(planId);
      if (last?.action === action && last.detail === detail) return;
    }
    await this.rows.insertAudit({ at, plan_id: planId, app, actor, action, detail });
  }

  /** Deletes the plans expired more than the retention before `now`, with their audit rows; how many went. */
  purgeExpired(now: number): Promise<number> {
    return this.rows.purgeExpired(now);
  }

  /** The stored plans by state (`expired`: pending, approved or unknown past their lifetime), for the metrics. */
  countByState(): Promise<Map<string, number>> {
    const now = this.now();
    return this.rows.countByState(now, this.lostBefore(now));
  }

  /** The audit trail, newest first; of one plan when `planId` is given. */
  async auditTrail(o: { planId?: string | undefined; first: number }): Promise<AuditEntry[]> {
    const planId = o.planId === undefined ? undefined : planIdOf(o.planId);
    const rows = await this.rows.auditTrail(planId, Math.max(1, Math.min(o.first, MAX_AUDIT_ROWS)));
    return rows.map((r) => ({
      at: Number(r.at),
      planId: r.plan_id,
      app: r.app,
      actor: r.actor,
      action: r.action,
      detail: r.detail,
    }));
  }

  private fromRow(row: AgentPlanRow): AgentPlan {
    const personal = row.domains.split(',').includes('identity');
    const now = this.now();
    const lostAt = row.status === 'executing' ? Number(row.updated_at) + this.o.takeoverMs : null;
    // A plan untouched for the takeover time: the process running it stopped, and its outcome is unknown.
    const status = (lostAt !== null && lostAt < now ? 'unknown' : row.status) as AgentPlanStatus;
    return {
      id: row.id,
      owner: row.owner,
      app: row.app,
      tool: row.tool,
      variables: JSON.parse(this.o.open(row.variables, `agent plan variables\u0000${row.id}`)) as Record<
        string,
        unknown
      >,
      document: row.document === null ? null : this.o.open(row.document, `agent plan document\u0000${row.id}`),
      operationName: row.operation_name,
      domains: row.domains.split(',').filter(Boolean),
      hash: row.hash,
      summary: personal ? this.o.open(row.summary, `agent plan summary\u0000${row.id}`) : row.summary,
      requests: JSON.parse(
        personal ? this.o.open(row.requests, `agent plan requests\u0000${row.id}`) : row.requests,
      ) as unknown,
      creations: row.creations,
      points: row.points,
      status,
      lostAt,
      approval:
        row.approved_by && row.approved_hash && row.approval_expires_at !== null
          ? {
              by: row.approved_by,
              via: row.approved_via as Approval['via'],
              hash: row.approved_hash,
              expiresAt: Number(row.approval_expires_at),
            }
          : null,
      declinedBy: row.status === 'declined' ? row.approved_by : null,
      outcome:
        row.outcome === null
          ? null
          : (JSON.parse(this.o.open(row.outcome, `agent plan outcome\u0000${row.id}`)) as unknown),
      createdAt: Number(row.created_at),
      changedAt: Number(row.updated_at),
      expiresAt: row.expires_at === null ? null : Number(row.expires_at),
      expired:
        row.expires_at !== null &&
        Number(row.expires_at) <= now &&
        (status === 'pending' || status === 'approved' || status === 'unknown'),
    };
  }
}

/** An agent's plan as GraphQL resolvers read it (the generated types have their own `AgentPlan`). */
export type AgentPlanModel = AgentPlan;
