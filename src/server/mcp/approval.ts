// MCP's shapes of the agent-plan workflow (src/agents/workflow.ts, docs/decisions/060): under MCP_MUTATIONS=approve a
// creation tool only plans, and execute_plan runs a plan once. Here are the tools' schemas, their results, and the
// elicitation: an input_required form, answered by the client's user interface, never by a tool argument the model
// fills, whose requestState is sealed by the gateway and bound to the plan, its hash and its app.
import type { CallToolResult, RequestStateCodec, ServerContext } from '@modelcontextprotocol/server';

import type { AgentPlan } from '../../agents/plans.js';
import { approveScopesOf, type AgentWorkflow, type PersonAnswer, type Unplannable } from '../../agents/workflow.js';
import { readableBy } from '../../auth/tenancy.js';
import type { Pipeline } from '../../execution/pipeline.js';
import type { Logger } from '../../logger.js';
import { errorsResult, toolResultOf, warningsLine } from './operations.js';
import { mcpSdk } from './sdk.js';
import { masked, noSuchTool, toolError, type McpTool, type ToolCall, type ToolResult } from './server.js';
import type { JsonSchema } from './shapes.js';
import { refusalFor, type OperationTool } from './tools.js';

/**
 * What the requestState of an elicitation carries back: the plan, hash and status the person was shown, when the plan
 * last changed as they were shown it, and whose it is. An answer given for a pending plan approves no run of it once
 * its last run's outcome is unknown; one given for an unknown plan approves its next run, not a run after that one
 * (whose outcome was unknown too: the status reads the same, the plan's last change does not).
 */
interface ApprovalState {
  planId: string;
  hash: string;
  owner: string;
  status: string;
  changedAt: number;
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

export class Approvals {
  constructor(
    private readonly workflow: AgentWorkflow,
    private readonly pipeline: Pipeline,
    private readonly codec: RequestStateCodec<ApprovalState>,
    /** Where a run's unexpected failure is logged in full (the audit trail keeps only the masked words). */
    private readonly logger: Logger,
  ) {}

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
        const made = await this.workflow.make(tool, args, call.caller);
        if (!made.ok) return unplannableResult(made.why);
        const { plan } = made;
        const url = this.workflow.approveUrl(plan.id);
        return planResult(
          plan,
          url,
          this.workflow.approval === 'elicitation'
            ? `Plan ${plan.id} made; nothing was sent. Call execute_plan with planId ${plan.id}: a person approves it in this client, or an app with ${approveScopesOf(plan)} approves it at ${url}.`
            : `Plan ${plan.id} made; nothing was sent. A person or app holding ${approveScopesOf(plan)} approves it at ${url}; then call execute_plan with planId ${plan.id}.`,
        );
      },
    };
  }

  /**
   * execute_plan(planId): runs an approved plan once, or asks the person for the approval, or refuses. `tools`: the
   * tools offered now; `offered`: every creation tool offered since start-up, as last made, for a plan of one that a
   * reload took away (its document left the manifest: the workflow refuses it as changed). `offers`: whether the
   * endpoint serving it offers a tool (a toolset of MCP_TOOLSETS names some): a plan is its app's whichever endpoint
   * made it, and one of a tool this endpoint leaves out is neither run nor put to the person here, and is answered as a
   * call of that tool here is.
   */
  executeTool(
    tools: ReadonlyMap<string, OperationTool>,
    offered: ReadonlyMap<string, OperationTool>,
    offers: (name: string) => boolean = () => true,
  ): McpTool {
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
        [...tools.values()].some((t) => t.kind === 'creation' && offers(t.name) && refusalFor(t, caller) === null)
          ? null
          : {
              message: 'execute_plan runs plans of creation tools, none of which this app may call; nothing was sent',
              scope: undefined,
            },
      call: (args, call) =>
        this.execute((name) => (offers(name) ? (tools.get(name) ?? offered.get(name) ?? null) : undefined), args, call),
    };
  }

  /** `toolOf`: a plan's tool, null when it is offered no longer, undefined when this endpoint does not offer it. */
  private async execute(
    toolOf: (name: string) => OperationTool | null | undefined,
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
    const plan = await this.workflow.find(planId, caller);
    if (!plan)
      return toolError(`no plan ${planId} of this app; nothing was sent`, {
        errors: [{ code: 'NOT_FOUND', argument: 'planId' }],
      });
    const tool = toolOf(plan.tool);
    if (tool === undefined) return noSuchTool(plan.tool);
    if (tool === null)
      return toolError(`plan ${plan.id} is for ${plan.tool}, which this endpoint no longer offers; nothing was sent`, {
        errors: [{ code: 'NOT_FOUND' }],
      });
    const refused = refusalFor(tool, caller);
    if (refused)
      return toolError(refused.message, { code: 'FORBIDDEN', ...(refused.scope ? { scope: refused.scope } : {}) });

    let outcome: CallToolResult | undefined;
    const execution = await this.workflow.execute(plan, tool, caller, call.requestId, {
      askPerson: (p) => this.elicited(p, call),
      run: async (p, document) => {
        // The plan's stored text and variables, which the trusted documents admitted when it was made. What the run
        // throws reaches the workflow, which records its words in the audit trail, masked as a tool's would be.
        const ran = await this.pipeline
          .runOperation({
            caller,
            params: {
              query: document,
              ...(p.operationName ? { operationName: p.operationName } : {}),
              variables: p.variables,
            },
            transport: 'mcp',
            requestId: call.requestId,
            allow: [tool.estimate.operation],
            trustedResolved: true,
          })
          .catch((err: unknown) => {
            throw masked(
              err,
              this.logger,
              { requestId: call.requestId, tool: 'execute_plan', planId: p.id },
              "unexpected error in an agent plan's run",
            );
          });
        outcome = toolResultOf(ran);
        // The warnings go into the stored outcome beside the data, so that a repeated execute_plan, which replays it,
        // tells them as this run's text does (replayed). Under a key no GraphQL response key can be (a name never starts
        // with `@`), so that a root field aliased `warnings` stays data.
        const warnings = ran.ok && outcome.isError !== true ? ran.result.extensions?.warnings : undefined;
        return {
          failed: outcome.isError === true,
          structured: {
            ...((outcome.structuredContent ?? {}) as Record<string, unknown>),
            ...(Array.isArray(warnings) && warnings.length ? { [STORED_WARNINGS]: warnings } : {}),
          },
          refused: !ran.ok,
          errors: ran.ok ? (ran.result.errors ?? []) : ran.errors,
        };
      },
    });
    switch (execution.kind) {
      case 'unplannable':
        return unplannableResult(execution.why);
      case 'refused':
        return toolError(execution.message, execution.details);
      case 'replayed':
        return replayed(execution.plan);
      case 'ask-person': {
        const { inputRequired } = mcpSdk();
        return inputRequired({
          inputRequests: {
            [APPROVAL_INPUT]: inputRequired.elicit({
              mode: 'form',
              message:
                (plan.status === 'unknown' ? `${UNKNOWN_OUTCOME}\n\n` : '') +
                `${plan.summary}\n\nPlan ${plan.id}, hash ${plan.hash}. The exact requests: ${this.workflow.approveUrl(plan.id)}`,
              requestedSchema: APPROVAL_FORM,
            }),
          },
          requestState: await this.codec.mint({
            planId: plan.id,
            hash: plan.hash,
            owner: caller.scope,
            status: plan.status,
            changedAt: plan.changedAt,
          }),
        });
      }
      case 'ran':
        return {
          ...outcome!,
          structuredContent: {
            planId: plan.id,
            status: execution.status.toUpperCase(),
            replayed: false,
            ...((outcome!.structuredContent ?? {}) as Record<string, unknown>),
          },
        };
    }
  }

  /**
   * The person's answer in this round: `ask` when the client can elicit and was not asked yet; `accepted` only for an
   * accepted form whose requestState (sealed by the gateway, bound to this plan, hash and app) comes back intact.
   */
  private async elicited(plan: AgentPlan, call: ToolCall): Promise<PersonAnswer> {
    const ctx: ServerContext = call.ctx;
    const view = mcpSdk().inputResponse(ctx.mcpReq.inputResponses, APPROVAL_INPUT);
    if (view.kind === 'elicit') {
      const state = ctx.mcpReq.requestState<ApprovalState>();
      if (
        !state ||
        state.planId !== plan.id ||
        state.hash !== plan.hash ||
        state.status !== plan.status ||
        state.changedAt !== plan.changedAt ||
        !readableBy(call.caller, state.owner)
      )
        return 'ask';
      return view.action === 'accept' && view.content?.approve === true ? 'accepted' : 'declined';
    }
    return canElicit(ctx) ? 'ask' : 'cannot-ask';
  }
}

