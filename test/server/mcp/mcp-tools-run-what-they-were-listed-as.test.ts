// A tool that runs at once runs only what it was listed as (src/agents/writes.ts), and the tools follow the manifest in
// force: a reload that puts a creation under a tool listed as a harmless write lists it anew as a creation, which only
// plans, and nothing is created without a plan and an approval.
import { describe, expect, it } from 'vitest';

import { upstreamCreations } from '../../helpers/cloud.js';
import { appsFile, gatewaysPerTest } from '../../helpers/gateway.js';
import {
  AGENT_KEY,
  manifestBeside,
  mcpClientsPerTest,
  OPERATOR_KEY,
  reloadAsOperator,
  textOf,
} from '../../helpers/mcp.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const TOKEN = 'mutation Token { issueMobileIdNotificationToken(ttlSeconds: 60) { token } }';
const TOKEN_AND_PROJECT =
  'mutation Token { issueMobileIdNotificationToken(ttlSeconds: 60) { token } p: createProject(input: { name: "unapproved" }) { project { id } } }';

describe('a tool runs what it was listed as', () => {
  it('a harmless write whose trusted document a reload turned into a creation is planned, and nothing is created', async () => {
    const apps = appsFile('mcp-listed-as-', [
      { name: 'agent', scopes: ['cloud:read', 'cloud:write', 'mobile-id:write'], key: AGENT_KEY },
      { name: 'ops', scopes: ['operator'], key: OPERATOR_KEY },
    ]);
    const manifest = manifestBeside(apps, { token: TOKEN });
    const gw = await start({ ...manifest.env, MCP_MUTATIONS: 'approve' });
    const c = await connect(gw, { key: AGENT_KEY });
    expect((await c.call('Token', {})).isError).toBeFalsy();

    manifest.write({ token: TOKEN_AND_PROJECT });
    await reloadAsOperator(gw);
    const { tools } = await c.client.listTools();
    expect(tools.find((t) => t.name === 'Token')?.title).toBe('Token (plan)');
    const planned = await c.call('Token', {});
    expect(planned.isError, textOf(planned)).toBeFalsy();
    const { planId } = planned.structuredContent as { planId: string };
    expect(textOf(planned)).toContain('nothing was sent');
    // Unapproved, it does not run.
    const refused = await c.call('execute_plan', { planId });
    expect(refused.isError).toBe(true);
    expect(refused.structuredContent).toMatchObject({ code: 'APPROVAL_REQUIRED' });
    expect(upstreamCreations(gw)).toEqual([]);
  });
});
