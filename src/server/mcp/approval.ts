// MCP_MUTATIONS=approve (docs/decisions/060): a creation tool makes a plan (its exact requests, a hash of them, the
// creations and rate-limit points, a summary a person reads) and nothing else; execute_plan runs a plan once, only
// with an approval bound to the plan's hash, its app, its approver and an expiry. An approval comes from the person,
// through the client (an input_required elicitation, answered by the client's user interface, never by a tool
// argument the model fills), or from another app holding the plan's approve scope (`cloud:approve`, `identity:approve`: approvePlan). Execution sends the
// operation with an idempotency key derived from the plan id, through the execution pipeline like every tool call.
import { createHash, randomUUID } from 'node:crypto';
import {
  CLIENT_CAPABILITIES_META_KEY,
  inputRequired,
  inputResponse,
  type CallToolResult,
  type RequestStateCodec,
  type ServerContext,
} from '@modelcontextprotocol/server';
import { getOperationAST, GraphQLError, parse, type DocumentNode } from 'graphql';

import { approveScopeOf } from '../../agents/approvers.js';
import type { AgentDryRun } from '../../agents/dry-run.js';
import type { AgentPlan, AgentPlans } from '../../agents/plans.js';
import { keyedDocument } from '../../agents/writes.js';
import type { Caller } from '../../auth/caller.js';
import type { Pipeline } from '../../execution/pipeline.js';
import { errorsResult, runOperationTool } from './operations.js';
import { toolError, type McpTool, type ToolCall, type ToolResult } from './server.js';
import type { JsonSchema } from './shapes.js';
import { refusalFor, type OperationTool } from './tools.js';

/** What the requestState of an elicitation carries back: the plan and hash the person was shown, and whose it is. */
interface ApprovalState {
  planId: string;
  hash: string;
  owner: string;
}

/** The elicitation's key in inputRequests, and the form the person answers. */
const APPROVAL_INPUT = 'approval';
const APPROVAL_FORM = {
  type: 'object' as const,
  properties: {
    approve: {
      type: 'boolean' as const,
      title: 'Approve and run this plan',
      description: 'Yes runs the requests above, once. No sends nothing.',
    },
  },
  required: ['approve'],
};

/** JSON with sorted keys: equal values hash equal. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

interface Worked {
  requests: unknown;
  creations: number;
  points: number;
  hash: string;
  summary: string;
}

export interface ApprovalOptions {
  readonly pipeline: Pipeline;
  readonly plans: AgentPlans;
  /** Where an approver opens the plan (GraphiQL with the plan and approvePlan ready). */
  readonly approveUrl: (planId: string) => string;
  readonly codec: RequestStateCodec<ApprovalState>;
  /**
   * A trusted document's text in the manifest as it is now (a reload may change it), or undefined when it left: the
   * tools list the manifest read at start-up, but a plan runs only the exact text it was made from.
   */
  readonly documentNow: (documentId: string) => string | undefined;
  /** The exact upstream requests a plan's document would send (src/agents/dry-run.ts AgentDryRun.run). */
  readonly dryRun: AgentDryRun['run'];
  /**
   * MCP_APPROVAL: `elicitation` lets the agent's user approve through the client's form (the client's word);
   * `approver` only another principal holding the plan's approve scope (approvePlan, GET /approvals).
   */
  readonly approval: 'elicitation' | 'approver';
  /** Spends the app's creation point for a plan, or throws RATE_LIMITED. */
  readonly charge: (caller: Caller) => Promise<void>;
}

export class Approvals {
  constructor(private readonly o: ApprovalOptions) {}

