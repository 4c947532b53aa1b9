// Under MCP_APPROVAL=approver only another principal approves a plan (docs/agents.md, Who approves): the word of the
// agent's own client is no approval there. A plan approved through its client's form while the gateway ran with
// MCP_APPROVAL=elicitation keeps that approval for MCP_APPROVAL_TTL; should its run have been refused before anything
// was sent (here: the app's creation budget), the plan is APPROVED, by the client. After a restart with
// MCP_APPROVAL=approver (or on a replica that already runs with it), execute_plan must not run it on that approval.
import { describe, expect, it } from 'vitest';

import { upstreamCreations } from '../helpers/cloud.js';
import { gatewaysPerTest, startTestGateway, tempDataDir } from '../helpers/gateway.js';
import { AGENT_KEY, APPROVER_KEY, mcpClient, mcpClientsPerTest, planApps, textOf } from '../helpers/mcp.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

describe('MCP_APPROVAL=approver', () => {
  it("does not run a plan on an approval its agent's client gave under elicitation", async () => {
    const env = {
      DATA_DIR: tempDataDir('approver-mode-'),
      GATEWAY_APPS_FILE: planApps('approver-mode-'),
      MCP_MUTATIONS: 'approve',
      // Making the plan spends the app's one point: the run the client approves is refused before anything is sent.
      RATE_LIMIT_CREATIONS: '1/1h',
    };
    const before = await startTestGateway({ ...env, MCP_APPROVAL: 'elicitation' });
    let planId: string;
    try {
      const c = await mcpClient(before, { key: AGENT_KEY, person: 'accept' });
      const planned = await c.call('create_project', { input: { name: 'approved by its own client' } });
      expect(planned.isError, textOf(planned)).toBeFalsy();
      planId = planned.structuredContent!.planId as string;
      const refused = await c.call('execute_plan', { planId });
      expect(refused.structuredContent).toMatchObject({ planId, status: 'APPROVED', sent: false });
      expect(upstreamCreations(before)).toEqual([]);
      await c.close();
    } finally {
      await before.close();
    }

    const gw = await start({ ...env, MCP_APPROVAL: 'approver' });
    const agent = await connect(gw, { key: AGENT_KEY, person: 'accept' });
    const answer = await agent.call('execute_plan', { planId });
    expect(answer.isError, textOf(answer)).toBe(true);
    expect(answer.structuredContent).toMatchObject({ planId, code: 'APPROVAL_REQUIRED' });
    expect(agent.asked).toEqual([]);
    expect(upstreamCreations(gw)).toEqual([]);
    // The approvers' list shows it as one that needs an approval now, not once the client's approval lapses.
    const listed = await gw.graphql('{ pendingAgentPlans { id status } }', undefined, { key: APPROVER_KEY });
    expect(listed.data, JSON.stringify(listed.errors)).toEqual({
      pendingAgentPlans: [{ id: planId, status: 'APPROVED' }],
    });

    // An approver's approval runs it, once.
    const approved = await gw.graphql(
      'mutation($id: ID!) { approvePlan(planId: $id, status: APPROVED) { status approvedBy } }',
      { id: planId },
      { key: APPROVER_KEY },
    );
    expect(approved.data, JSON.stringify(approved.errors)).toEqual({
      approvePlan: { status: 'APPROVED', approvedBy: 'approver' },
    });
    const ran = await agent.call('execute_plan', { planId });
    expect(ran.structuredContent, textOf(ran)).toMatchObject({ planId, status: 'SUCCEEDED', replayed: false });
    expect(upstreamCreations(gw)).toHaveLength(1);
  });
});
