// A plan id is a UUID, in any case: agentPlan, approvePlan, declinePlan and agentAudit find the plan execute_plan
// finds, and answer with its id as the plan tool gave it.
import { describe, expect, it } from 'vitest';

import { gatewaysPerTest } from '../../helpers/gateway.js';
import { AGENT_KEY, APPROVER_KEY, mcpClientsPerTest, OPERATOR_KEY, planApps } from '../../helpers/mcp.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const appsFileOf = () => planApps('mcp-plan-id-case-', { withOperator: true });

describe('a plan id in upper case', () => {
  it('names the same plan to agentPlan, approvePlan, declinePlan and agentAudit as to execute_plan', async () => {
    const gw = await start({ GATEWAY_APPS_FILE: appsFileOf(), MCP_MUTATIONS: 'approve' });
    const c = await connect(gw, { key: AGENT_KEY });
    const plan = async (name: string) =>
      (await c.call('create_project', { input: { name } })).structuredContent!.planId as string;
    const planId = await plan('upper');
    const upper = planId.toUpperCase();
    expect(upper).not.toBe(planId);
    expect((await c.call('execute_plan', { planId: upper })).structuredContent).toMatchObject({
      planId,
      code: 'APPROVAL_REQUIRED',
    });

    const approver = { key: APPROVER_KEY };
    const read = await gw.graphql('query($id: ID!) { agentPlan(id: $id) { id status } }', { id: upper }, approver);
    expect(read.data).toEqual({ agentPlan: { id: planId, status: 'PENDING' } });
    const approved = await gw.graphql(
      'mutation($id: ID!) { approvePlan(planId: $id) { id status approvedBy } }',
      { id: upper },
      approver,
    );
    expect(approved.errors).toBeUndefined();
    expect(approved.data).toEqual({ approvePlan: { id: planId, status: 'APPROVED', approvedBy: 'approver' } });
    expect((await c.call('execute_plan', { planId: upper })).structuredContent).toMatchObject({
      planId,
      status: 'SUCCEEDED',
    });

    const audit = await gw.graphql<{ agentAudit: { planId: string; action: string; actor: string }[] }>(
      'query($id: ID!) { agentAudit(planId: $id) { planId action actor } }',
      { id: upper },
      { key: OPERATOR_KEY },
    );
    expect(audit.data!.agentAudit.map((e) => [e.planId, e.action, e.actor]).reverse()).toEqual([
      [planId, 'planned', 'agent'],
      [planId, 'refused', 'agent'],
      [planId, 'approved', 'approver'],
      [planId, 'executed', 'agent'],
    ]);

    const other = await plan('declined');
    const declined = await gw.graphql(
      'mutation($id: ID!) { declinePlan(planId: $id) { id status declinedBy } }',
      { id: other.toUpperCase() },
      approver,
    );
    expect(declined.errors).toBeUndefined();
    expect(declined.data).toEqual({ declinePlan: { id: other, status: 'DECLINED', declinedBy: 'approver' } });
    expect((await c.call('execute_plan', { planId: other })).structuredContent).toMatchObject({
      planId: other,
      code: 'DECLINED',
    });
  });
});
