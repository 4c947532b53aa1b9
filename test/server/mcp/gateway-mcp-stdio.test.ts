// gateway-mcp, the stdio command for desktop agents, run as a child process with the SDK client's stdio transport: it
// forwards to a gateway's /mcp with the key from the variable --key-env names.
import path from 'node:path';
import { Client } from '@modelcontextprotocol/client';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { describe, expect, it } from 'vitest';

import { gatewaysPerTest } from '../../helpers/gateway.js';

const start = gatewaysPerTest();
const BIN = path.resolve(import.meta.dirname, '../../../bin/gateway-mcp.mjs');

function stdioClient(url: string, env: Record<string, string>, era: 'auto' | 'legacy') {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [BIN, '--url', url, '--key-env', 'AGENT_KEY'],
    env: { ...getDefaultEnvironment(), ...env },
    stderr: 'pipe',
  });
  const client = new Client({ name: 'desktop-agent', version: '1.0.0' }, { versionNegotiation: { mode: era } });
  return { transport, client };
}

describe('gateway-mcp (stdio)', () => {
  it.each(['auto', 'legacy'] as const)(
    "forwards a desktop agent's calls to the gateway with the key from --key-env (%s era)",
    async (era) => {
      const gw = await start({ GATEWAY_API_KEYS: 'agent:k1', MCP_TOOLSETS: 'support=catalog,projects' });
      const { transport, client } = stdioClient(`${gw.url}/mcp/support`, { AGENT_KEY: 'k1' }, era);
      await client.connect(transport);
      try {
        expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['catalog', 'projects']);
        const result = await client.callTool({ name: 'projects', arguments: {} });
        expect(result.structuredContent).toEqual({ projects: [] });
      } finally {
        await client.close();
      }
    },
  );

  it('a wrong key is refused by the gateway, and the agent is told so', async () => {
    const gw = await start({ GATEWAY_API_KEYS: 'agent:k1' });
    const { transport, client } = stdioClient(`${gw.url}/mcp`, { AGENT_KEY: 'not-the-key' }, 'legacy');
    await expect(client.connect(transport)).rejects.toThrow(/not valid|401|Unauthorized/i);
    await client.close().catch(() => undefined);
  });
});
