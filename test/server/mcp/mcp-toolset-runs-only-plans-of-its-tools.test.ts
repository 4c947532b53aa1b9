// An endpoint of MCP_TOOLSETS runs only plans of the tools it offers. A plan is the app's, whichever endpoint made it,
// and execute_plan used to run it on any endpoint that offered execute_plan: a toolset that leaves a creation out
// (a support set that may create networks, not projects) ran the creation all the same, and asked its person to
// approve it. Now execute_plan there refuses such a plan with the error a call of its tool there gets, asks no one and
// sends nothing; an endpoint that offers the tool runs it, whichever endpoint planned it.
import { describe, expect, it } from 'vitest';

import { upstreamCreations } from '../../helpers/cloud.js';
import { gatewaysPerTest } from '../../helpers/gateway.js';
import { AGENT_KEY, APPROVER_KEY, mcpClientsPerTest, planApps, textOf } from '../../helpers/mcp.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const APPROVE = 'mutation($id: ID!) { approvePlan(planId: $id) { status } }';

describe('execute_plan on an endpoint of MCP_TOOLSETS', () => {
  it('refuses a plan of a tool the endpoint does not offer, as a call of that tool there is refused, and asks no one; an endpoint that offers the tool runs it', async () => {
    const gw = await start({
      GATEWAY_APPS_FILE: planApps('toolset-plans-'),
      MCP_MUTATIONS: 'approve',
      MCP_APPROVAL: 'elicitation',
      MCP_TOOLSETS: 'networks=create_network,execute_plan;projects=create_project,execute_plan',
    });
    const everything = await connect(gw, { key: AGENT_KEY });
    const planned = await everything.call('create_project', { input: { name: 'planned-elsewhere' } });
    expect(planned.isError, textOf(planned)).toBeFalsy();
    const planId = planned.structuredContent!.planId as string;

    const networks = await connect(gw, { key: AGENT_KEY, path: '/mcp/networks', person: 'accept' });
    expect(await networks.toolNames()).toEqual(['create_network', 'execute_plan']);
    const direct = await networks.call('create_project', { input: { name: 'planned-elsewhere' } });
    expect(direct.isError).toBe(true);
    const executed = await networks.call('execute_plan', { planId });
    expect(executed.isError).toBe(true);
    expect(textOf(executed)).toBe(textOf(direct));
    expect(executed.structuredContent).toEqual(direct.structuredContent);
    // Its person was not asked to approve it, and nothing was sent.
    expect(networks.asked).toEqual([]);
    expect(upstreamCreations(gw)).toEqual([]);

    // Approved by an approver app, it is still not this endpoint's to run.
    const approved = await gw.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY });
    expect(approved.data, JSON.stringify(approved.errors)).toEqual({ approvePlan: { status: 'APPROVED' } });
    const again = await networks.call('execute_plan', { planId });
    expect(textOf(again)).toBe(textOf(direct));
    expect(upstreamCreations(gw)).toEqual([]);

    // The endpoint that offers create_project runs the plan made on /mcp, once.
    const projects = await connect(gw, { key: AGENT_KEY, path: '/mcp/projects' });
    const ran = await projects.call('execute_plan', { planId });
    expect(ran.isError, textOf(ran)).toBeFalsy();
    expect(ran.structuredContent).toMatchObject({ planId, status: 'SUCCEEDED', replayed: false });
    expect(upstreamCreations(gw)).toHaveLength(1);
  });

  it('is not offered on an endpoint that offers no creation tool the app may call', async () => {
    const gw = await start({
      GATEWAY_APPS_FILE: planApps('toolset-plans-'),
      MCP_MUTATIONS: 'approve',
      MCP_TOOLSETS: 'support=projects,execute_plan',
    });
    const support = await connect(gw, { key: AGENT_KEY, path: '/mcp/support' });
    expect(await support.toolNames()).toEqual(['projects']);
    expect(await (await connect(gw, { key: AGENT_KEY })).toolNames()).toContain('execute_plan');
  });
});