  /**
   * The plan of a creation tool's call: the exact upstream requests of its document (src/agents/dry-run.ts: the code
   * that sends them, nothing sent), what it spends, its hash and summary; or the errors that refuse it.
   */
  private async work(
    tool: OperationTool,
    document: string,
    variables: Record<string, unknown>,
    call: Pick<ToolCall, 'caller' | 'requestId'>,
  ): Promise<Worked | CallToolResult> {
    const estimate = this.o.pipeline.estimate(
      { query: document, ...(tool.operationName ? { operationName: tool.operationName } : {}), variables },
      { trustedResolved: true },
    );
    if ('ok' in estimate) return errorsResult(estimate.errors);
    const ran = await this.o.dryRun(call.caller, document, tool.operationName ?? null, variables);
    if (!ran.ok) {
      return toolError(
        ran.errors.map((e) => (e.field ? `Invalid argument ${e.field}: ${e.message}` : e.message)).join('\n') +
          '\nNothing was planned.',
        {
          errors: ran.errors.map((e) => ({
            code: e.code,
            message: e.message,
            ...(e.field ? { argument: e.field } : {}),
          })),
        },
      );
    }
    const creations = ran.steps.filter((s) => s.action === 'CREATE').length;
    // One creation point per upstream creation, as a provisioning is charged (src/ratelimit/cost.ts).
    const points = Math.max(creations, estimate.points);
    const requests = { steps: ran.steps };
    // The approval covers these bytes: the document, the variables, the requests as shown and as sent.
    const hash = createHash('sha256')
      .update(canonical({ tool: tool.name, document, variables, requests, sent: ran.sent }))
      .digest('hex');
    const lines = ran.steps
      .filter((s) => s.action === 'CREATE' && s.request)
      .map(
        (s) =>
          `- ${s.name}: ${s.request!.method} ${s.request!.upstream} ${s.request!.path} ${JSON.stringify(s.request!.body)}`,
      );
    const summary = [
      `${call.caller.app ?? call.caller.scope} asks to run ${tool.name}: ${creations} upstream creation(s), ${points} rate-limit point(s).`,
      ...lines,
    ].join('\n');
    return { requests, creations, points, hash, summary };
  }

  /** A creation tool under approve: plans, stores the plan, and returns it; nothing is sent upstream. */
  planningTool(tool: OperationTool): McpTool {
    const keys = tool.classified.keyVariables;
    const accepted = new Set(Object.keys((tool.inputSchema.properties as Record<string, unknown>) ?? {}));
    const properties = { ...(tool.inputSchema.properties as Record<string, JsonSchema>) };
    for (const k of keys) {
      accepted.delete(k);
      delete properties[k];
    }
    const required = (tool.inputSchema.required as string[] | undefined)?.filter((k) => !keys.has(k));
    return {
      name: tool.name,
      title: `${tool.title} (plan)`,
      description: `${tool.description}\n\nUnder approval (MCP_MUTATIONS=approve) this tool only plans: it returns a plan id, its hash, the exact requests, the creations and rate-limit points, and a summary. Nothing is created until execute_plan(planId) runs with an approval from a person or an approver app.`,
      inputSchema: { ...tool.inputSchema, properties, ...(required ? { required } : {}) },
      outputSchema: PLAN_OUTPUT,
      // The call itself sends nothing upstream; what it plans does, once approved (MCP: destructiveHint is the
      // client's cue to ask; here the gateway asks, and says what the plan would do).
      annotations: {
        title: `${tool.title} (plan)`,
        readOnlyHint: true,
        destructiveHint: true,
        idempotentHint: false,
        openWorldHint: false,
      },
      refusal: (caller) => refusalFor(tool, caller),
      call: async (args, call) => {
        const unknown = Object.keys(args).find((k) => !accepted.has(k));
        if (unknown !== undefined) {
          const why = keys.has(unknown)
            ? 'a plan derives its idempotency key from its id'
            : `it takes ${[...accepted].join(', ')}`;
          return toolError(
            `Invalid argument ${unknown}: this tool takes no argument ${unknown} (${why}); nothing was planned`,
            { errors: [{ code: 'BAD_USER_INPUT', argument: unknown, message: `unknown argument ${unknown}` }] },
          );
        }
        try {
          await this.o.charge(call.caller);
        } catch (err) {
          if (err instanceof GraphQLError) return errorsResult([err.toJSON()]);
          throw err;
        }
        const id = randomUUID();
        const document = runnableDocument(tool.text, tool.operationName, id)!;
        const variables = { ...args, ...Object.fromEntries([...keys].map((k) => [k, id])) };
        const worked = await this.work(tool, document, variables, call);
        if ('content' in worked) return worked;
        const plan = await this.o.plans
          .create({
            id,
            owner: call.caller.scope,
            app: call.caller.app ?? call.caller.scope,
            tool: tool.name,
            variables,
            document,
            operationName: tool.operationName ?? null,
            domains: [...tool.classified.domains].sort(),
            ...worked,
          })
          .catch((err: unknown) => (err instanceof GraphQLError ? err : Promise.reject(err)));
        // Past the app's bound of open plans: refused, nothing stored.
        if (plan instanceof GraphQLError) return errorsResult([plan.toJSON()]);
        return planResult(
          plan,
          this.o.approveUrl(plan.id),
          this.o.approval === 'elicitation'
            ? `Plan ${plan.id} made; nothing was sent. Call execute_plan with planId ${plan.id}: a person approves it in this client, or an app with ${scopesOf(plan)} approves it at ${this.o.approveUrl(plan.id)}.`
            : `Plan ${plan.id} made; nothing was sent. A person or app holding ${scopesOf(plan)} approves it at ${this.o.approveUrl(plan.id)}; then call execute_plan with planId ${plan.id}.`,
        );
      },
    };
  }

