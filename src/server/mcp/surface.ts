// What the MCP endpoint offers (docs/decisions/060), built at start-up, its trusted documents' tools made again after
// each reload. This is the one place where tools are registered: the operation tools (built-in and trusted documents),
// the approval tools of MCP_MUTATIONS=approve, the operator's read-only `execute`, the toolsets of MCP_TOOLSETS, and
// the resources (the SDL, the catalog, and the event log's verifications, identifications, mobile-ID authentications
// and provisionings) with `wait_for_events`.
import type { CallToolResult } from '@modelcontextprotocol/server';
import type { GraphQLSchema, OperationDefinitionNode } from 'graphql';

import { classify, type OperationKind } from '../../agents/writes.js';
import type { AuthExpiry } from '../../auth/jwt.js';
import { ConfigError, type Config } from '../../config/index.js';
import type { Pipeline } from '../../execution/pipeline.js';
import type { LiveSubscriptions } from '../../ratelimit/live-subscriptions.js';
import type { Approvals } from './approval.js';
import { errorsResult, runOperationTool } from './operations.js';
import { linkProvisionings, McpResources, type EventSource } from './resources.js';
import { toolError, type McpSurface, type McpTool } from './server.js';
import { builtInTools, ManifestTools, refusalFor, type OperationTool } from './tools.js';
import { waitForEventsTool } from './wait.js';

export interface SurfaceOptions {
  readonly schema: GraphQLSchema;
  readonly pipeline: Pipeline;
  /**
   * The trusted documents' manifest in force, when TRUSTED_DOCUMENTS is on: each named operation is a tool. Read at
   * start-up and again by each `reload`.
   */
  readonly manifest: () => Iterable<readonly [string, string]> | undefined;
  /**
   * Whether the built-in tools are offered: not with TRUSTED_DOCUMENTS=enforce, under which only the manifest's
   * documents run, for agents as for every app.
   */
  readonly builtIn: boolean;
  readonly mcp: Config['mcp'];
  /** The approval tools; required with MCP_MUTATIONS=approve. */
  readonly approvals: Approvals | null;
  /** The app's events and their changes (src/events/cursor-read.ts EventReader). */
  readonly events: EventSource;
  /** The SDL, offered as a resource when introspection is on; null otherwise. */
  readonly sdl: string | null;
  /** When a wait_for_events made with a JWT ends: the rule and clock of the streams (src/auth/jwt.ts onExpiry). */
  readonly expiry?: AuthExpiry;
  /** Each app's live subscriptions (APP_LIVE_SUBSCRIPTIONS): a waiting wait_for_events counts as one. */
  readonly live?: LiveSubscriptions;
}

/**
 * A tool that runs its operation at once (a read, a harmless write, or a mutation under MCP_MUTATIONS=all). It runs
 * only what it was listed as (src/agents/writes.ts classify): a trusted document's id is resolved as the tool is
 * called, and a reload landing while a request that listed the tools runs may have put under it an operation of
 * another kind, such as a creation that needs a plan.
 */
function runningTool(schema: GraphQLSchema, pipeline: Pipeline, tool: OperationTool): McpTool {
  const accepted = new Set(Object.keys((tool.inputSchema.properties as Record<string, unknown>) ?? {}));
  const vet = (operation: OperationDefinitionNode): string | null => {
    const now = classify(schema, operation).kind;
    return now === tool.kind
      ? null
      : `${tool.name} is listed as ${KIND_WORDS[tool.kind]}, but a reload changed its trusted document, which now ` +
          `holds ${KIND_WORDS[now]}: tools/list shows it as it is now; nothing was run`;
  };
  return {
    name: tool.name,
    title: tool.title,
    description: tool.description,
    inputSchema: tool.inputSchema,
    outputSchema: tool.outputSchema,
    annotations: tool.annotations,
    refusal: (caller) => refusalFor(tool, caller),
    call: (args, call) => runOperationTool(pipeline, tool.params, accepted, tool.estimate.operation, args, call, vet),
  };
}

const KIND_WORDS: Readonly<Record<OperationKind, string>> = {
  read: 'a read',
  write: 'a write that reaches no upstream',
  creation: 'a mutation that reaches an upstream, which MCP_MUTATIONS=approve plans and runs only once approved',
};

