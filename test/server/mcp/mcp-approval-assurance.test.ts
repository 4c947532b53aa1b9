// Who approves is the operator's choice, named honestly (MCP_APPROVAL, docs/decisions/068): by default (approver) only
// another principal holding the plan's approve scope approves, so a client that auto-accepts its elicitations approves
// nothing; with elicitation the agent's user approves through their client, which is then the client's word.
import { afterEach, describe, expect, it } from 'vitest';

import { upstreamCreations } from '../../helpers/cloud.js';
import { gatewaysPerTest } from '../../helpers/gateway.js';
import { AGENT_KEY, APPROVER_KEY, mcpClient, planApps, textOf, type TestMcpClient } from '../../helpers/mcp.js';

const start = gatewaysPerTest();
const clients: TestMcpClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close().catch(() => undefined)));
});

const appsFileOf = () => planApps('mcp-assurance-');

describe('MCP_APPROVAL', () => {
  it('by default a client that auto-accepts approves nothing: it is shown the plan and the link; an approver approves', async () => {
    const gw = await start({ GATEWAY_APPS_FILE: appsFileOf(), MCP_MUTATIONS: 'approve' });
    const c = await mcpClient(gw, { key: AGENT_KEY, person: 'accept' });
    clients.push(c);
    const planned = await c.call('create_project', { input: { name: 'needs an approver' } });
    const { planId, hash } = planned.structuredContent as { planId: string; hash: string };
    expect(textOf(planned)).toMatch(/A person or app holding cloud:approve approves it at/);

    const refused = await c.call('execute_plan', { planId });
    expect(refused.isError).toBe(true);
    expect(refused.structuredContent).toMatchObject({
      code: 'APPROVAL_REQUIRED',
      approveUrl: expect.stringContaining(planId),
    });
    expect(textOf(refused)).toContain(hash);
    expect(textOf(refused)).toMatch(/never through this client/);
    expect(c.asked).toEqual([]);
    expect(upstreamCreations(gw)).toEqual([]);

    const approved = await gw.graphql(
      'mutation($id: ID!) { approvePlan(planId: $id) { status } }',
      { id: planId },
      { key: APPROVER_KEY },
    );
    expect(approved.data).toEqual({ approvePlan: { status: 'APPROVED' } });
    const executed = await c.call('execute_plan', { planId });
    expect(executed.isError, textOf(executed)).toBeFalsy();
    expect(upstreamCreations(gw)).toHaveLength(1);
  });

  it("MCP_APPROVAL=elicitation: the agent's user approves through the client's form", async () => {
    const gw = await start({ GATEWAY_APPS_FILE: appsFileOf(), MCP_MUTATIONS: 'approve', MCP_APPROVAL: 'elicitation' });
    const c = await mcpClient(gw, { key: AGENT_KEY, person: 'accept' });
    clients.push(c);
    const { planId } = (await c.call('create_project', { input: { name: 'by the user' } })).structuredContent as {
      planId: string;
    };
    const executed = await c.call('execute_plan', { planId });
    expect(executed.isError, textOf(executed)).toBeFalsy();
    expect(c.asked).toHaveLength(1);
    expect(c.asked[0]).toContain(`${gw.url}/approvals?plan=${planId}`);
    expect(upstreamCreations(gw)).toHaveLength(1);
  });
});