  /** execute_plan(planId): runs an approved plan once, or asks the person for the approval, or refuses. */
  executeTool(tools: ReadonlyMap<string, OperationTool>): McpTool {
    return {
      name: 'execute_plan',
      title: 'Execute an approved plan',
      description:
        'Runs a plan made by a creation tool, once, with the upstream idempotency key derived from the plan id. It runs only with an approval of the plan as it is now: given by the person through this client (you are asked), or by an app holding its approve scope (cloud:approve for cloud creations, identity:approve for identity checks; approvePlan). A plan whose requests changed since it was approved is refused with its new hash. Calling it again replays the stored outcome.',
      inputSchema: {
        type: 'object',
        properties: {
          planId: { type: 'string', format: 'uuid', description: 'The plan id a creation tool returned.' },
        },
        required: ['planId'],
        additionalProperties: false,
      },
      annotations: {
        title: 'Execute an approved plan',
        readOnlyHint: false,
        destructiveHint: true,
        idempotentHint: true,
        openWorldHint: true,
      },
      // Offered to an app that may call some creation tool: the plans it can execute are of those tools.
      refusal: (caller) =>
        [...tools.values()].some((t) => t.kind === 'creation' && refusalFor(t, caller) === null)
          ? null
          : {
              message: 'execute_plan runs plans of creation tools, none of which this app may call; nothing was sent',
              scope: undefined,
            },
      call: (args, call) => this.execute(tools, args, call),
    };
  }

