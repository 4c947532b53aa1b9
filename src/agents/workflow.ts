// MCP_MUTATIONS=approve (docs/decisions/060): a creation makes a plan (its exact requests, a hash of them, the
// creations and rate-limit points, a summary a person reads) and nothing else; a plan runs once, only with an approval
// bound to the plan's hash, its app, its approver and an expiry. An approval comes from the person, through the agent's
// client (the transport asks; src/server/mcp/approval.ts elicits it), or from another app holding the plan's approve
// scope (`cloud:approve`, `identity:approve`: approvePlan, the approvals page). Execution sends the operation with an
// idempotency key derived from the plan id, through the execution pipeline like every operation.
import { randomUUID } from 'node:crypto';
import { getOperationAST, GraphQLError, Kind, parse, type DocumentNode, type GraphQLFormattedError } from 'graphql';

import type { Caller } from '../auth/caller.js';
import { readableBy } from '../auth/tenancy.js';
import { approveScopeOf } from './approvers.js';
import type { AgentDryRun, PlanError } from './dry-run.js';
import { planIdOf, type AgentPlan, type AgentPlans } from './plans.js';
import { keyedDocument, planKeys, type Classified } from './writes.js';

/** JSON with sorted keys: equal values hash equal (a plan's bytes, as its hash covers them). */
export function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

/**
 * Characters a person reading a plan would not see, or that change how the text around them reads: controls, format
 * characters (bidi overrides and isolates, zero-width characters, tags), line and paragraph separators, and the other
 * default-ignorable ones (variation selectors, fillers).
 */
const UNSEEN = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}]/gu;

/**
 * `text` as a person reads it: each character of UNSEEN written as its escape (`\u202e`), so that an agent's text can
 * neither hide, reorder nor break the line that shows what runs. A line of a summary goes through it whole: its body's
 * JSON still reads as the same value, and a step named after a topic or user shows that name escaped too.
 */
function shownLine(text: string): string {
  return text.replace(UNSEEN, (c) =>
    [...Array(c.length).keys()].map((i) => `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`).join(''),
  );
}

/** An operation an agent plans: a creation tool's document and what its root fields write. */
export interface PlannableOperation {
  /** The tool's name, stored with the plan. */
  readonly name: string;
  /** The document's text in the manifest the tool was made from (at start-up or the last reload). */
  readonly text: string;
  readonly operationName: string | undefined;
  /** A trusted document's id (a plan checks the manifest's text of it now), or null for a built-in operation. */
  readonly documentId: string | null;
  readonly classified: Pick<Classified, 'domains' | 'keyVariables' | 'keyedWrites'>;
}

/** Why nothing was planned: the pipeline's errors (limits, rate limit, the bound of open plans) or the dry run's. */
export type Unplannable =
  { readonly errors: readonly GraphQLFormattedError[] } | { readonly invalid: readonly PlanError[] };

/** The person's answer, as the transport read it: `ask` when it can ask and has not yet. */
export type PersonAnswer = 'ask' | 'accepted' | 'declined' | 'cannot-ask';

/**
 * What running a plan's document gave: whether it failed, its structured result (with its errors' codes), and what
 * tells whether anything was sent.
 */
export interface RunOutcome {
  readonly failed: boolean;
  readonly structured: Record<string, unknown>;
  /** The pipeline refused the operation before it ran (the app's rate limit, its scopes, the variables). */
  readonly refused: boolean;
  /** The errors as the pipeline formatted them, with their paths and extensions. */
  readonly errors: readonly GraphQLFormattedError[];
}

/** How an execution ended. A refusal's details carry its code, status, hashes or approval link. */
export type Execution =
  | { readonly kind: 'unplannable'; readonly why: Unplannable }
  | { readonly kind: 'refused'; readonly message: string; readonly details: Record<string, unknown> }
  | { readonly kind: 'replayed'; readonly plan: AgentPlan }
  | { readonly kind: 'ask-person'; readonly plan: AgentPlan }
  | { readonly kind: 'ran'; readonly plan: AgentPlan; readonly status: 'succeeded' | 'failed' };

