// Approvals from the sides the other tests leave: an approver whose `approves` list a reload narrows may approve no
// more of that app's plans (NOT_FOUND, and none listed), while the approval it gave before holds until its TTL, as
// docs/agents.md says of an approver losing its scope; and approvePlan sent over GET /graphql is refused, the plan left
// PENDING, so that a link or an image tag never approves anything.
import fs from 'node:fs';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';

import { upstreamCreations } from '../../helpers/cloud.js';
import { appsFile, gatewaysPerTest } from '../../helpers/gateway.js';
import { AGENT_KEY, APPROVER_KEY, mcpClientsPerTest, OPERATOR_KEY, textOf } from '../../helpers/mcp.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const APPROVE = 'mutation($id: ID!) { approvePlan(planId: $id) { status approvedBy } }';
const PENDING = '{ pendingAgentPlans { id status } }';

const apps = (approves: string[]) => [
  { name: 'agent', scopes: ['cloud:read', 'cloud:write'], key: AGENT_KEY },
  { name: 'approver', scopes: ['cloud:approve'], approves, key: APPROVER_KEY },
  { name: 'ops', scopes: ['operator'], key: OPERATOR_KEY },
];

describe('approvals across a reload, and over GET', () => {
  it('a reload that takes the agent off the approver’s approves list: no new approval, the one given holds', async () => {
    const file = appsFile('mcp-approves-reload-', apps(['agent']));
    const gw = await start({ GATEWAY_APPS_FILE: file, MCP_MUTATIONS: 'approve' });
    const c = await connect(gw, { key: AGENT_KEY });
    const plan = async (name: string) =>
      (await c.call('create_project', { input: { name } })).structuredContent!.planId as string;
    const approved = await plan('approved-before');
    const later = await plan('approved-after');
    expect((await gw.graphql(APPROVE, { id: approved }, { key: APPROVER_KEY })).data).toEqual({
      approvePlan: { status: 'APPROVED', approvedBy: 'approver' },
    });

    // The operator narrows the approver to another app's plans.
    fs.writeFileSync(file, fs.readFileSync(appsFile('mcp-approves-reload-next-', apps(['someone-else'])), 'utf8'));
    const reloaded = await request(`${gw.url}/admin/reload`, {
      method: 'POST',
      headers: { authorization: `Bearer ${OPERATOR_KEY}` },
    });
    expect(reloaded.statusCode, await reloaded.body.text()).toBe(200);

    const refused = await gw.graphql(APPROVE, { id: later }, { key: APPROVER_KEY });
    expect(refused.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    expect((await gw.graphql(PENDING, {}, { key: APPROVER_KEY })).data).toEqual({ pendingAgentPlans: [] });
    const unapproved = await c.call('execute_plan', { planId: later });
    expect(unapproved.structuredContent).toMatchObject({ planId: later, code: 'APPROVAL_REQUIRED' });
    expect(upstreamCreations(gw)).toHaveLength(0);

    const ran = await c.call('execute_plan', { planId: approved });
    expect(ran.isError, textOf(ran)).toBeFalsy();
    expect(ran.structuredContent).toMatchObject({ planId: approved, status: 'SUCCEEDED', replayed: false });
    expect(upstreamCreations(gw)).toHaveLength(1);
  });

  it('approvePlan over GET /graphql approves nothing', async () => {
    const gw = await start({
      GATEWAY_APPS_FILE: appsFile('mcp-approve-get-', apps(['agent'])),
      MCP_MUTATIONS: 'approve',
    });
    const c = await connect(gw, { key: AGENT_KEY });
    const planId = (await c.call('create_project', { input: { name: 'over-get' } })).structuredContent!
      .planId as string;
    const url = new URL(`${gw.url}/graphql`);
    url.searchParams.set('query', `mutation { approvePlan(planId: "${planId}") { status } }`);
    const res = await request(url, {
      headers: {
        authorization: `Bearer ${APPROVER_KEY}`,
        accept: 'application/graphql-response+json',
        // Past the CSRF check, so that what refuses it is the method.
        'apollo-require-preflight': 'true',
      },
    });
    const body = await res.body.text();
    expect(res.statusCode, body).toBe(405);
    expect(body).not.toContain('APPROVED');
    const read = await gw.graphql(
      'query($id: ID!) { agentPlan(id: $id) { status approvedBy } }',
      { id: planId },
      {
        key: APPROVER_KEY,
      },
    );
    expect(read.data).toEqual({ agentPlan: { status: 'PENDING', approvedBy: null } });
    const refused = await c.call('execute_plan', { planId });
    expect(refused.structuredContent).toMatchObject({ planId, code: 'APPROVAL_REQUIRED' });
    expect(upstreamCreations(gw)).toHaveLength(0);
  });
});
