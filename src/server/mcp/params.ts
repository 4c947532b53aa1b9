// A request whose params the SDK's schema refuses (resources/read with a number for its uri, initialize with none of
// its fields, tools/call with arguments in a string) is answered JSON-RPC -32602 in the gateway's words, naming the
// field, with its own id, alone or in a batch, and nothing runs (docs/decisions/161). The SDK checks every request
// against its schema before the handler and would answer -32603 (-32602 for tools/call) with a dump of zod's issues.
//
// One rule for every method, by the SDK's own check: the server of each request is a subclass of the SDK's Server
// whose `_wrapHandler` (the SDK's hook for subclasses, run for every handler, the SDK's own initialize and ping too)
// asks the same codec the SDK's check asks, first; what that codec refuses, the SDK would have refused. The one request
// served by no handler, subscriptions/listen (the SDK's listen router), is checked by `refusedParams` with the same
// codec and words before the route counts or charges it (src/server/mcp/http.ts).
import type { JSONRPCRequest, Result, Server, ServerContext } from '@modelcontextprotocol/server';

import { mcpSdk } from './sdk.js';

/** What a JSON value is, in words: `a string`, `an array`, `null`. */
function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

/** What a field holds, said where the bare schema would say little (keyed by method and field). */
const MEANT: Record<string, { what: string; missing?: string }> = {
  'tools/call params': { what: "the tool's name and its arguments" },
  'tools/call params.name': {
    what: "the tool's name",
    missing: 'name the tool to call (tools/list shows the tools this app may call)',
  },
  'tools/call params.arguments': { what: "the tool's arguments by name" },
  'resources/read params': { what: "the resource's uri" },
  'resources/read params.uri': {
    what: "the resource's URI",
    missing: 'name the resource to read (resources/list and resources/templates/list show those this app may read)',
  },
  'initialize params': { what: 'the protocolVersion, capabilities and clientInfo of the client' },
  'initialize params.protocolVersion': { what: 'the protocol revision the client speaks, such as "2025-11-25"' },
  'initialize params.capabilities': { what: 'what the client can do; {} when nothing' },
  'initialize params.clientInfo': { what: "the client's name and version" },
  'subscriptions/listen params.notifications': {
    what: 'the changes to be told of, such as {"resourceSubscriptions": ["<resource URI>"]}',
  },
  'subscriptions/listen params.notifications.resourceSubscriptions': {
    what: 'the URIs of the resources whose changes are to be told',
  },
};

/** One issue of zod's, as the SDK's codec writes them (`String(ZodError)`: a JSON array). */
interface Issue {
  readonly code?: unknown;
  readonly path?: unknown;
  readonly expected?: unknown;
  readonly values?: unknown;
}

/** Zod's names of what it expected, in JSON's words. */
const JSON_NAME: Record<string, string> = { record: 'object', int: 'integer', tuple: 'array' };

const article = (expected: string) => {
  const noun = JSON_NAME[expected] ?? expected;
  return /^[aeiou]/.test(noun) ? `an ${noun}` : `a ${noun}`;
};

/**
 * The refusal of `request` of `method` by the SDK's schema, in the gateway's words: the first field its check names
 * (`params.clientInfo.name`), what is there and what is expected. `issues` is the codec's text of zod's issues; a text
 * it cannot read (another zod) still makes a refusal, of `params`.
 */
