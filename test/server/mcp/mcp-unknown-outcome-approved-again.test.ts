// A plan whose execution ended with an unknown outcome is run again with the plan id; once its approval has lapsed,
// a person approves it again (the same plan, its hash, its idempotency keys): it is listed for approval, approved
// again, and then runs to its end, creating nothing twice. Past the plan's 24 hours it is expired, as every plan.
import path from 'node:path';
import { describe, expect, it } from 'vitest';

import { upstreamCreations } from '../../helpers/cloud.js';
import { gatewaysPerTest, type TestGateway } from '../../helpers/gateway.js';
import { testClock } from '../../helpers/jwt.js';
import { AGENT_KEY, APPROVER_KEY, mcpClientsPerTest, planApps, textOf, type TestMcpClient } from '../../helpers/mcp.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const appsFileOf = () => planApps('mcp-unknown-again-');

const APPROVE = 'mutation($id: ID!) { approvePlan(planId: $id) { id status approvedBy hash } }';
const APPROVE_UNKNOWN =
  'mutation($id: ID!) { approvePlan(planId: $id, status: UNKNOWN) { id status approvedBy hash } }';
const DECLINE = 'mutation($id: ID!) { declinePlan(planId: $id) { id status } }';
const PENDING = '{ pendingAgentPlans { id status } }';
const TTL = 10 * 60_000;

/** A plan approved, then executed while the cloud answers 503: its outcome is unknown. */
async function unknownPlan(gw: TestGateway, c: TestMcpClient, name: string): Promise<string> {
  const planId = (await c.call('create_project', { input: { name } })).structuredContent!.planId as string;
  expect((await gw.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY })).data).toMatchObject({
    approvePlan: { status: 'APPROVED' },
  });
  gw.gateway.sandbox.cloud!.faults.enqueueFor((p, m) => m === 'POST' && p.includes('projects'), '503', '503', '503');
  const unknown = await c.call('execute_plan', { planId });
  expect(unknown.structuredContent).toMatchObject({ planId, status: 'UNKNOWN' });
  gw.gateway.sandbox.cloud!.faults.clear();
  return planId;
}

describe('a plan whose outcome is unknown, its approval lapsed', () => {
  it('is listed for approval, approved again by a person, and then runs to its end under the same keys', async () => {
    const clock = testClock();
    const gw = await start(
      {
        GATEWAY_APPS_FILE: appsFileOf(),
        MCP_MUTATIONS: 'approve',
        MCP_APPROVAL_TTL: '10m',
        UPSTREAM_MAX_RETRIES: '1',
        UPSTREAM_RETRY_BUDGET: '2s',
      },
      { testing: { clock: clock.now } },
    );
    const c = await connect(gw, { key: AGENT_KEY });
    const planId = await unknownPlan(gw, c, 'flaky');
    const read = await gw.graphql(
      'query($id: ID!) { agentPlan(id: $id) { hash } }',
      { id: planId },
      { key: APPROVER_KEY },
    );
    const { hash } = read.data!.agentPlan as { hash: string };

    clock.advance(TTL + 1);
    const again = await c.call('execute_plan', { planId });
    expect(again.structuredContent).toMatchObject({
      planId,
      status: 'UNKNOWN',
      code: 'APPROVAL_REQUIRED',
      approveUrl: expect.stringContaining(`/approvals?plan=${planId}`),
    });
    expect(textOf(again)).toContain(`the outcome of plan ${planId} is unknown and its approval has expired`);
    expect((await gw.graphql(PENDING, {}, { key: APPROVER_KEY })).data).toEqual({
      pendingAgentPlans: [{ id: planId, status: 'UNKNOWN' }],
    });
    // A plan that may have been applied is never declined; it is approved again, as it was planned.
    const declined = await gw.graphql(DECLINE, { id: planId }, { key: APPROVER_KEY });
    expect(declined.errors?.[0]?.extensions?.code).toBe('CONFLICT');
    // Approved by naming the state the person read (approvePlan without it is CONFLICT for an UNKNOWN plan).
    expect((await gw.graphql(APPROVE_UNKNOWN, { id: planId }, { key: APPROVER_KEY })).data).toEqual({
      approvePlan: { id: planId, status: 'UNKNOWN', approvedBy: 'approver', hash },
    });
    expect((await gw.graphql(PENDING, {}, { key: APPROVER_KEY })).data).toEqual({ pendingAgentPlans: [] });

    const done = await c.call('execute_plan', { planId });
    expect(done.structuredContent).toMatchObject({
      planId,
      status: 'SUCCEEDED',
      createProject: { project: { name: 'flaky' } },
    });
    expect(upstreamCreations(gw).filter((r) => r.status !== null && r.status < 300)).toHaveLength(1);
    expect(new Set(upstreamCreations(gw).map((r) => r.headers['idempotency-key'])).size).toBe(1);
    expect((await c.call('execute_plan', { planId })).structuredContent).toMatchObject({
      planId,
      status: 'SUCCEEDED',
      replayed: true,
    });
  });

  it('past the plan’s 24 hours it has expired: it is neither listed, approved again nor run', async () => {
    const clock = testClock();
    const gw = await start(
      {
        GATEWAY_APPS_FILE: appsFileOf(),
        MCP_MUTATIONS: 'approve',
        MCP_APPROVAL_TTL: '10m',
        UPSTREAM_MAX_RETRIES: '1',
        UPSTREAM_RETRY_BUDGET: '2s',
      },
      { testing: { clock: clock.now } },
    );
    const c = await connect(gw, { key: AGENT_KEY });
    const planId = await unknownPlan(gw, c, 'late');
    const sent = upstreamCreations(gw).length;

    clock.advance(24 * 3_600_000);
    expect((await gw.graphql(PENDING, {}, { key: APPROVER_KEY })).data).toEqual({ pendingAgentPlans: [] });
    const refused = await gw.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY });
    expect(refused.errors?.[0]).toMatchObject({
      message: `plan ${planId} has expired: it can never run`,
      extensions: { code: 'CONFLICT' },
    });
    const late = await c.call('execute_plan', { planId });
    expect(late.structuredContent).toMatchObject({ planId, status: 'EXPIRED', code: 'PLAN_EXPIRED' });
    expect(textOf(late)).toContain('The outcome of its last execution is unknown');
    expect(upstreamCreations(gw)).toHaveLength(sent);
  });
});
