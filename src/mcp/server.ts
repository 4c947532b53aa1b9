// The MCP server of one request (docs/decisions/060): the endpoint is stateless, so each HTTP request gets a fresh
// low-level SDK Server holding the tools its app may see. What the endpoint offers is registered in one place, the
// McpSurface the composition root builds (src/mcp/surface.ts): tools today; resources and their notifications join it.
import { Server, type CallToolResult, type InputRequiredResult, type ServerContext } from '@modelcontextprotocol/server';
import type { Caller } from '../caller.js';
import type { JsonSchema } from './shapes.js';
import type { ToolAnnotations } from './tools.js';

/** Why a caller may not call a tool: the admit stage's words, and the scope it lacks. */
export interface ToolRefusal {
  readonly message: string;
  readonly scope: string | undefined;
}

/** What a tool's call knows of its request. */
export interface ToolCall {
  readonly caller: Caller;
  readonly requestId: string;
  /** The SDK's context: the multi-round-trip input responses and request state (approvals), the protocol era. */
  readonly ctx: ServerContext;
}

export type ToolResult = CallToolResult | InputRequiredResult;

export interface McpTool {
  readonly name: string;
  readonly title: string;
  readonly description: string;
  readonly inputSchema: JsonSchema;
  readonly outputSchema?: JsonSchema;
  readonly annotations: ToolAnnotations;
  /** Null when `caller` may call it; else the refusal (a call is refused with it, and nothing runs). */
  refusal(caller: Caller): ToolRefusal | null;
  call(args: Record<string, unknown>, call: ToolCall): Promise<ToolResult>;
}

/** Everything the endpoint offers, per toolset (`''` is /mcp: every tool). */
export interface McpSurface {
  readonly toolsets: ReadonlyMap<string, readonly McpTool[]>;
  readonly instructions: string;
}

/** A tool error the model can read and act on (MCP: errors of a tool are results with isError, not protocol errors). */
export function toolError(text: string, structured?: Record<string, unknown>): CallToolResult {
  return { content: [{ type: 'text', text }], isError: true, ...(structured ? { structuredContent: structured } : {}) };
}

export const SERVER_INFO = { name: 'graphql-gateway', version: '1.0.0' };

/** The SDK Server of one request of `caller` on `toolset`. */
export function createRequestServer(
  surface: McpSurface,
  toolset: string,
  caller: Caller,
  requestId: string,
  options: { requestState?: (state: string, ctx: ServerContext) => Promise<unknown> },
): Server {
  const tools = surface.toolsets.get(toolset) ?? [];
  const server = new Server(SERVER_INFO, {
    capabilities: { tools: { listChanged: false } },
    instructions: surface.instructions,
    ...(options.requestState ? { requestState: { verify: options.requestState } } : {}),
  });
  server.setRequestHandler('tools/list', () => ({
    tools: tools
      .filter((t) => t.refusal(caller) === null)
      .map((t) => ({
        name: t.name,
        title: t.title,
        description: t.description,
        inputSchema: t.inputSchema as { type: 'object' },
        ...(t.outputSchema ? { outputSchema: t.outputSchema as { type: 'object' } } : {}),
        annotations: t.annotations,
      })),
  }));
  server.setRequestHandler('tools/call', async (request, ctx) => {
    const tool = tools.find((t) => t.name === request.params.name);
    if (!tool) return toolError(`no tool ${JSON.stringify(request.params.name)} on this endpoint; tools/list shows the tools this app may call`);
    const refused = tool.refusal(caller);
    if (refused) return toolError(refused.message, { code: 'FORBIDDEN', ...(refused.scope ? { scope: refused.scope } : {}) });
    const args = request.params.arguments ?? {};
    return tool.call(args, { caller, requestId, ctx });
  });
  return server;
}
