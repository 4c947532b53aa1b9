// An identity check whose outcome is unknown (UPSTREAM_OUTCOME_UNKNOWN: its upstream is not known to honour the key,
// so the gateway never sends it again on its own) spends its plan's approval: the agent calling execute_plan again
// sends nothing, and the plan is listed for a person, whose new approval alone sends it once more. On no clock may the
// spent approval read as approved again: a wall clock is not monotonic (an NTP step sets it back) and two replicas'
// clocks differ by a little.
import { describe, expect, it } from 'vitest';

import type { GatewayOptions } from '../../../src/gateway/options.js';
import { appsFile, gatewaysPerTest } from '../../helpers/gateway.js';
import { testClock } from '../../helpers/jwt.js';
import { mcpClientsPerTest, textOf } from '../../helpers/mcp.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const AGENT_KEY = 'agent-key-0123456789';
const APPROVER_KEY = 'approver-key-0123456789';
const APPROVE = 'mutation($id: ID!) { approvePlan(planId: $id) { status } }';
const APPROVE_UNKNOWN = 'mutation($id: ID!) { approvePlan(planId: $id, status: UNKNOWN) { status } }';
const PENDING = '{ pendingAgentPlans { id status } }';

/**
 * An identity plan approved and executed once, its upstream answer lost after the identification was created (the
 * connection reset): the run's outcome is unknown, its approval spent. `options`: the gateway's (a testing clock).
 */
async function unsettledRun(workflowId: string, options: GatewayOptions = {}) {
  const gw = await start(
    {
      GATEWAY_APPS_FILE: appsFile('mcp-unsettled-', [
        { name: 'agent', scopes: ['identity:read', 'identity:write'], key: AGENT_KEY },
        { name: 'approver', scopes: ['identity:approve'], key: APPROVER_KEY },
      ]),
      MCP_MUTATIONS: 'approve',
    },
    options,
  );
  const c = await connect(gw, { key: AGENT_KEY });
  const identification = gw.gateway.sandbox.identification!;
  const planId = (await c.call('create_identification', { input: { workflowId } })).structuredContent!.planId as string;
  expect((await gw.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY })).data).toEqual({
    approvePlan: { status: 'APPROVED' },
  });
  // The upstream creates the identification, then the connection resets: the gateway cannot know.
  identification.faults.enqueueFor(() => true, 'reset-after');
  const first = await c.call('execute_plan', { planId });
  identification.faults.clear();
  expect(identification.requests).toHaveLength(1);
  return { gw, c, identification, planId, first };
}

describe('an identity plan whose outcome the upstream cannot settle', () => {
  it('runs again only once a person approves it again, never on the agent’s own call', async () => {
    const { gw, c, identification, planId, first } = await unsettledRun('wf-unsettled');
    // The agent calls again on its own: nothing is sent.
    const again = await c.call('execute_plan', { planId });
    expect(identification.requests).toHaveLength(1);
    expect(again.structuredContent).toMatchObject({ planId, status: 'UNKNOWN', code: 'APPROVAL_REQUIRED' });
    expect(first.structuredContent).toMatchObject({
      planId,
      status: 'UNKNOWN',
      approveUrl: expect.stringContaining(`/approvals?plan=${planId}`),
      errors: [{ code: 'UPSTREAM_OUTCOME_UNKNOWN' }],
    });
    expect(textOf(first)).toContain('runs again only once a person approves it again');
    expect((await gw.graphql(PENDING, {}, { key: APPROVER_KEY })).data).toEqual({
      pendingAgentPlans: [{ id: planId, status: 'UNKNOWN' }],
    });

    // A person decides to send it once more (having checked upstream), approving it as UNKNOWN, the state they read:
    // it runs, under the same key.
    expect((await gw.graphql(APPROVE_UNKNOWN, { id: planId }, { key: APPROVER_KEY })).data).toEqual({
      approvePlan: { status: 'UNKNOWN' },
    });
    const approved = await c.call('execute_plan', { planId });
    expect(approved.isError, textOf(approved)).toBeFalsy();
    expect(approved.structuredContent).toMatchObject({ planId, status: 'SUCCEEDED' });
    expect(identification.requests).toHaveLength(2);
    expect(new Set(identification.requests.map((r) => r.headers['idempotency-key'])).size).toBe(1);
  });
});

describe('an approval spent on a run whose outcome is unknown', () => {
  it('stays spent on a clock a second behind: the agent’s call sends nothing, and the plan is listed', async () => {
    const clock = testClock();
    const { gw, c, identification, planId, first } = await unsettledRun('wf-spent', {
      testing: { clock: clock.now },
    });
    expect(first.structuredContent).toMatchObject({ planId, status: 'UNKNOWN' });

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