interface Worked {
  requests: unknown;
  creations: number;
  points: number;
  hash: string;
  summary: string;
}

export interface AgentWorkflowOptions {
  /**
   * What a plan's text would spend, or the errors that refuse it: the execution pipeline's estimate of a text the
   * trusted documents admitted already (handed down: src/graphql/ reads this folder, and the pipeline reads
   * src/graphql/).
   */
  readonly estimate: (params: {
    query: string;
    operationName?: string;
    variables: Record<string, unknown>;
  }) => { readonly ok: false; readonly errors: readonly GraphQLFormattedError[] } | { readonly points: number };
  readonly plans: AgentPlans;
  /** Where an approver opens the plan (the approvals page). */
  readonly approveUrl: (planId: string) => string;
  /**
   * A trusted document's text in the manifest as it is now (a reload may change it), or undefined when it left: the
   * tools are made again after a reload, but a plan made before it runs only the exact text it was made from.
   */
  readonly documentNow: (documentId: string) => string | undefined;
  /** The exact upstream requests a plan's document would send (src/agents/dry-run.ts AgentDryRun.run). */
  readonly dryRun: AgentDryRun['run'];
  /**
   * MCP_APPROVAL: `elicitation` lets the agent's user approve through the client's form (the client's word);
   * `approver` only another principal holding the plan's approve scope (approvePlan, GET /approvals).
   */
  readonly approval: 'elicitation' | 'approver';
  /** Spends the app's creation point for a plan, or throws RATE_LIMITED; resolves to what gives the point back. */
  readonly charge: (caller: Caller) => Promise<() => Promise<void>>;
  /**
   * The gateway's keyed digest (HMAC-SHA256 under its key, hex) of a plan's bytes: its hash. Shown to approvers,
   * audited and logged, it covers the bytes as sent, passwords in clear among them; a plain SHA-256 would let whoever
   * reads it and the plan test guesses at a password offline.
   */
  readonly digest: (text: string) => string;
}

/** Making and executing agents' plans, whatever transport the agent speaks. */
export class AgentWorkflow {
  constructor(private readonly o: AgentWorkflowOptions) {}

  get approval(): 'elicitation' | 'approver' {
    return this.o.approval;
  }

  approveUrl(planId: string): string {
    return this.o.approveUrl(planId);
  }

  /**
   * The plan of a creation's call: the exact upstream requests of its document (src/agents/dry-run.ts: the code
   * that sends them, nothing sent), what it spends, its hash and summary; or why it is refused.
   */
  private async work(
    op: PlannableOperation,
    document: string,
    variables: Record<string, unknown>,
    caller: Caller,
  ): Promise<Worked | Unplannable> {
    const estimate = this.o.estimate({
      query: document,
      ...(op.operationName ? { operationName: op.operationName } : {}),
      variables,
    });
    if ('ok' in estimate) return { errors: estimate.errors };
    const ran = await this.o.dryRun(caller, document, op.operationName ?? null, variables);
    if (!ran.ok) return { invalid: ran.errors };
    const creations = ran.steps.filter((s) => s.action === 'CREATE').length;
    // One creation point per upstream creation, as a provisioning is charged (src/ratelimit/cost.ts).
    const points = Math.max(creations, estimate.points);
    const requests = { steps: ran.steps };
    // The approval covers these bytes: the document, the variables, the requests as shown and as sent.
    const hash = this.o.digest(
      `agent plan\u0000${canonical({ tool: op.name, document, variables, requests, sent: ran.sent })}`,
    );
    const lines = ran.steps
      .filter((s) => s.action === 'CREATE' && s.request)
      .map((s) =>
        shownLine(
          `- ${s.name}: ${s.request!.method} ${s.request!.upstream} ${s.request!.path} ${JSON.stringify(s.request!.body)}`,
        ),
      );
    const summary = [
      `${caller.app ?? caller.scope} asks to run ${op.name}: ${creations} upstream creation(s), ${points} rate-limit point(s).`,
      ...lines,
    ].join('\n');
    return { requests, creations, points, hash, summary };
  }

