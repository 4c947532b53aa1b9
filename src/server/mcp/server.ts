// The MCP server of one request (docs/decisions/060): the endpoint is stateless, so each HTTP request gets a fresh
// low-level SDK Server holding the tools its app may see. What the endpoint offers is registered in one place, the
// McpSurface the composition root builds (src/server/mcp/surface.ts): tools, and resources (src/server/mcp/resources.ts), whose
// change notifications go out on subscriptions/listen streams (src/server/mcp/http.ts).
import type { CallToolResult, InputRequiredResult, Server, ServerContext } from '@modelcontextprotocol/server';

import type { Caller } from '../../auth/caller.js';
import { ErrorCode, GatewayError, INTERNAL_ERROR_MESSAGE as INTERNAL } from '../../errors.js';
import { logUnexpected, type Logger } from '../../logger.js';
import type { Delivery } from '../held-credentials.js';
import { checkedServer } from './params.js';
import type { McpResources } from './resources.js';
import { mcpSdk } from './sdk.js';
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
  /** Aborted, with the AuthFailure as its reason, when a reload refuses the request's credential. */
  readonly revoked?: AbortSignal;
  /** Aborted when the gateway shuts down: a call that waits answers at once with what it has. */
  readonly stopping?: AbortSignal;
  /** The request's caller as each reload that admits its credential again leaves it. */
  readonly readmitted?: Readmitted;
  /** Held while a reload checks the request's credential: what a waiting call found waits (held-credentials.ts). */
  readonly delivery?: Delivery;
}

/**
 * Calls `listener` with a request's caller as a reload left it, each time one admits the request's credential again
 * (at once when one already has: a reload may land between the request's authentication and the listener); returns
 * the function that stops it.
 */
export type Readmitted = (listener: (caller: Caller) => void) => () => void;

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
  /** The SDL, the catalog and the event-backed resources, on every toolset's endpoint; null when none is offered. */
  readonly resources: McpResources | null;
  readonly instructions: string;
  /** Operations left out because the gateway's own limits refuse them, each with the reason (logged at start-up). */
  readonly skipped: readonly string[];
  /**
   * Mutations MCP_MUTATIONS=approve does not offer because they cannot be planned (no dry run shows what they send),
   * each with the reason (logged at start-up).
   */
  readonly unplanned: readonly string[];
}

/** A tool error the model can read and act on (MCP: errors of a tool are results with isError, not protocol errors). */
export function toolError(text: string, structured?: Record<string, unknown>): CallToolResult {
  return { content: [{ type: 'text', text }], isError: true, ...(structured ? { structuredContent: structured } : {}) };
}

/**
 * The answer to a tool the endpoint does not offer: a call of it, and an execute_plan of a plan of it (a plan made on
 * another endpoint of the same app), are told the same.
 */
export function noSuchTool(name: string): CallToolResult {
  return toolError(`no tool ${JSON.stringify(name)} on this endpoint; tools/list shows the tools this app may call`);
}

export const SERVER_INFO = { name: 'graphql-gateway', version: '1.0.0' };

/**
 * The masking rule of docs/contract.md (Error codes) as MCP applies it to what was thrown: an error the gateway raised
 * on purpose (a GatewayError: the database away, say) as it is, anything else INTERNAL_SERVER_ERROR with nothing of its
 * own, and logged in full with `fields` (the request id). Every failure MCP answers, records or hands on goes
 * through here: a tool's, another request's, and a plan's run, whose words the audit trail keeps.
 */
export function masked(
  err: unknown,
  logger: Logger | undefined,
  fields: Record<string, unknown>,
  message: string,
): GatewayError {
  if (err instanceof GatewayError) return err;
  if (logger) logUnexpected(logger, err, fields, message);
  return new GatewayError(ErrorCode.INTERNAL_SERVER_ERROR, INTERNAL);
}

/**
 * What a tool's caller gets when the tool threw: the error by the masking rule (`masked`), as a tool error with its
 * code. Without this the SDK would answer a JSON-RPC error carrying the raw message. The protocol's own errors
 * (ProtocolError) stay protocol errors.
 */
function thrownByTool(err: unknown, logger: Logger | undefined, requestId: string, tool: string): CallToolResult {
  if (err instanceof mcpSdk().ProtocolError) throw err;
  const shown = masked(err, logger, { requestId, tool }, 'unexpected error in an MCP tool');
  const retryAfter = shown.extensions.retryAfter;
  return toolError(shown.message, {
    errors: [
      {
        message: shown.message,
        code: shown.code,
        ...(typeof retryAfter === 'number' ? { retryAfterSeconds: retryAfter } : {}),
      },
    ],
  });
}

/**
 * A request other than a tool call that threw (a resource read, a list): a protocol error, masked as a tool's is (it
 * has no error result). Without this the SDK would answer a JSON-RPC error carrying the raw message.
 */