function invalidParams(method: string, request: JSONRPCRequest, issues: string): { message: string; field: string } {
  let issue: Issue = {};
  try {
    const parsed: unknown = JSON.parse(issues);
    if (Array.isArray(parsed) && parsed[0] && typeof parsed[0] === 'object') issue = parsed[0] as Issue;
  } catch {
    // Not zod's JSON: the refusal names params, and says no more than that it is refused.
  }
  const path = Array.isArray(issue.path) && issue.path.length ? (issue.path as unknown[]) : ['params'];
  const field = path.map((p, i) => (typeof p === 'number' ? `[${p}]` : `${i ? '.' : ''}${String(p)}`)).join('');
  let value: unknown = request;
  for (const p of path)
    value = value && typeof value === 'object' ? (value as Record<string, unknown>)[String(p)] : undefined;
  const meant = MEANT[`${method} ${field}`];
  const why = meant ? ` (${meant.what})` : '';
  const there = value === undefined ? 'missing' : kindOf(value);
  let said: string;
  if (issue.code === 'invalid_type' && typeof issue.expected === 'string') {
    said =
      value === undefined && meant?.missing
        ? `${field} is missing: ${meant.missing}`
        : `${field} is ${there} where ${article(issue.expected)} is expected${why}`;
  } else if (issue.code === 'invalid_value' && Array.isArray(issue.values)) {
    const shown = value === undefined ? 'missing' : JSON.stringify(value);
    said = `${field} is ${shown} where one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')} is expected${why}`;
  } else {
    said = `${field} is ${there}, which is not what the protocol allows there${why}`;
  }
  return { field, message: `Invalid params: ${said}` };
}

type Handler = (request: JSONRPCRequest, ctx: ServerContext) => Promise<Result>;

/** The SDK's check of `request` of `method`, by the codec of protocol `revision`: the refusal, or null. */
type Check = (revision: string, method: string, request: JSONRPCRequest) => { message: string; field: string } | null;

let checked: { Server: typeof Server; check: Check } | null = null;

/** The SDK's Server with the check of every request's params, and the check alone, made on first use. */
function made(): { Server: typeof Server; check: Check } {
  if (checked) return checked;
  const { Server, ProtocolError, ProtocolErrorCode } = mcpSdk();
  class CheckedServer extends Server {
    /**
     * The check by a server of `revision` that serves nothing (made for the one call: a Server is cheap to make): its
     * codec is the one an instance bound to that revision checks a request with. The SDK's entry binds a request's
     * server to its era by this same field.
     */
    static check(revision: string, method: string, request: JSONRPCRequest) {
      const server = new CheckedServer({ name: 'params', version: '0' });
      server._negotiatedProtocolVersion = revision;
      return server.refusal(method, request);
    }

    /**
     * The check the SDK makes before a handler (Protocol.setRequestHandler, Server's tools/call wrapper): the codec
     * of the era the instance serves; a method outside the era's schemas is left to the SDK.
     */
    private refusal(method: string, request: JSONRPCRequest): { message: string; field: string } | null {
      const outcome = this._wireCodec().validateRequest(method, request);
      if (outcome.ok || outcome.reason !== 'invalid') return null;
      return invalidParams(method, request, outcome.message);
    }

    protected override _wrapHandler(method: string, handler: Handler): Handler {
      const wrapped = super._wrapHandler(method, handler);
      return (request, ctx) => {
        const refused = this.refusal(method, request);
        if (!refused) return wrapped(request, ctx);
        const { message, field } = refused;
        return Promise.reject(new ProtocolError(ProtocolErrorCode.InvalidParams, message, { field }));
      };
    }
  }
  return (checked = { Server: CheckedServer, check: (...args) => CheckedServer.check(...args) });
}

/**
 * The SDK's Server, with each request checked against the SDK's schema of its method before its handler (the SDK's
 * wrapping included) runs: one the schema refuses is refused -32602 by `invalidParams`. Made on first use, as every
 * value of the SDK is (src/server/mcp/sdk.ts).
 */
export function checkedServer(): typeof Server {
  return made().Server;
}

/**
 * The refusal of `request` of `method` at protocol `revision` by the SDK's schema, in the words `checkedServer`
 * answers with (its `field` for `data.field`), or null: for a request the SDK serves with no request handler
 * (subscriptions/listen), checked before the gateway counts or charges anything for it. Null too for a method outside
 * that revision's schemas: the SDK answers that itself.
 */
export function refusedParams(
  revision: string,
  method: string,
  request: JSONRPCRequest,
): { message: string; field: string } | null {
  return made().check(revision, method, request);
}
