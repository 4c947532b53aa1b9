// An identity check whose run ended UPSTREAM_OUTCOME_UNKNOWN has spent its approval (docs/agents.md, Running, once):
// on no clock may it read as approved again. A wall clock is not monotonic (an NTP step sets it back) and two replicas'
// clocks differ by a little: one that reads the moment the approval was spent as still to come must neither run the
// plan again on the agent's own call nor take it off the approver's list.
import { describe, expect, it } from 'vitest';

import { appsFile, gatewaysPerTest } from '../../helpers/gateway.js';
import { testClock } from '../../helpers/jwt.js';
import { mcpClientsPerTest } from '../../helpers/mcp.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const AGENT_KEY = 'agent-key-0123456789';
const APPROVER_KEY = 'approver-key-0123456789';
const APPROVE = 'mutation($id: ID!) { approvePlan(planId: $id) { status } }';
const PENDING = '{ pendingAgentPlans { id status } }';

describe('an approval spent on a run whose outcome is unknown', () => {
  it('stays spent on a clock a second behind: the agent’s call sends nothing, and the plan is listed', async () => {
    const clock = testClock();
    const gw = await start(
      {
        GATEWAY_APPS_FILE: appsFile('mcp-spent-clock-', [
          { name: 'agent', scopes: ['identity:read', 'identity:write'], key: AGENT_KEY },
          { name: 'approver', scopes: ['identity:approve'], key: APPROVER_KEY },
        ]),
        MCP_MUTATIONS: 'approve',
      },
      { testing: { clock: clock.now } },
    );
    const c = await connect(gw, { key: AGENT_KEY });
    const identification = gw.gateway.sandbox.identification!;
    const planId = (await c.call('create_identification', { input: { workflowId: 'wf-spent' } })).structuredContent!
      .planId as string;
    expect((await gw.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY })).data).toEqual({
      approvePlan: { status: 'APPROVED' },
    });
    identification.faults.enqueueFor(() => true, 'reset-after');
    const first = await c.call('execute_plan', { planId });
    identification.faults.clear();
    expect(first.structuredContent).toMatchObject({ planId, status: 'UNKNOWN' });
    expect(identification.requests).toHaveLength(1);

    // The clock this call reads is a second behind the one that spent the approval (an NTP step, another replica).
    clock.advance(-1000);
    const again = await c.call('execute_plan', { planId });
    expect(again.structuredContent).toMatchObject({ planId, status: 'UNKNOWN', code: 'APPROVAL_REQUIRED' });
    expect(identification.requests).toHaveLength(1);
    expect((await gw.graphql(PENDING, {}, { key: APPROVER_KEY })).data).toEqual({
      pendingAgentPlans: [{ id: planId, status: 'UNKNOWN' }],
    });
    // It shows who approved the run, and no expiry: the approval holds no longer.
    const read = await gw.graphql(
      'query($id: ID!) { agentPlan(id: $id) { approvedBy approvalExpiresAt } }',
      {
        id: planId,
      },
      { key: APPROVER_KEY },
    );
    expect(read.data).toEqual({ agentPlan: { approvedBy: 'approver', approvalExpiresAt: null } });
  });
});