function thrownByRequest(err: unknown, logger: Logger | undefined, requestId: string, method: string): never {
  const { ProtocolError, ProtocolErrorCode } = mcpSdk();
  if (err instanceof ProtocolError) throw err;
  const shown = masked(err, logger, { requestId, method }, 'unexpected error in an MCP request');
  // Masked: the protocol's own internal error, with nothing of the gateway's codes.
  if (!(err instanceof GatewayError)) throw new ProtocolError(ProtocolErrorCode.InternalError, INTERNAL);
  const retryAfter = shown.extensions.retryAfter;
  throw new ProtocolError(ProtocolErrorCode.InternalError, shown.message, {
    code: shown.code,
    ...(typeof retryAfter === 'number' ? { retryAfterSeconds: retryAfter } : {}),
  });
}

/** The SDK Server of one request of `caller` on `toolset`. */
export function createRequestServer(
  surface: McpSurface,
  toolset: string,
  caller: Caller,
  requestId: string,
  options: {
    requestState?: (state: string, ctx: ServerContext) => Promise<unknown>;
    era?: 'legacy' | 'modern';
    /** Where an unexpected error of a tool or a resource read is logged in full (the client gets none of it). */
    logger?: Logger;
    /** Aborted when a reload refuses the request's credential (ToolCall.revoked). */
    revoked?: AbortSignal;
    /** Aborted when the gateway shuts down (ToolCall.stopping). */
    stopping?: AbortSignal;
    /** The request's caller as each reload leaves it (ToolCall.readmitted). */
    readmitted?: Readmitted;
    /** ToolCall.delivery. */
    delivery?: Delivery;
  },
): Server {
  const tools = surface.toolsets.get(toolset) ?? [];
  const resources = surface.resources;
  // Changes of a resource reach a 2026-07-28 client on its subscriptions/listen stream. A 2025 client's
  // resources/subscribe would need a session that outlives the request, and this endpoint keeps none (any replica
  // serves any call): that era is told so, and pointed at wait_for_events.
  const subscribe = options.era !== 'legacy';
  const { ProtocolError, ProtocolErrorCode } = mcpSdk();
  // Every request's params are checked against the SDK's schema first, and refused in the gateway's words.
  const Server = checkedServer();
  const server = new Server(SERVER_INFO, {
    capabilities: {
      tools: { listChanged: false },
      ...(resources ? { resources: { subscribe, listChanged: false } } : {}),
    },
    instructions: surface.instructions,
    ...(options.requestState ? { requestState: { verify: options.requestState } } : {}),
  });
  const masked = <T>(method: string, list: () => T): T => {
    try {
      return list();
    } catch (err) {
      return thrownByRequest(err, options.logger, requestId, method);
    }
  };
  server.setRequestHandler('tools/list', () =>
    masked('tools/list', () => ({
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
    })),
  );
  server.setRequestHandler('tools/call', async (request, ctx) => {
    const tool = tools.find((t) => t.name === request.params.name);
    if (!tool) return noSuchTool(request.params.name);
    const refused = tool.refusal(caller);
    if (refused)
      return toolError(refused.message, { code: 'FORBIDDEN', ...(refused.scope ? { scope: refused.scope } : {}) });
    const args = request.params.arguments ?? {};
    try {
      return await tool.call(args, {
        caller,
        requestId,
        ctx,
        ...(options.revoked ? { revoked: options.revoked } : {}),
        ...(options.stopping ? { stopping: options.stopping } : {}),
        ...(options.readmitted ? { readmitted: options.readmitted } : {}),
        ...(options.delivery ? { delivery: options.delivery } : {}),
      });
    } catch (err) {
      return thrownByTool(err, options.logger, requestId, tool.name);
    }
  });
  if (resources) {
    server.setRequestHandler('resources/list', () =>
      masked('resources/list', () => ({ resources: resources.list(caller) })),
    );
    server.setRequestHandler('resources/templates/list', () =>
      masked('resources/templates/list', () => ({ resourceTemplates: resources.templates(caller) })),
    );
    server.setRequestHandler('resources/read', (request) =>
      resources
        .read(request.params.uri, caller, requestId)
        .catch((err: unknown) => thrownByRequest(err, options.logger, requestId, 'resources/read')),
    );
    const unsupported = () => {
      throw new ProtocolError(
        ProtocolErrorCode.MethodNotFound,
        'resources/subscribe is not served: this MCP endpoint is stateless (any replica answers any request), so it holds no session to send 2025-style notifications on. Use subscriptions/listen (protocol 2026-07-28), or call the wait_for_events tool with a cursor.',
      );
    };
    server.setRequestHandler('resources/subscribe', unsupported);
    server.setRequestHandler('resources/unsubscribe', unsupported);
  }
  return server;
}
