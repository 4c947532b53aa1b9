import fs from 'node:fs';
import path from 'node:path';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';

import { tempDataDir } from '../helpers/gateway.js';
import { gatewayProcesses, type GatewayProcess } from '../helpers/process.js';

const spawnGateway = gatewayProcesses();
const RECORDER = path.resolve(import.meta.dirname, '../helpers/module-log.mjs');

/**
 * Libraries a gateway on the embedded defaults does not load until they are used (docs/decisions/123, 124): each
 * would add megabytes to the live heap that every mark-compact walks.
 */
const ON_DEMAND = [
  // The MCP server SDK: the first /mcp request imports it (src/server/mcp/sdk.ts).
  '/node_modules/@modelcontextprotocol/',
  // undici's index (fetch, WebSocket, caches): the upstreams import its Pool and header parser alone.
  '/node_modules/undici/index.js',
  // The OpenTelemetry SDK: only with tracing on (src/telemetry/tracing-sdk.ts).
  '/node_modules/@opentelemetry/sdk-trace',
  // Apollo's usage-reporting protobuf, which its inline-trace plugin loads unless it is given as disabled.
  '/node_modules/@apollo/usage-reporting-protobuf/',
  // The YAML parser: only for GATEWAY_APPS_FILE or AUTH_ISSUERS (src/auth/apps-file.ts).
  '/node_modules/yaml/',
];

/** A gateway child process that writes every module it loads to a file (test/helpers/module-log.mjs). */
async function recordedGateway(): Promise<{ gateway: GatewayProcess; loaded: () => Promise<string[]> }> {
  const log = path.join(tempDataDir('module-log-'), 'modules.txt');
  const gateway = await spawnGateway({
    DATA_DIR: tempDataDir(),
    NODE_OPTIONS: `--import=${RECORDER}`,
    MODULE_LOG: log,
  });
  return {
    gateway,
    /** Stops the gateway (SIGTERM: its require.cache is written at exit) and reads what it loaded. */
    async loaded() {
      const exited = new Promise((resolve) => gateway.child.once('exit', resolve));
      gateway.child.kill('SIGTERM');
      await exited;
      return fs.readFileSync(log, 'utf8').split('\n').filter(Boolean);
    },
  };
}

async function query(url: string): Promise<void> {
  const res = await request(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query: '{ identificationCallbackUrl(workflowId: "wf-onboarding") }' }),
  });
  expect(res.statusCode).toBe(200);
  await res.body.dump();
  // A GET goes through Apollo Server's own request handling.
  const get = await request(`${url}/graphql?query=${encodeURIComponent('{ __typename }')}`, {
    headers: { 'apollo-require-preflight': 'true' },
  });
  expect(get.statusCode).toBe(200);
  await get.body.dump();
}

describe('the modules a started gateway loads', () => {
  it('leaves out the libraries it loads on first use, also after it has served requests', async () => {
    const { gateway, loaded } = await recordedGateway();
    await query(gateway.url);
    const modules = await loaded();
    // The recorder sees what these checks look for: ES modules, and CommonJS files imported from them.
    expect(modules.some((m) => m.includes('/node_modules/graphql/'))).toBe(true);
    expect(modules.some((m) => m.includes('/node_modules/undici/lib/dispatcher/pool.js'))).toBe(true);
    for (const library of ON_DEMAND)
      expect(
        modules.filter((m) => m.includes(library)),
        library,
      ).toEqual([]);
  });

  it('loads the MCP server SDK with the first /mcp request', async () => {
    const { gateway, loaded } = await recordedGateway();
    const res = await request(`${gateway.url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'test', version: '1' } },
      }),
    });
    await res.body.dump();
    const modules = await loaded();
    expect(modules.some((m) => m.includes('/node_modules/@modelcontextprotocol/server/'))).toBe(true);
  });
});