  private async execute(
    tools: ReadonlyMap<string, OperationTool>,
    args: Record<string, unknown>,
    call: ToolCall,
  ): Promise<ToolResult> {
    const extra = Object.keys(args).find((k) => k !== 'planId');
    if (extra !== undefined)
      return toolError(
        `Invalid argument ${extra}: execute_plan takes planId only (an approval is never an argument); nothing was sent`,
        { errors: [{ code: 'BAD_USER_INPUT', argument: extra }] },
      );
    const planId = args.planId;
    if (typeof planId !== 'string' || !/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(planId)) {
      return toolError(
        'Invalid argument planId: a plan id is a UUID, as a creation tool returned it; nothing was sent',
        { errors: [{ code: 'BAD_USER_INPUT', argument: 'planId' }] },
      );
    }
    const { caller } = call;
    const actor = caller.app ?? caller.scope;
    const plan = await this.o.plans.get(planId.toLowerCase());
    // Another app's plan reads exactly as one that does not exist.
    if (!plan || plan.owner !== caller.scope)
      return toolError(`no plan ${planId} of this app; nothing was sent`, {
        errors: [{ code: 'NOT_FOUND', argument: 'planId' }],
      });
    const tool = tools.get(plan.tool);
    if (!tool)
      return toolError(`plan ${plan.id} is for ${plan.tool}, which this endpoint no longer offers; nothing was sent`, {
        errors: [{ code: 'NOT_FOUND' }],
      });
    const refused = refusalFor(tool, caller);
    if (refused)
      return toolError(refused.message, { code: 'FORBIDDEN', ...(refused.scope ? { scope: refused.scope } : {}) });

    if (plan.status === 'succeeded' || plan.status === 'failed') {
      await this.o.plans.audit(
        plan.id,
        plan.app,
        actor,
        'replayed',
        `stored outcome (${plan.status}) replayed; nothing was sent`,
      );
      return replayed(plan);
    }
    if (plan.status === 'declined' || plan.expired) {
      const why = plan.expired
        ? `plan ${plan.id} has expired (a plan may be approved and executed for 24 hours after it was made): it can never run; nothing was sent. Make a new plan.`
        : `plan ${plan.id} was declined${plan.declinedBy ? ` by ${plan.declinedBy}` : ''}: it can never run; nothing was sent.`;
      await this.o.plans.audit(plan.id, plan.app, actor, 'refused', why);
      return toolError(why, {
        planId: plan.id,
        status: plan.expired ? 'EXPIRED' : 'DECLINED',
        code: plan.expired ? 'PLAN_EXPIRED' : 'DECLINED',
      });
    }
    if (plan.status === 'executing') {
      return toolError(
        `plan ${plan.id} is being executed, or its outcome is unknown: call execute_plan with planId ${plan.id} again; its idempotency key makes a repeat safe`,
        { planId: plan.id, status: 'UNKNOWN' },
      );
    }

    // The plan as it would run now: its tool's document as it is now (with the plan's keys), its input's defaults and
    // what it reuses; any change changes its hash. What runs is the text stored with the plan, never a document id.
    // A trusted document's text is the manifest's now (a reload may have changed it): a plan runs only the text it was
    // made from and approved for.
    const textNow = tool.documentId === null ? tool.text : (this.o.documentNow(tool.documentId) ?? null);
    const current = textNow === null ? null : runnableDocument(textNow, tool.operationName, plan.id);
    if (current === null) {
      await this.o.plans.audit(
        plan.id,
        plan.app,
        actor,
        'refused',
        `the plan's document left the manifest; nothing was sent`,
      );
      return toolError(
        `plan ${plan.id} changed since it was made: the trusted document of ${plan.tool} is no longer in the manifest; nothing was sent.`,
        { planId: plan.id, code: 'PLAN_CHANGED', hash: plan.hash, newHash: null },
      );
    }
    const document = plan.document ?? current;
    const worked = await this.work(tool, current, plan.variables, call);
    if ('content' in worked) return worked;
    if (current !== document || worked.hash !== plan.hash || (plan.approval && plan.approval.hash !== worked.hash)) {
      await this.o.plans.audit(
        plan.id,
        plan.app,
        actor,
        'refused',
        `the plan changed since it was made or approved: hash ${plan.hash} is now ${worked.hash}; nothing was sent`,
      );
      return toolError(
        `plan ${plan.id} changed since it was made or approved (its requests now hash to ${worked.hash}, not ${plan.hash}); nothing was sent. Make a new plan and have it approved.`,
        {
          planId: plan.id,
          code: 'PLAN_CHANGED',
          hash: plan.hash,
          newHash: worked.hash,
        },
      );
    }

    const approved =
      plan.approval !== null && plan.approval.hash === plan.hash && plan.approval.expiresAt > this.o.plans.now();
    if (!approved && this.o.approval === 'approver') {
      // Only another principal approves: the client is shown the plan and where it is approved, never asked.
      await this.o.plans.audit(
        plan.id,
        plan.app,
        actor,
        'refused',
        'no approval by an approver (MCP_APPROVAL=approver); nothing was sent',
      );
      const url = this.o.approveUrl(plan.id);
      return toolError(
        `plan ${plan.id} is not approved; nothing was sent. On this gateway a plan is approved by a person or app holding ${scopesOf(plan)}, never through this client: they approve it at ${url}; then call execute_plan again.\n\n${plan.summary}\nhash: ${plan.hash}`,
        { planId: plan.id, status: 'PENDING', code: 'APPROVAL_REQUIRED', approveUrl: url },
      );
    }
    if (!approved) {
      const answer = await this.elicited(plan, call);
      if (answer === 'ask') {
        return inputRequired({
          inputRequests: {
            [APPROVAL_INPUT]: inputRequired.elicit({
              mode: 'form',
              message: `${plan.summary}\n\nPlan ${plan.id}, hash ${plan.hash}. The exact requests: ${this.o.approveUrl(plan.id)}`,
              requestedSchema: APPROVAL_FORM,
            }),
          },
          requestState: await this.o.codec.mint({ planId: plan.id, hash: plan.hash, owner: caller.scope }),
        });
      }
      if (answer === 'declined') {
        await this.o.plans.audit(
          plan.id,
          plan.app,
          `a person through ${actor}'s MCP client`,
          'declined',
          'the person declined the plan; nothing was sent',
        );
        return toolError(`the plan was not approved; nothing was sent`, {
          planId: plan.id,
          status: 'PENDING',
          code: 'DECLINED',
        });
      }
      if (answer === 'cannot-ask') {
        await this.o.plans.audit(
          plan.id,
          plan.app,
          actor,
          'refused',
          'no approval, and the client cannot ask its person (no elicitation); nothing was sent',
        );
        const url = this.o.approveUrl(plan.id);
        return toolError(
          `plan ${plan.id} is not approved, and this client cannot ask its person; nothing was sent. An app with ${scopesOf(plan)} approves it at ${url}; then call execute_plan again.`,
          {
            planId: plan.id,
            status: 'PENDING',
            code: 'APPROVAL_REQUIRED',
            approveUrl: url,
          },
        );
      }
      const approval = await this.o.plans.approve(plan.id, { owner: caller.scope, name: actor }, 'elicitation');
      if (!approval.ok) return toolError(`${approval.message}; nothing was sent`, { planId: plan.id });
    }

    if (!(await this.o.plans.claim(plan.id))) {
      return toolError(
        `plan ${plan.id} is being executed by another call, or its approval has expired; call execute_plan again`,
        { planId: plan.id, status: 'UNKNOWN' },
      );
    }
    let outcome: CallToolResult;
    try {
      outcome = await runOperationTool(
        this.o.pipeline,
        { query: document, ...(plan.operationName ? { operationName: plan.operationName } : {}) },
        new Set(Object.keys(plan.variables)),
        tool.estimate.operation,
        plan.variables,
        call,
        true,
      );
    } catch (err) {
      await this.o.plans.finish(plan.id, 'unknown', null);
      await this.o.plans.audit(
        plan.id,
        plan.app,
        actor,
        'unknown',
        `the execution failed before an answer: ${(err as Error).message}`,
      );
      return toolError(
        `the outcome of plan ${plan.id} is unknown: call execute_plan with planId ${plan.id} again; its idempotency key makes a repeat safe`,
        { planId: plan.id, status: 'UNKNOWN' },
      );
    }
    const structured = (outcome.structuredContent ?? {}) as Record<string, unknown>;
    const errors = (structured.errors as { code: string }[] | undefined) ?? [];
    const retryable = errors.some((e) => RETRYABLE.has(e.code));
    const status = !outcome.isError ? 'succeeded' : retryable ? 'unknown' : 'failed';
    await this.o.plans.finish(plan.id, status, structured);
    await this.o.plans.audit(
      plan.id,
      plan.app,
      actor,
      status === 'succeeded' ? 'executed' : status,
      `${plan.tool} with idempotency key ${plan.id}: ${status}`,
    );
    if (status === 'unknown') {
      return toolError(
        `the outcome of plan ${plan.id} is unknown (${errors.map((e) => e.code).join(', ')}): call execute_plan with planId ${plan.id} again; its idempotency key makes a repeat safe`,
        {
          planId: plan.id,
          status: 'UNKNOWN',
          ...structured,
        },
      );
    }
    return {
      ...outcome,
      structuredContent: { planId: plan.id, status: status.toUpperCase(), replayed: false, ...structured },
    };
  }

