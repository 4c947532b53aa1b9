// What a plan spends of its app's creations budget (RATE_LIMIT_CREATIONS, docs/decisions/060): making it spends one
// point, and running it what its mutation costs, as any mutation. An execute_plan that is refused (not approved,
// declined, expired, changed, being executed) sends nothing and spends nothing: the budget is as it was.
import { request } from 'undici';
import { describe, expect, it } from 'vitest';

import { upstreamCreations } from '../../helpers/cloud.js';
import { appsFile, gatewaysPerTest, startTestGateway, tempDataDir, type TestGateway } from '../../helpers/gateway.js';
import { testClock } from '../../helpers/jwt.js';
import { mcpClient, mcpClientsPerTest, textOf } from '../../helpers/mcp.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const AGENT_KEY = 'agent-key-0123456789';
const APPROVER_KEY = 'approver-key-0123456789';
const appsFileOf = () =>
  appsFile('mcp-refused-spend-', [
    { name: 'agent', scopes: ['cloud:read', 'cloud:write', 'identity:write'], key: AGENT_KEY },
    { name: 'approver', scopes: ['cloud:approve', 'identity:approve'], key: APPROVER_KEY },
  ]);

const CREATE = 'mutation($input: CreateProjectInput!) { createProject(input: $input) { project { id } } }';

/** The creation points the agent app has spent (`gateway_rate_limit_points_total`, allowed). */
async function spent(gw: TestGateway): Promise<number> {
  const text = await (await request(`${gw.url}/metrics`)).body.text();
  const m = /gateway_rate_limit_points_total\{app="agent",bucket="creations",outcome="allowed"\} (\d+)/.exec(text);
  return m ? Number(m[1]) : 0;
}

describe('a refused execute_plan spends nothing', () => {
  it('not approved, declined, expired or being executed: the creations budget is as it was, nothing sent', async () => {
    const clock = testClock();
    const gw = await start(
      { GATEWAY_APPS_FILE: appsFileOf(), MCP_MUTATIONS: 'approve', RATE_LIMIT_CREATIONS: '4/1h' },
      { testing: { clock: clock.now } },
    );
    const c = await connect(gw, { key: AGENT_KEY });
    const planOf = async (name: string) => {
      const planned = await c.call('create_project', { input: { name } });
      expect(planned.isError, textOf(planned)).toBeFalsy();
      return planned.structuredContent!.planId as string;
    };
    const refusedTwice = async (planId: string, answer: Record<string, unknown>, before: number) => {
      for (let i = 0; i < 2; i++) {
        const refused = await c.call('execute_plan', { planId });
        expect(refused.isError, textOf(refused)).toBe(true);
        expect(refused.structuredContent).toMatchObject({ planId, ...answer });
        expect(await spent(gw)).toBe(before);
      }
    };

    // Making a plan spends its one point; execute_plan without an approval spends nothing more.
    const notApproved = await planOf('not approved');
    expect(await spent(gw)).toBe(1);
    await refusedTwice(notApproved, { code: 'APPROVAL_REQUIRED' }, 1);

    const declined = await planOf('declined');
    const decline = await gw.graphql(
      'mutation($id: ID!) { declinePlan(planId: $id) { status } }',
      { id: declined },
      {
        key: APPROVER_KEY,
      },
    );
    expect(decline.data).toEqual({ declinePlan: { status: 'DECLINED' } });
    await refusedTwice(declined, { code: 'DECLINED' }, 2);

    clock.advance(24 * 3_600_000 + 1);
    await refusedTwice(notApproved, { code: 'PLAN_EXPIRED' }, 2);

    // Approved, and being executed by another call: refused, nothing spent by this one.
    const running = await planOf('running');
    const approve = await gw.graphql(
      'mutation($id: ID!) { approvePlan(planId: $id) { status } }',
      { id: running },
      {
        key: APPROVER_KEY,
      },
    );
    expect(approve.data).toEqual({ approvePlan: { status: 'APPROVED' } });
    await gw.gateway.services.store.db
      .updateTable('agent_plans')
      .set({ status: 'executing', updated_at: clock.now() })
      .where('id', '=', running)
      .execute();
    await refusedTwice(running, { status: 'EXECUTING' }, 3);

    expect(upstreamCreations(gw)).toEqual([]);
    // The one point left creates one project; the next creation is refused.
    expect((await gw.graphql(CREATE, { input: { name: 'direct' } }, { key: AGENT_KEY })).errors).toBeUndefined();
    const over = await gw.graphql(CREATE, { input: { name: 'over' } }, { key: AGENT_KEY });
    expect(over.errors?.[0]?.extensions?.code).toBe('RATE_LIMITED');
  });

  it('changed since it was made: refused with PLAN_CHANGED, and the budget is as it was', async () => {
    const dir = tempDataDir('mcp-refused-spend-');
    const env = { DATA_DIR: dir, GATEWAY_APPS_FILE: appsFileOf(), MCP_MUTATIONS: 'approve' };
    const before = await startTestGateway({ ...env, PUBLIC_URL: 'https://before.example' });
    let planId: string;
    try {
      const c = await mcpClient(before, { key: AGENT_KEY });
      const planned = await c.call('register_verification', {
        input: { workflowId: 'wf-1', applicant: { firstName: 'Grace' } },
      });
      expect(planned.isError, textOf(planned)).toBeFalsy();
      planId = planned.structuredContent!.planId as string;
      await c.close();
    } finally {
      await before.close();
    }
    // Where the verification calls back is part of its request: another PUBLIC_URL changes the plan.
    const after = await start({ ...env, PUBLIC_URL: 'https://after.example', RATE_LIMIT_CREATIONS: '1/1h' });
    const c = await connect(after, { key: AGENT_KEY });
    for (let i = 0; i < 2; i++) {
      const refused = await c.call('execute_plan', { planId });
      expect(refused.structuredContent).toMatchObject({ planId, code: 'PLAN_CHANGED' });
    }
    expect(await spent(after)).toBe(0);
    expect(after.gateway.sandbox.verification!.requests.filter((r) => r.method === 'POST')).toEqual([]);
    expect((await after.graphql(CREATE, { input: { name: 'direct' } }, { key: AGENT_KEY })).errors).toBeUndefined();
    expect(await spent(after)).toBe(1);
  });
});
