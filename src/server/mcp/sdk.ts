// The MCP server SDK, loaded when the endpoint serves its first request rather than at start-up
// (docs/decisions/124): with its schemas it is ~4.4 MB of a started gateway's ~37 MB heap, which every full
// collection walks, and most deployments never call /mcp. Only this module imports its values, and only with
// `import()` (a dependency-cruiser rule holds that); the rest of src/server/mcp/ reads them through `mcpSdk()`, which
// the route makes sure of (`loadMcpSdk`) before anything else of the request runs.
import type * as Sdk from '@modelcontextprotocol/server';
import type { RequestStateCodec, RequestStateCodecOptions } from '@modelcontextprotocol/server';

export type McpSdk = typeof Sdk;

let loaded: McpSdk | null = null;
let loading: Promise<McpSdk> | null = null;

/** The SDK, imported on the first call (later calls: the same promise, settled). */
export function loadMcpSdk(): Promise<McpSdk> {
  return (loading ??= import('@modelcontextprotocol/server').then((sdk) => (loaded = sdk)));
}

/** The SDK's values, once `loadMcpSdk` has settled: every MCP request awaits it first, so a miss is a bug. */
export function mcpSdk(): McpSdk {
  if (loaded === null) throw new Error('the MCP SDK was read before the endpoint loaded it (loadMcpSdk)');
  return loaded;
}

/** The SDK's requestState codec, made on its first use (by then a request has loaded the SDK). */
export function requestStateCodec<T>(options: RequestStateCodecOptions): RequestStateCodec<T> {
  let codec: RequestStateCodec<T> | null = null;
  const made = () => (codec ??= mcpSdk().createRequestStateCodec<T>(options));
  return {
    mint: (payload, ctx) => made().mint(payload, ctx),
    verify: (state, ctx) => made().verify(state, ctx),
  };
}