  /**
   * Plans a call of `op` with `args` (its key variables left out) and stores the plan; nothing is sent upstream. The
   * plan's point is spent first, before any work, so that of two calls at an app's last point one plans; a plan
   * refused after all (its input, its app's bound of open plans, checked as it is stored) gives the point back.
   */
  async make(
    op: PlannableOperation,
    args: Record<string, unknown>,
    caller: Caller,
  ): Promise<{ ok: true; plan: AgentPlan } | { ok: false; why: Unplannable }> {
    let refund: () => Promise<void>;
    try {
      refund = await this.o.charge(caller);
    } catch (err) {
      if (err instanceof GraphQLError) return { ok: false, why: { errors: [err.toJSON()] } };
      throw err;
    }
    const made = await this.plan(op, args, caller).catch(async (err: unknown) => {
      await refund();
      throw err;
    });
    if (!made.ok) await refund();
    return made;
  }

  private async plan(
    op: PlannableOperation,
    args: Record<string, unknown>,
    caller: Caller,
  ): Promise<{ ok: true; plan: AgentPlan } | { ok: false; why: Unplannable }> {
    const id = randomUUID();
    const document = runnableDocument(op.text, op.operationName, id)!;
    const variables = { ...args, ...planKeys(id, op.classified) };
    const worked = await this.work(op, document, variables, caller);
    if (!('hash' in worked)) return { ok: false, why: worked };
    const plan = await this.o.plans
      .create({
        id,
        owner: caller.scope,
        app: caller.app ?? caller.scope,
        tool: op.name,
        variables,
        document,
        operationName: op.operationName ?? null,
        domains: [...op.classified.domains].sort(),
        ...worked,
      })
      .catch((err: unknown) => (err instanceof GraphQLError ? err : Promise.reject(err)));
    // Past the app's bound of open plans: refused, nothing stored.
    if (plan instanceof GraphQLError) return { ok: false, why: { errors: [plan.toJSON()] } };
    return { ok: true, plan };
  }

  /** The caller's plan `planId`; another app's plan reads exactly as one that does not exist. */
  async find(planId: string, caller: Caller): Promise<AgentPlan | null> {
    const plan = await this.o.plans.get(planIdOf(planId));
    return plan && readableBy(caller, plan.owner) ? plan : null;
  }

