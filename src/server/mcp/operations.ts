// A tool call that runs a GraphQL operation: through the execution pipeline (src/execution/pipeline.ts), like every
// transport, and its answer as MCP tool results: the data as structuredContent, errors as tool errors that name the
// offending argument so a model can correct itself.
import type { CallToolResult } from '@modelcontextprotocol/server';
import type { GraphQLFormattedError, OperationTypeNode } from 'graphql';

import type { Executed, OperationParams, Pipeline, Refusal, RunOperation } from '../../execution/pipeline.js';
import { toolError, type ToolCall } from './server.js';
import { codeOf } from './tools.js';

/** The argument an error is about, as a path (`input.network.cidr`), when it names one. */
export function argumentOf(error: GraphQLFormattedError): string | undefined {
  const field = error.extensions?.field;
  if (typeof field === 'string' && field) return field;
  const m = /^Variable "\$([^"]+)" (?:got invalid value(?: at "([^"]+)")?|of (?:required|non-null) type)/.exec(
    error.message,
  );
  if (!m) return undefined;
  const at = m[2] ?? m[1]!;
  const inner = /Field "([^"]+)" (?:of required type|is not defined)/.exec(error.message);
  return inner ? `${at}.${inner[1]}` : at;
}

/** A tool error for GraphQL errors: each names its argument (or its scope), and all are in structuredContent. */
export function errorsResult(errors: readonly GraphQLFormattedError[], data?: unknown): CallToolResult {
  const described = errors.map((e) => {
    const argument = argumentOf(e);
    const code = codeOf(e);
    const scope = typeof e.extensions?.scope === 'string' ? e.extensions.scope : undefined;
    const retryAfter = e.extensions?.retryAfter;
    // A per-app bound's refusal (RATE_LIMITED) names it, its limit and the variable that sets it, as over GraphQL.
    const { bound, limit, variable } = e.extensions ?? {};
    // The gateway's own refusals already start with the path (`input.cidr: …`): it is said once.
    const why = argument && e.message.startsWith(`${argument}: `) ? e.message.slice(argument.length + 2) : e.message;
    const text =
      argument && (code === 'BAD_USER_INPUT' || e.message.startsWith('Variable "$'))
        ? `Invalid argument ${argument}: ${why}`
        : e.message;
    return {
      text,
      error: {
        message: e.message,
        code,
        ...(argument ? { argument } : {}),
        ...(scope ? { scope } : {}),
        ...(typeof retryAfter === 'number' ? { retryAfterSeconds: retryAfter } : {}),
        ...(typeof bound === 'string' ? { bound, limit, ...(typeof variable === 'string' ? { variable } : {}) } : {}),
      },
    };
  });
  return toolError(described.map((d) => d.text).join('\n'), {
    errors: described.map((d) => d.error),
    ...(data !== undefined && data !== null ? { data } : {}),
  });
}

/**
 * Runs `params` with the tool's arguments as variables. An argument the tool does not take is refused by name
 * (GraphQL would ignore an unknown variable; a model that misspells one should hear of it). `vet` refuses an
 * operation that does not do what the tool was listed for (src/execution/pipeline.ts RunOperation.vet).
 */
export async function runOperationTool(
  pipeline: Pipeline,
  params: Pick<OperationParams, 'query' | 'documentId' | 'operationName'>,
  accepted: ReadonlySet<string>,
  operation: OperationTypeNode,
  args: Record<string, unknown>,
  call: Pick<ToolCall, 'caller' | 'requestId'>,
  vet?: RunOperation['vet'],
): Promise<CallToolResult> {
  const unknown = Object.keys(args).find((k) => !accepted.has(k));
  if (unknown !== undefined) {
    const takes = accepted.size ? `it takes ${[...accepted].join(', ')}` : 'it takes none';
    return toolError(
      `Invalid argument ${unknown}: this tool takes no argument ${unknown} (${takes}); nothing was run`,
      { errors: [{ code: 'BAD_USER_INPUT', argument: unknown, message: `unknown argument ${unknown}` }] },
    );
  }
  const outcome = await pipeline.runOperation({
    caller: call.caller,
    params: { ...params, variables: args },
    transport: 'mcp',
    requestId: call.requestId,
    allow: [operation],
    ...(vet ? { vet } : {}),
  });
  return toolResultOf(outcome);
}

/** An operation's outcome as a tool's result: the pipeline's refusal or the run's errors, else its data. */
export function toolResultOf(outcome: Refusal | Executed): CallToolResult {
  if (!outcome.ok) return errorsResult(outcome.errors);
  const { data, errors, extensions } = outcome.result;
  if (errors?.length) return errorsResult(errors, data);
  const structured: Record<string, unknown> = { ...(data ?? {}) };
  return {
    content: [{ type: 'text', text: JSON.stringify(data ?? null) + warningsLine(extensions?.warnings) }],
    structuredContent: structured,
  };
}

/** The warnings of a result (`extensions.warnings`) as a tool's text ends with them: `\nwarnings: <JSON>`, or nothing. */
export function warningsLine(warnings: unknown): string {
  return Array.isArray(warnings) && warnings.length ? `\nwarnings: ${JSON.stringify(warnings)}` : '';
}
