// gateway-mcp, the stdio command for desktop agents, run as a child process with the SDK client's stdio transport: it
// forwards to a gateway's /mcp with the key from the variable --key-env names.
import { spawn } from 'node:child_process';
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

  it('messages piped in and then the end of its input: every request is answered before it exits', async () => {
    // A script (or `printf … | gateway-mcp`) writes its requests and closes stdin at once. The command used to close
    // its connection to the gateway on that end and exit 0 with nothing written: the answers in flight were dropped.
    const gw = await start({ GATEWAY_API_KEYS: 'agent:k1', MCP_TOOLSETS: 'support=catalog,projects' });
    const child = spawn(process.execPath, [BIN, '--url', `${gw.url}/mcp/support`], {
      env: { ...getDefaultEnvironment(), GATEWAY_KEY: 'k1' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    const lines = [
      {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'script', version: '1' } },
      },
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      { jsonrpc: '2.0', id: 2, method: 'tools/list' },
      { jsonrpc: '2.0', id: 'three', method: 'tools/call', params: { name: 'projects', arguments: {} } },
    ];
    child.stdin.end(lines.map((l) => `${JSON.stringify(l)}\n`).join(''));
    expect(await exited).toBe(0);
    const answers = out
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { id: unknown; result?: Record<string, unknown> });
    expect(answers.map((a) => a.id).sort((a, b) => String(a).localeCompare(String(b)))).toEqual([1, 2, 'three']);
    const byId = new Map(answers.map((a) => [a.id, a.result]));
    expect(byId.get(1)).toMatchObject({ protocolVersion: '2025-06-18' });
    expect((byId.get(2) as { tools: { name: string }[] }).tools.map((t) => t.name)).toEqual(['catalog', 'projects']);
    expect(byId.get('three')).toMatchObject({ structuredContent: { projects: [] } });
  });

  it('a wrong key is refused by the gateway, and the agent is told so', async () => {
    const gw = await start({ GATEWAY_API_KEYS: 'agent:k1' });
    const { transport, client } = stdioClient(`${gw.url}/mcp`, { AGENT_KEY: 'not-the-key' }, 'legacy');
    await expect(client.connect(transport)).rejects.toThrow(/not valid|401|Unauthorized/i);
    await client.close().catch(() => undefined);
  });

  it('a request the gateway refuses is answered with an error, and the refusal is written to stderr once', async () => {
    // The HTTP transport reports a failed send to its onerror and also rejects the send; the command used to write
    // the same refusal to stderr from both, so every error an operator read in the agent's log appeared twice.
    const gw = await start({ GATEWAY_API_KEYS: 'agent:k1' });
    const child = spawn(process.execPath, [BIN, '--url', `${gw.url}/mcp`], {
      env: { ...getDefaultEnvironment(), GATEWAY_KEY: 'not-the-key' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    // 'close' comes after the child's stdout and stderr have both ended, so everything it wrote has been read.
    const closed = new Promise<number | null>((resolve) => child.once('close', resolve));
    const initialize = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'script', version: '1' } },
    };
    child.stdin.end(`${JSON.stringify(initialize)}\n`);
    expect(await closed).toBe(0);
    const answers = out
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { id: unknown; error?: { message: string } });
    expect(answers).toHaveLength(1);
    expect(answers[0]).toMatchObject({ id: 1, error: { message: expect.stringMatching(/^gateway-mcp: /) } });
    const reports = err.split('\n').filter((l) => l.startsWith('gateway-mcp: '));
    expect(reports).toHaveLength(1);
    expect(reports[0]).toMatch(/401|not valid|Unauthorized/i);
  });
});