  /**
   * Runs `plan` (of `op`) once: replays its stored outcome, or refuses it (declined, expired, changed, not approved),
   * or asks the person through `askPerson`, or claims it and sends its stored text through `run`. `requestId`: the
   * request of the call, named on the execution's log lines (its audit events, its run's heartbeat and outcome): the
   * run goes on when its client leaves before the answer, and what it logs then is found by that request's id.
   */
  async execute(
    plan: AgentPlan,
    op: PlannableOperation,
    caller: Caller,
    requestId: string,
    hooks: {
      readonly askPerson: (plan: AgentPlan) => Promise<PersonAnswer>;
      readonly run: (plan: AgentPlan, document: string) => Promise<RunOutcome>;
    },
  ): Promise<Execution> {
    const actor = caller.app ?? caller.scope;
    const refuse = (message: string, details: Record<string, unknown>): Execution => ({
      kind: 'refused',
      message,
      details,
    });
    /** A refusal with an audit row (a repeated one adds none: AgentPlans.audit). */
    const refuseAudited = async (detail: string, message: string, details: Record<string, unknown>) => {
      await this.o.plans.audit(plan.id, plan.app, actor, 'refused', detail, requestId);
      return refuse(message, details);
    };
    if (plan.status === 'succeeded' || plan.status === 'failed') {
      await this.o.plans.audit(
        plan.id,
        plan.app,
        actor,
        'replayed',
        `stored outcome (${plan.status}) replayed; nothing was sent`,
        requestId,
      );
      return { kind: 'replayed', plan };
    }
    if (plan.status === 'declined' || plan.expired) {
      const unknown =
        plan.status === 'unknown'
          ? ' The outcome of its last execution is unknown: it may have been applied upstream; ' +
            'check before planning it again.'
          : ' Make a new plan.';
      const why = plan.expired
        ? `plan ${plan.id} has expired (at ${new Date(plan.expiresAt!).toISOString()}: a plan may be approved and ` +
          'executed for 24 hours after it was made, or for IDEMPOTENCY_RETENTION if that is shorter): ' +
          `it can never run; nothing was sent.${unknown}`
        : `plan ${plan.id} was declined${plan.declinedBy ? ` by ${plan.declinedBy}` : ''}: it can never run; nothing was sent.`;
      return refuseAudited(why, why, {
        planId: plan.id,
        status: plan.expired ? 'EXPIRED' : 'DECLINED',
        code: plan.expired ? 'PLAN_EXPIRED' : 'DECLINED',
      });
    }
    if (plan.status === 'executing') {
      // Its execution showed a sign of life within IDEMPOTENCY_TAKEOVER: it runs. Had its process stopped, the plan
      // would read as unknown by lostAt, and the next call would run it again.
      const retryAfterSeconds = Math.max(1, Math.ceil((plan.lostAt! - this.o.plans.now()) / 1000));
      return refuse(
        `plan ${plan.id} is being executed; nothing was sent by this call. Call execute_plan with planId ${plan.id} ` +
          `again in ${retryAfterSeconds} s: it gives the outcome once the run has ended; should the process running ` +
          'it have stopped, the outcome is unknown by then, and the plan runs again, under the same idempotency ' +
          'keys, only once approved again',
        { planId: plan.id, status: 'EXECUTING', retryAfterSeconds },
      );
    }

    // The plan as it would run now: its operation's document as it is now (with the plan's keys), its input's
    // defaults and what it reuses; any change changes its hash. What runs is the text stored with the plan, never a
    // document id. A trusted document's text is the manifest's now (a reload may have changed it): a plan runs only
    // the text it was made from and approved for.
    const textNow = op.documentId === null ? op.text : (this.o.documentNow(op.documentId) ?? null);
    const current = textNow === null ? null : runnableDocument(textNow, op.operationName, plan.id);
    if (current === null) {
      return refuseAudited(
        `the plan's document left the manifest; nothing was sent`,
        `plan ${plan.id} changed since it was made: the trusted document of ${plan.tool} is no longer in the manifest; nothing was sent.`,
        { planId: plan.id, code: 'PLAN_CHANGED', hash: plan.hash, newHash: null },
      );
    }
    const document = plan.document ?? current;
    const worked = await this.work(op, current, plan.variables, caller);
    // A text that changed refuses the plan whatever working it out now gives: the plan's input may not even fit the
    // new text (a reload that changed its variables), and an answer about that input would be no help.
    const textChanged = current !== document;
    if (!('hash' in worked) && !textChanged) return { kind: 'unplannable', why: worked };
    const newHash = 'hash' in worked ? worked.hash : null;
    if (textChanged || newHash !== plan.hash || (plan.approval && plan.approval.hash !== newHash)) {
      const now =
        newHash === null
          ? `its trusted document changed, and its input no longer fits the new text`
          : `its requests now hash to ${newHash}, not ${plan.hash}`;
      return refuseAudited(
        `the plan changed since it was made or approved: hash ${plan.hash} is now ${newHash ?? 'none (its input no longer fits its document)'}; nothing was sent`,
        `plan ${plan.id} changed since it was made or approved (${now}); nothing was sent. Make a new plan and have it approved.`,
        {
          planId: plan.id,
          code: 'PLAN_CHANGED',
          hash: plan.hash,
          newHash,
        },
      );
    }

    // A lost plan (its run's process stopped) had its approval spent by that run's claim, whatever the row shows.
    // Under MCP_APPROVAL=approver the agent's own client is never an approver: an approval it gave through a form under
    // elicitation (before a restart that set approver, or on a replica that still runs with elicitation) is none here.
    const approved =
      plan.lostAt === null &&
      plan.approval !== null &&
      plan.approval.hash === plan.hash &&
      plan.approval.expiresAt > this.o.plans.now() &&
      (this.o.approval === 'elicitation' || plan.approval.via === 'approvePlan');
    // What the plan waits for: a first approval, or (its last execution's outcome unknown) a new one to run again.
    const waiting = plan.status === 'unknown' ? 'UNKNOWN' : 'PENDING';
    if (!approved && this.o.approval === 'approver') {
      // Only another principal approves: the client is shown the plan and where it is approved, never asked.
      const url = this.o.approveUrl(plan.id);
      const state =
        plan.status === 'unknown'
          ? `the outcome of plan ${plan.id} is unknown and its approval has expired, or was spent on that run ` +
            '(an approval covers one run): it runs again, under the same idempotency keys, once approved again'
          : `plan ${plan.id} is not approved`;
      return refuseAudited(
        'no approval by an approver (MCP_APPROVAL=approver); nothing was sent',
        `${state}; nothing was sent. On this gateway a plan is approved by a person or app holding ` +
          `${approveScopesOf(plan)}, never through this client: they approve it at ${url}; ` +
          `then call execute_plan again.\n\n${plan.summary}\nhash: ${plan.hash}`,
        {
          planId: plan.id,
          status: waiting,
          code: 'APPROVAL_REQUIRED',
          approveUrl: url,
        },
      );
    }
    /** The plan as this call read it with the approval it checked: the one its claim spends. */
    let toClaim = plan;
    if (!approved) {
      const answer = await hooks.askPerson(plan);
      if (answer === 'ask') return { kind: 'ask-person', plan };
      if (answer === 'declined') {
        await this.o.plans.audit(
          plan.id,
          plan.app,
          `a person through ${actor}'s MCP client`,
          'declined',
          'the person declined the plan; nothing was sent',
          requestId,
        );
        return refuse(`the plan was not approved; nothing was sent`, {
          planId: plan.id,
          status: 'PENDING',
          code: 'DECLINED',
        });
      }
      if (answer === 'cannot-ask') {
        const url = this.o.approveUrl(plan.id);
        return refuseAudited(
          'no approval, and the client cannot ask its person (no elicitation); nothing was sent',
          `plan ${plan.id} is not approved, and this client cannot ask its person; nothing was sent. An app with ${approveScopesOf(plan)} approves it at ${url}; then call execute_plan again.`,
          {
            planId: plan.id,
            status: waiting,
            code: 'APPROVAL_REQUIRED',
            approveUrl: url,
          },
        );
      }
      // The answer approves the plan in the state its form showed (this read of it), and no other: not once it ran
      // meanwhile (a call beside this one that took the same answer), whatever status that run left.
      const approval = await this.o.plans.approve(
        plan.id,
        { owner: caller.scope, name: actor },
        'elicitation',
        plan.status.toUpperCase(),
        plan.changedAt,
      );
      if (!approval.ok) return refuse(`${approval.message}; nothing was sent`, { planId: plan.id });
      toClaim = approval.plan;
    }

    // The claim spends the approval: this run is the one it covers, and any later run needs a new one.
    const claim = await this.o.plans.claim(toClaim, requestId);
    if (!claim) {
      // Another call changed the plan since this one read it (on this replica or another): answered as the plan is
      // now. A run under way is EXECUTING, one ended is replayed; those answers claim nothing and send nothing.
      const current = await this.o.plans.get(plan.id);
      if (current && !current.expired && ['executing', 'succeeded', 'failed'].includes(current.status))
        return this.execute(current, op, caller, requestId, hooks);
      const status = !current || current.expired ? 'EXPIRED' : current.status.toUpperCase();
      return refuse(
        `plan ${plan.id} changed while this call checked it (${status} now: approved again, declined, or its ` +
          'approval spent or lapsed meanwhile); nothing was sent by this call. Call execute_plan again',
        { planId: plan.id, status },
      );
    }
    /**
     * Stores the run's outcome and audits it. An execution another call took over (this one taken for lost) stores
     * nothing: the plan's outcome is that call's, which ran under the same idempotency keys; this one still answers
     * its own caller with what it got, and says so in the audit trail.
     */
    const finish = async (status: 'succeeded' | 'failed' | 'unknown', stored: unknown, detail: string) => {
      const mine = await this.o.plans.finish(claim, status, stored);
      await this.o.plans.audit(
        plan.id,
        plan.app,
        actor,
        status === 'succeeded' ? 'executed' : status,
        mine
          ? detail
          : `${detail}; its outcome was not stored: another execution took the plan over (this one was taken for ` +
              "lost), and the plan's outcome is that execution's",
        requestId,
      );
    };
    let outcome: RunOutcome;
    try {
      outcome = await this.o.plans.running(claim, () => hooks.run(plan, document));
    } catch (err) {
      await finish('unknown', null, `the execution failed before an answer: ${(err as Error).message}`);
      const url = this.o.approveUrl(plan.id);
      return refuse(
        `the outcome of plan ${plan.id} is unknown: the request may have been applied. ` +
          `Its approval covered this run: ` +
          `it runs again, under the same idempotency keys, only once approved again (${url}): then call ` +
          `execute_plan with planId ${plan.id} again`,
        { planId: plan.id, status: 'UNKNOWN', approveUrl: url },
      );
    }
    const { structured } = outcome;
    const errors = (structured.errors as { code: string; retryAfterSeconds?: number }[] | undefined) ?? [];
    const codes = [...new Set(errors.map((e) => e.code))].join(', ');
    if (outcome.failed && sentNothing(outcome, document, plan.operationName)) {
      // Refused before anything was sent: a refusal changes nothing, so the plan is as it was, and runs when called
      // again (after the retry-after of a rate limit).
      const status = claim.plan.status === 'unknown' ? 'UNKNOWN' : 'APPROVED';
      if (!(await this.o.plans.release(claim))) {
        return refuse(
          `plan ${plan.id} was not run by this call (${codes}): nothing was sent; another call is executing it now: ` +
            `call execute_plan with planId ${plan.id} again for its outcome`,
          { planId: plan.id, status: 'EXECUTING', sent: false, ...structured },
        );
      }
      await this.o.plans.audit(
        plan.id,
        plan.app,
        actor,
        'refused',
        `the run was refused before anything was sent (${codes}); the plan is as it was (${status})`,
        requestId,
      );
      const retryAfterSeconds = Math.max(0, ...errors.map((e) => e.retryAfterSeconds ?? 0));
      return refuse(
        `plan ${plan.id} was not run (${codes}): nothing was sent, and the plan is as it was (${status}, with its ` +
          `approval): call execute_plan with planId ${plan.id} again` +
          (retryAfterSeconds > 0 ? ` in ${retryAfterSeconds} s` : ' once the cause is fixed'),
        {
          planId: plan.id,
          status,
          sent: false,
          ...(retryAfterSeconds > 0 ? { retryAfterSeconds } : {}),
          ...structured,
        },
      );
    }
    const status = runStatus(outcome.failed, errors);
    // UPSTREAM_OUTCOME_UNKNOWN: the request may have been applied by an upstream not known to honour its key, which the
    // gateway never sends again on its own; a repeat may create twice, so the person who approves it again checks
    // first.
    const settled = !errors.some((e) => e.code === 'UPSTREAM_OUTCOME_UNKNOWN');
    await finish(
      status,
      structured,
      `${plan.tool} with idempotency key ${plan.id}: ${status}` +
        (settled ? '' : '; a repeat may create twice, and runs only once approved again'),
    );
    if (status === 'unknown') {
      const url = this.o.approveUrl(plan.id);
      const why = settled
        ? 'the request may have been applied. Its approval covered this run: it runs again, under the same ' +
          `idempotency keys, only once approved again (${url}): then call execute_plan with planId ${plan.id} again`
        : 'the request may have been applied, and its upstream is not known to honour idempotency keys, so sending ' +
          'it again may create it twice. Its approval covered this run: check upstream first; it runs again only ' +
          `once a person approves it again at ${url}`;
      return refuse(`the outcome of plan ${plan.id} is unknown (${codes}): ${why}`, {
        planId: plan.id,
        status: 'UNKNOWN',
        approveUrl: url,
        ...structured,
      });
    }
    return { kind: 'ran', plan, status };
  }
}