  /**
   * The person's answer in this round: `ask` when the client can elicit and was not asked yet; `accepted` only for an
   * accepted form whose requestState (sealed by the gateway, bound to this plan, hash and app) comes back intact.
   */
  private async elicited(plan: AgentPlan, call: ToolCall): Promise<'ask' | 'accepted' | 'declined' | 'cannot-ask'> {
    const ctx: ServerContext = call.ctx;
    const view = inputResponse(ctx.mcpReq.inputResponses, APPROVAL_INPUT);
    if (view.kind === 'elicit') {
      const state = ctx.mcpReq.requestState<ApprovalState>();
      if (!state || state.planId !== plan.id || state.hash !== plan.hash || state.owner !== call.caller.scope)
        return 'ask';
      return view.action === 'accept' && view.content?.approve === true ? 'accepted' : 'declined';
    }
    return canElicit(ctx) ? 'ask' : 'cannot-ask';
  }
}

/** The approve scopes a plan needs, in words. */
function scopesOf(plan: AgentPlan): string {
  return plan.domains.map(approveScopeOf).join(' and ');
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

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

/** Errors after which the request may have been applied, or was not sent yet: the plan can be executed again. */
const RETRYABLE = new Set([
  'UPSTREAM_OUTCOME_UNKNOWN',
  'UPSTREAM_UNAVAILABLE',
  'IDEMPOTENCY_KEY_IN_USE',
  'RATE_LIMITED',
  'INTERNAL_SERVER_ERROR',
]);

/** Whether the client declared form elicitation: in the request's envelope (2026-07-28) or at initialize (2025). */
function canElicit(ctx: ServerContext): boolean {
  const envelope = ctx.mcpReq.envelope as Record<string, unknown> | undefined;
  const declared = envelope?.[CLIENT_CAPABILITIES_META_KEY] as { elicitation?: unknown } | undefined;
  const elicitation = declared?.elicitation;
  return elicitation !== undefined && elicitation !== null;
}

const PLAN_OUTPUT: JsonSchema = {
  type: 'object',
  properties: {
    planId: { type: 'string', format: 'uuid' },
    hash: { type: 'string', description: 'sha256 of the exact requests; an approval holds for this hash only' },
    status: { type: 'string' },
    summary: { type: 'string' },
    requests: { description: 'The exact requests, secrets masked' },
    creations: { type: 'integer' },
    rateLimitPoints: { type: 'integer' },
    approveUrl: { type: 'string' },
  },
  required: ['planId', 'hash', 'status', 'summary', 'creations', 'rateLimitPoints'],
};

function planResult(plan: AgentPlan, approveUrl: string, text: string): CallToolResult {
  return {
    content: [{ type: 'text', text: `${text}\n\n${plan.summary}\nhash: ${plan.hash}` }],
    structuredContent: {
      planId: plan.id,
      hash: plan.hash,
      status: plan.status.toUpperCase(),
      summary: plan.summary,
      requests: plan.requests,
      creations: plan.creations,
      rateLimitPoints: plan.points,
      approveUrl,
    },
  };
}

function replayed(plan: AgentPlan): CallToolResult {
  const outcome = (plan.outcome ?? {}) as Record<string, unknown>;
  const failed = plan.status === 'failed';
  return {
    content: [
      {
        type: 'text',
        text: `${failed ? 'Plan failed before' : 'Plan executed before'}; the stored outcome is replayed, nothing was sent.\n${JSON.stringify(outcome)}`,
      },
    ],
    ...(failed ? { isError: true } : {}),
    structuredContent: { planId: plan.id, status: plan.status.toUpperCase(), replayed: true, ...outcome },
  };
}
