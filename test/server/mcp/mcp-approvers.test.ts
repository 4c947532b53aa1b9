// Who may approve an agent's plan (docs/decisions/060, src/agents/approvers.ts): the approve scope of each kind of write
// the plan makes (cloud:approve for cloud creations, identity:approve for identity checks), and with `approves` in the
// apps file only the plans of the apps it names. To any other approver a plan reads exactly as an unknown one.
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';

import { appsFile, gatewaysPerTest, type TestGateway } from '../../helpers/gateway.js';
import { mcpClient, textOf, type TestMcpClient } from '../../helpers/mcp.js';

const start = gatewaysPerTest();
const clients: TestMcpClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close().catch(() => undefined)));
});

const KEYS = {
  agent: 'agent-key-0123456789',
  agent2: 'agent2-key-0123456789',
  cloudApprover: 'cloud-approver-key-0123',
  identityApprover: 'identity-approver-key-01',
  agent2Approver: 'agent2-approver-key-0123',
};

const appsFileOf = () =>
  appsFile('mcp-approvers-', [
    { name: 'agent', scopes: ['cloud:read', 'cloud:write', 'identity:read', 'identity:write'], key: KEYS.agent },
    { name: 'agent2', scopes: ['cloud:read', 'cloud:write'], key: KEYS.agent2 },
    { name: 'cloud-approver', scopes: ['cloud:approve'], key: KEYS.cloudApprover },
    { name: 'identity-approver', scopes: ['identity:approve'], key: KEYS.identityApprover },
    {
      name: 'agent2-approver',
      scopes: ['cloud:approve', 'identity:approve'],
      approves: ['agent2'],
      key: KEYS.agent2Approver,
    },
  ]);

const APPROVE = 'mutation($id: ID!) { approvePlan(planId: $id) { id status } }';
const READ = 'query($id: ID!) { agentPlan(id: $id) { id } }';
const PENDING = '{ pendingAgentPlans { id } }';

async function planOf(gw: TestGateway, key: string, tool: string, input: object): Promise<string> {
  const c = await mcpClient(gw, { key });
  clients.push(c);
  const planned = await c.call(tool, { input });
  expect(planned.isError, textOf(planned)).toBeFalsy();
  return planned.structuredContent!.planId as string;
}

describe('an approver sees and approves only the plans it may approve', () => {
  it('cloud:approve approves cloud plans only, identity:approve identity plans only; the other reads as an unknown plan', async () => {
    const gw = await start({ GATEWAY_APPS_FILE: appsFileOf(), MCP_MUTATIONS: 'approve' });
    const cloudPlan = await planOf(gw, KEYS.agent, 'create_project', { name: 'p' });
    const identityPlan = await planOf(gw, KEYS.agent, 'create_identification', { workflowId: 'wf' });
    const unknown = randomUUID();

    const cloud = { key: KEYS.cloudApprover };
    expect((await gw.graphql(PENDING, {}, cloud)).data).toEqual({ pendingAgentPlans: [{ id: cloudPlan }] });
    expect((await gw.graphql(READ, { id: identityPlan }, cloud)).data).toEqual({ agentPlan: null });
    const refused = await gw.graphql(APPROVE, { id: identityPlan }, cloud);
    const missing = await gw.graphql(APPROVE, { id: unknown }, cloud);
    expect(refused.errors![0]!.extensions).toEqual(missing.errors![0]!.extensions);
    expect(refused.errors![0]!.message.replace(identityPlan, '<id>')).toBe(
      missing.errors![0]!.message.replace(unknown, '<id>'),
    );
    expect((await gw.graphql(APPROVE, { id: cloudPlan }, cloud)).data).toEqual({
      approvePlan: { id: cloudPlan, status: 'APPROVED' },
    });

    const identity = { key: KEYS.identityApprover };
    expect((await gw.graphql(PENDING, {}, identity)).data).toEqual({ pendingAgentPlans: [{ id: identityPlan }] });
    expect((await gw.graphql(APPROVE, { id: cloudPlan }, identity)).errors![0]!.extensions).toMatchObject({
      code: 'NOT_FOUND',
    });
    expect((await gw.graphql(APPROVE, { id: identityPlan }, identity)).data).toEqual({
      approvePlan: { id: identityPlan, status: 'APPROVED' },
    });
    const c = await mcpClient(gw, { key: KEYS.agent });
    clients.push(c);
    const executed = await c.call('execute_plan', { planId: identityPlan });
    expect(executed.isError, textOf(executed)).toBeFalsy();
    expect(gw.gateway.sandbox.identification!.requests.filter((r) => r.method === 'POST')).toHaveLength(1);
  });

  it('an approver whose apps-file entry lists approves sees and approves only those apps’ plans', async () => {
    const gw = await start({ GATEWAY_APPS_FILE: appsFileOf(), MCP_MUTATIONS: 'approve' });
    const agentPlan = await planOf(gw, KEYS.agent, 'create_project', { name: 'a' });
    const agent2Plan = await planOf(gw, KEYS.agent2, 'create_project', { name: 'b' });
    const scoped = { key: KEYS.agent2Approver };
    expect((await gw.graphql(PENDING, {}, scoped)).data).toEqual({ pendingAgentPlans: [{ id: agent2Plan }] });
    expect((await gw.graphql(READ, { id: agentPlan }, scoped)).data).toEqual({ agentPlan: null });
    expect((await gw.graphql(APPROVE, { id: agentPlan }, scoped)).errors![0]!.extensions).toMatchObject({
      code: 'NOT_FOUND',
    });
    expect((await gw.graphql(APPROVE, { id: agent2Plan }, scoped)).data).toEqual({
      approvePlan: { id: agent2Plan, status: 'APPROVED' },
    });
    const cloudPending = await gw.graphql<{ pendingAgentPlans: { id: string }[] }>(
      PENDING,
      {},
      {
        key: KEYS.cloudApprover,
      },
    );
    expect(cloudPending.data!.pendingAgentPlans.map((p) => p.id)).toEqual([agentPlan]);
  });

  it("an app that both plans and approves is not shown its own plans, which it may never approve, and sees the others'", async () => {
    const both = 'both-key-0123456789abcd';
    const file = appsFile('mcp-approvers-both-', [
      { name: 'agent', scopes: ['cloud:read', 'cloud:write'], key: KEYS.agent },
      { name: 'both', scopes: ['cloud:read', 'cloud:write', 'cloud:approve'], key: both },
    ]);
    const gw = await start({ GATEWAY_APPS_FILE: file, MCP_MUTATIONS: 'approve' });
    const own = await planOf(gw, both, 'create_project', { name: 'own' });
    const other = await planOf(gw, KEYS.agent, 'create_project', { name: 'other' });
    expect((await gw.graphql(PENDING, {}, { key: both })).data).toEqual({ pendingAgentPlans: [{ id: other }] });
    // Its own plan stays what it was: refused to it, by its own app's word.
    const refused = await gw.graphql(APPROVE, { id: own }, { key: both });
    expect(refused.errors![0]!.extensions).toMatchObject({ code: 'CONFLICT' });
  });
});