/** The approve scopes a plan needs, in words. */
export function approveScopesOf(plan: AgentPlan): string {
  return plan.domains.map(approveScopeOf).join(' and ');
}

/**
 * The document a plan runs: the operation of `text`, each upstream write keyed from the plan's id; null when `text`
 * no longer holds the operation (a manifest changed under its id).
 */
function runnableDocument(text: string, operationName: string | undefined, planId: string): string | null {
  let document: DocumentNode;
  try {
    document = parse(text);
  } catch {
    return null;
  }
  const operation = getOperationAST(document, operationName);
  return operation ? keyedDocument(document, operation, planId) : null;
}

/**
 * Whether a run provably sent nothing upstream: the pipeline refused it before it ran, or each of its root fields
 * failed, itself, with an error raised before its upstream call. Anything else may have reached an upstream.
 */
function sentNothing(outcome: RunOutcome, document: string, operationName: string | null): boolean {
  if (outcome.refused) return true;
  const roots = getOperationAST(parse(document), operationName)?.selectionSet.selections ?? [];
  const { errors } = outcome;
  return (
    roots.length > 0 &&
    errors.every((e) => e.path?.length === 1 && raisedBeforeSending(e)) &&
    roots.every((s) => s.kind === Kind.FIELD && errors.some((e) => e.path![0] === (s.alias ?? s.name).value))
  );
}