/** MCP_EXECUTE: any query (never a mutation or subscription), for apps holding `operator`. */
function executeTool(pipeline: Pipeline): McpTool {
  return {
    name: 'execute',
    title: 'Run a read-only GraphQL query',
    description:
      'Runs one GraphQL query (never a mutation or a subscription) through the gateway, with the same scopes, cost limit, rate limit and trusted documents as any request. For operators.',
    inputSchema: {
      type: 'object',
      properties: {
        query: { type: 'string', description: 'The GraphQL query.' },
        variables: { type: 'object', description: 'Its variables.' },
        operationName: { type: 'string', description: 'The operation to run, when the query holds several.' },
      },
      required: ['query'],
      additionalProperties: false,
    },
    annotations: {
      title: 'Run a read-only GraphQL query',
      readOnlyHint: true,
      destructiveHint: false,
      idempotentHint: true,
      openWorldHint: true,
    },
    refusal: (caller) =>
      caller.grants.has('operator')
        ? null
        : {
            message: 'execute needs the scope operator, which this app does not hold; nothing was run',
            scope: 'operator',
          },
    call: async (args, call) => {
      const extra = Object.keys(args).find((k) => !['query', 'variables', 'operationName'].includes(k));
      if (extra !== undefined)
        return toolError(
          `Invalid argument ${extra}: execute takes query, variables and operationName; nothing was run`,
          { errors: [{ code: 'BAD_USER_INPUT', argument: extra }] },
        );
      const { query, variables, operationName } = args as {
        query?: unknown;
        variables?: unknown;
        operationName?: unknown;
      };
      if (typeof query !== 'string' || !query)
        return toolError('Invalid argument query: a GraphQL query text is required; nothing was run', {
          errors: [{ code: 'BAD_USER_INPUT', argument: 'query' }],
        });
      if (
        variables !== undefined &&
        (variables === null || typeof variables !== 'object' || Array.isArray(variables))
      ) {
        return toolError('Invalid argument variables: an object of variables; nothing was run', {
          errors: [{ code: 'BAD_USER_INPUT', argument: 'variables' }],
        });
      }
      if (operationName !== undefined && typeof operationName !== 'string')
        return toolError('Invalid argument operationName: a string; nothing was run', {
          errors: [{ code: 'BAD_USER_INPUT', argument: 'operationName' }],
        });
      const outcome = await pipeline.runOperation({
        caller: call.caller,
        params: {
          query,
          ...(variables ? { variables: variables as Record<string, unknown> } : {}),
          ...(operationName ? { operationName } : {}),
        },
        transport: 'mcp',
        requestId: call.requestId,
        allow: ['query' as never],
      });
      if (!outcome.ok) return errorsResult(outcome.errors);
      if (outcome.result.errors?.length) return errorsResult(outcome.result.errors, outcome.result.data);
      return {
        content: [{ type: 'text', text: JSON.stringify(outcome.result.data ?? null) }],
        structuredContent: { ...(outcome.result.data ?? {}) },
      };
    },
  };
}

/** `tool`, its results linking the provisionings they started (src/server/mcp/resources.ts linkProvisionings). */
function linkingProvisionings(tool: McpTool, resources: McpResources): McpTool {
  return {
    ...tool,
    call: async (args, call) => {
      const result = await tool.call(args, call);
      return 'content' in result ? linkProvisionings(resources, result as CallToolResult) : result;
    },
  };
}

/** What the endpoint offers, its trusted documents' tools as the manifest in force makes them. */
export interface LiveSurface extends McpSurface {
  /**
   * Makes the trusted documents' tools again from the manifest in force (after a reload swapped it): requests from
   * then on list and call them. Returns what each MCP_TOOLSETS toolset names that is no longer a tool (start-up
   * refuses such a name; after a reload the toolset offers the rest, and the names are logged).
   */
  reload(): { readonly missing: readonly string[] };
}

