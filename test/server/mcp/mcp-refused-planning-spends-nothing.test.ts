// Making a plan spends one creation point of its app (docs/decisions/060), and a plan that is refused spends none: one
// refused for its input, or past its app's bound of open plans, leaves the budget as it was, so an agent that retries
// at the bound does not drain the points it needs. Two calls at the app's last point make one plan, never two.
import { request } from 'undici';
import { describe, expect, it } from 'vitest';

import { MAX_OPEN_PLANS_PER_APP } from '../../../src/store/agent-plans.js';
import { upstreamCreations } from '../../helpers/cloud.js';
import { gatewaysPerTest, type TestGateway } from '../../helpers/gateway.js';
import { AGENT_KEY, APPROVER_KEY, mcpClientsPerTest, planApps, textOf, type TestMcpClient } from '../../helpers/mcp.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const appsFileOf = () => planApps('mcp-refused-planning-');

/** The creation points the agent app has spent: allowed, less those given back (`gateway_rate_limit_points_total`). */
async function spent(gw: TestGateway): Promise<number> {
  const text = await (await request(`${gw.url}/metrics`)).body.text();
  const points = (outcome: string) => {
    const m = new RegExp(
      `^gateway_rate_limit_points_total\\{app="agent",bucket="creations",outcome="${outcome}"\\} (\\d+)$`,
      'm',
    ).exec(text);
    return m ? Number(m[1]) : 0;
  };
  return points('allowed') - points('refunded');
}

async function planned(c: TestMcpClient, name: string): Promise<string> {
  const made = await c.call('create_project', { input: { name } });
  expect(made.isError, textOf(made)).toBeFalsy();
  return made.structuredContent!.planId as string;
}

async function rateLimited(c: TestMcpClient, name: string): Promise<void> {
  const refused = await c.call('create_project', { input: { name } });
  expect(refused.isError).toBe(true);
  expect(refused.structuredContent!.errors[0]).toMatchObject({ code: 'RATE_LIMITED' });
  expect(refused.structuredContent!.errors[0].retryAfterSeconds).toBeGreaterThan(0);
}

describe('a refused plan spends no creation point', () => {
  it('refused for its input (the operation’s variables, or the rules the dry run checks): the budget is as it was', async () => {
    const gw = await start({ GATEWAY_APPS_FILE: appsFileOf(), MCP_MUTATIONS: 'approve', RATE_LIMIT_CREATIONS: '2/1h' });
    const c = await connect(gw, { key: AGENT_KEY });
    for (let i = 0; i < 3; i++) {
      const missing = await c.call('create_network', { input: { title: 'n' } });
      expect(missing.isError).toBe(true);
      expect(missing.structuredContent!.errors[0]).toMatchObject({
        code: 'BAD_USER_INPUT',
        argument: 'input.projectId',
      });
      const invalid = await c.call('create_subnet', {
        input: {
          projectId: '3fa85f64-5717-4562-b3fc-2c963f66afa6',
          networkId: '3fa85f64-5717-4562-b3fc-2c963f66afa7',
          title: 's',
          cidr: '10.0.0.300/24',
        },
      });
      expect(invalid.isError).toBe(true);
      expect(invalid.structuredContent!.errors[0]).toMatchObject({ code: 'BAD_USER_INPUT', argument: 'input.cidr' });
      expect(await spent(gw)).toBe(0);
    }
    // Both points are left: two plans, and the third is refused.
    await planned(c, 'first');
    await planned(c, 'second');
    expect(await spent(gw)).toBe(2);
    await rateLimited(c, 'third');
    expect(await spent(gw)).toBe(2);
    expect(upstreamCreations(gw)).toEqual([]);
  });

  it(`refused past the app's bound of ${MAX_OPEN_PLANS_PER_APP} open plans: the budget is as it was, and a plan made once one is declined spends the point left`, async () => {
    const gw = await start({
      GATEWAY_APPS_FILE: appsFileOf(),
      MCP_MUTATIONS: 'approve',
      RATE_LIMIT_CREATIONS: `${MAX_OPEN_PLANS_PER_APP + 1}/1h`,
    });
    const c = await connect(gw, { key: AGENT_KEY });
    const plans: string[] = [];
    for (let i = 0; i < MAX_OPEN_PLANS_PER_APP; i++) plans.push(await planned(c, `p${i}`));
    expect(await spent(gw)).toBe(MAX_OPEN_PLANS_PER_APP);
    // An agent retrying at the bound: each refused, none spends the one point left.
    for (let i = 0; i < 3; i++) {
      const refused = await c.call('create_project', { input: { name: 'one too many' } });
      expect(refused.isError).toBe(true);
      expect(refused.structuredContent!.errors[0]).toMatchObject({ code: 'RATE_LIMITED' });
      expect(textOf(refused)).toMatch(/this app has 100 plans awaiting approval or execution/);
      expect(await spent(gw)).toBe(MAX_OPEN_PLANS_PER_APP);
    }
    const declined = await gw.graphql(
      'mutation($id: ID!) { declinePlan(planId: $id) { status } }',
      { id: plans[0] },
      { key: APPROVER_KEY },
    );
    expect(declined.data).toEqual({ declinePlan: { status: 'DECLINED' } });
    await planned(c, 'within the bound again');
    expect(await spent(gw)).toBe(MAX_OPEN_PLANS_PER_APP + 1);
    const declinedToo = await gw.graphql(
      'mutation($id: ID!) { declinePlan(planId: $id) { status } }',
      { id: plans[1] },
      { key: APPROVER_KEY },
    );
    expect(declinedToo.data).toEqual({ declinePlan: { status: 'DECLINED' } });
    await rateLimited(c, 'no point left');
    expect(upstreamCreations(gw)).toEqual([]);
  });

  it('two plans at once at the app’s last point: one is made, the other is refused with RATE_LIMITED', async () => {
    const gw = await start({ GATEWAY_APPS_FILE: appsFileOf(), MCP_MUTATIONS: 'approve', RATE_LIMIT_CREATIONS: '1/1h' });
    const [a, b] = await Promise.all([connect(gw, { key: AGENT_KEY }), connect(gw, { key: AGENT_KEY })]);
    const results = await Promise.all([
      a.call('create_project', { input: { name: 'a' } }),
      b.call('create_project', { input: { name: 'b' } }),
    ]);
    expect(results.filter((r) => !r.isError)).toHaveLength(1);
    expect(results.find((r) => r.isError)!.structuredContent!.errors[0]).toMatchObject({ code: 'RATE_LIMITED' });
    expect(await spent(gw)).toBe(1);
    const pending = await gw.graphql<{ pendingAgentPlans: { id: string }[] }>(
      '{ pendingAgentPlans { id } }',
      {},
      { key: APPROVER_KEY },
    );
    expect(pending.data!.pendingAgentPlans).toHaveLength(1);
  });
});