/**
 * An error a resolver raises before its upstream call: the app's rate limit or storage bound, input the gateway checks
 * itself (an upstream's 400 is BAD_USER_INPUT too, with its `upstream`: that one was sent), an open circuit that sent
 * nothing (`sent: false`). SERVICE_UNAVAILABLE is not one: the database may have failed after the upstream answered.
 */
function raisedBeforeSending(error: GraphQLFormattedError): boolean {
  const extensions = error.extensions ?? {};
  switch (extensions.code) {
    case 'RATE_LIMITED':
      return true;
    case 'BAD_USER_INPUT':
      return extensions.upstream === undefined;
    case 'UPSTREAM_UNAVAILABLE':
      return extensions.sent === false;
    default:
      return false;
  }
}

/**
 * Errors after which the request may have been applied, or was not sent yet: the plan can be executed again.
 * SERVICE_UNAVAILABLE is one: the gateway's database failed, before the upstream call or after its answer (the
 * contract's "PostgreSQL restarted during a request": the upstream created it under the key), and a retry with the
 * same key runs once either way.
 */
const RETRYABLE = new Set([
  'UPSTREAM_OUTCOME_UNKNOWN',
  'UPSTREAM_UNAVAILABLE',
  'IDEMPOTENCY_KEY_IN_USE',
  'RATE_LIMITED',
  'INTERNAL_SERVER_ERROR',
  'SERVICE_UNAVAILABLE',
]);

/**
 * A finished run's status: succeeded without errors; unknown when one of its errors may hide an applied request or
 * one not sent yet (`RETRYABLE`), so that the plan runs again under its keys; failed otherwise.
 */
export function runStatus(
  failed: boolean,
  errors: readonly { readonly code: string }[],
): 'succeeded' | 'unknown' | 'failed' {
  if (!failed) return 'succeeded';
  return errors.some((e) => RETRYABLE.has(e.code)) ? 'unknown' : 'failed';
}