export function buildSurface(o: SurfaceOptions): LiveSurface {
  const skippedBuiltIn: string[] = [];
  const builtIn = o.builtIn ? builtInTools(o.schema, o.pipeline, skippedBuiltIn) : [];
  // Resources are read through the built-in reads (not offered under TRUSTED_DOCUMENTS=enforce: only the manifest runs).
  const resources = new McpResources(o.pipeline, builtIn, o.builtIn ? o.sdl : null, o.events);
  const waiting = resources.hasEvents ? waitForEventsTool(resources, o.expiry, o.live) : null;
  const execute = o.mcp.execute ? executeTool(o.pipeline) : null;
  // Every tool the gateway registers of its own keeps its name: a trusted document's operation of one of them is
  // left out, and named at start-up and at each reload.
  const manifestTools = new ManifestTools(
    o.schema,
    o.pipeline,
    new Set([
      ...builtIn.map((t) => t.name),
      ...(o.mcp.mutations === 'approve' ? ['execute_plan'] : []),
      ...(execute ? [execute.name] : []),
      ...(waiting ? [waiting.name] : []),
    ]),
  );
  // Every creation tool offered since start-up, as last made: a plan of one that a reload took away is still worked
  // out against the manifest now by execute_plan, and refused as changed, not as a plan of no tool.
  const offered = new Map<string, OperationTool>();

  const make = (atStart: boolean) => {
    const skipped = [...skippedBuiltIn];
    const manifest = o.manifest();
    const operations = [...builtIn, ...(manifest ? manifestTools.tools(manifest, skipped) : [])];
    const byName = new Map(operations.map((t) => [t.name, t]));
    for (const tool of operations) if (tool.kind === 'creation') offered.set(tool.name, tool);
    const tools: McpTool[] = [];
    const unplanned: string[] = [];
    for (const tool of operations) {
      if (tool.kind === 'read') tools.push(runningTool(o.schema, o.pipeline, tool));
      else if (o.mcp.mutations === 'all') tools.push(runningTool(o.schema, o.pipeline, tool));
      else if (o.mcp.mutations === 'approve') {
        // A creation is always planned (a plan gives its writes their idempotency keys); one that has no dry run
        // could not show what it sends, so it is not offered, and named at start-up and at each reload.
        if (tool.kind === 'write') tools.push(runningTool(o.schema, o.pipeline, tool));
        else if (tool.classified.unplannable) unplanned.push(`${tool.name} (${tool.classified.unplannable})`);
        else tools.push(o.approvals!.planningTool(tool));
      }
    }
    // A result that started a provisioning links its resource (long provisioning: a resource plus notifications).
    const linking = (tool: McpTool) => (resources.hasEvents ? linkingProvisionings(tool, resources) : tool);
    if (o.mcp.mutations === 'approve') tools.push(o.approvals!.executeTool(byName, offered));
    if (execute) tools.push(execute);
    for (const [i, tool] of tools.entries()) tools[i] = linking(tool);
    if (waiting) tools.push(waiting);

    const known = new Set([
      ...operations.map((t) => t.name),
      'execute_plan',
      'execute',
      ...(waiting ? [waiting.name] : []),
    ]);
    const toolsets = new Map<string, readonly McpTool[]>([['', tools]]);
    const missing: string[] = [];
    for (const [name, names] of o.mcp.toolsets) {
      for (const unknown of names.filter((n) => n !== '*' && !known.has(n))) {
        if (atStart)
          throw new ConfigError(
            'MCP_TOOLSETS',
            `the toolset ${name} names ${unknown}, which is no tool of this gateway (the tools: ${[...known].join(', ')})`,
          );
        missing.push(`${name}: ${unknown}`);
      }
      if (names.includes('*')) {
        toolsets.set(name, tools);
        continue;
      }
      // The toolset's own execute_plan: it runs (and puts to the person) only plans of the tools the toolset offers.
      const offers = (tool: string) => names.includes(tool);
      toolsets.set(
        name,
        tools
          .filter((t) => offers(t.name))
          .map((t) => (t.name === 'execute_plan' ? linking(o.approvals!.executeTool(byName, offered, offers)) : t)),
      );
    }
    return { toolsets, skipped, unplanned, missing };
  };

  let current = make(true);
  const instructions = [
    "Tools of a GraphQL gateway over a cloud provider and identity services. Each tool runs one named operation with your app's scopes; tools/list shows only what your app may call.",
    o.mcp.mutations === 'none'
      ? 'This gateway lets agents read and plan only: nothing is created through MCP.'
      : o.mcp.mutations === 'approve'
        ? 'Creation tools only plan: execute_plan(planId) runs a plan once a person approves it (you will be asked through the client) or an approver app approves it.'
        : 'Mutation tools run at once.',
  ].join(' ');
  return {
    get toolsets() {
      return current.toolsets;
    },
    resources: resources.offered ? resources : null,
    instructions,
    get skipped() {
      return current.skipped;
    },
    get unplanned() {
      return current.unplanned;
    },
    reload() {
      current = make(false);
      return { missing: current.missing };
    },
  };
}