/** What the form of a plan whose last run's outcome is unknown tells the person first. */
const UNKNOWN_OUTCOME =
  'The outcome of the last run of this plan is unknown: it may have been applied upstream. Check there first; ' +
  'approving runs it again.';

/** Why nothing was planned, as a tool error: the pipeline's errors, or the dry run's by argument. */
function unplannableResult(why: Unplannable): CallToolResult {
  if ('errors' in why) return errorsResult(why.errors);
  return toolError(
    why.invalid.map((e) => (e.field ? `Invalid argument ${e.field}: ${e.message}` : e.message)).join('\n') +
      '\nNothing was planned.',
    {
      errors: why.invalid.map((e) => ({
        code: e.code,
        message: e.message,
        ...(e.field ? { argument: e.field } : {}),
      })),
    },
  );
}

/** Whether the client declared form elicitation: in the request's envelope (2026-07-28) or at initialize (2025). */
function canElicit(ctx: ServerContext): boolean {
  const envelope = ctx.mcpReq.envelope as Record<string, unknown> | undefined;
  const declared = envelope?.[mcpSdk().CLIENT_CAPABILITIES_META_KEY] as { elicitation?: unknown } | undefined;
  const elicitation = declared?.elicitation;
  return elicitation !== undefined && elicitation !== null;
}

const PLAN_OUTPUT: JsonSchema = {
  type: 'object',
  properties: {
    planId: { type: 'string', format: 'uuid' },
    hash: {
      type: 'string',
      description:
        "the gateway's keyed digest (HMAC-SHA256) of the exact requests; an approval holds for this hash only",
    },
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

/** Where a run's warnings are kept in its stored outcome, beside its data's root fields. */
const STORED_WARNINGS = '@warnings';

function replayed(plan: AgentPlan): CallToolResult {
  // The run's warnings, stored beside its data, end the text as they did the run's, and stay out of its data.
  const { [STORED_WARNINGS]: warnings, ...outcome } = (plan.outcome ?? {}) as Record<string, unknown>;
  const failed = plan.status === 'failed';
  return {
    content: [
      {
        type: 'text',
        text: `${failed ? 'Plan failed before' : 'Plan executed before'}; the stored outcome is replayed, nothing was sent.\n${JSON.stringify(outcome)}${warningsLine(warnings)}`,
      },
    ],
    ...(failed ? { isError: true } : {}),
    structuredContent: { planId: plan.id, status: plan.status.toUpperCase(), replayed: true, ...outcome },
  };
}
