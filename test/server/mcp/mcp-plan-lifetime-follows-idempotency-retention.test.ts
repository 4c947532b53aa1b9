// An agent's plan lives no longer than the gateway keeps the idempotency records of its runs: a plan run again after an
// unknown outcome replays from them what an earlier run completed, and once they were purged it would send that again
// (an identity request could create twice). Under an IDEMPOTENCY_RETENTION shorter than 24 hours, a plan made over MCP
// expires when that retention has passed since it was made; before then it runs. The 24 hours of the default are
// test/agents/nothing-runs-unapproved.test.ts's.
import { describe, expect, it } from 'vitest';

import { upstreamCreations } from '../../helpers/cloud.js';
import { gatewaysPerTest, type TestGateway } from '../../helpers/gateway.js';
import { testClock } from '../../helpers/jwt.js';
import { AGENT_KEY, APPROVER_KEY, mcpClientsPerTest, planApps, textOf, type TestMcpClient } from '../../helpers/mcp.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const RETENTION_MS = 3_600_000;
const APPROVE = 'mutation($id: ID!) { approvePlan(planId: $id) { status } }';
const READ = 'query($id: ID!) { agentPlan(id: $id) { status createdAt expiresAt } }';

async function gatewayWithRetention(): Promise<{ gw: TestGateway; c: TestMcpClient; advance: (ms: number) => void }> {
  const clock = testClock();
  const gw = await start(
    {
      GATEWAY_APPS_FILE: planApps('mcp-plan-lifetime-'),
      MCP_MUTATIONS: 'approve',
      MCP_APPROVAL_TTL: '10m',
      IDEMPOTENCY_RETENTION: '1h',
    },
    { testing: { clock: clock.now } },
  );
  return { gw, c: await connect(gw, { key: AGENT_KEY }), advance: clock.advance };
}

/** A plan made over MCP, its expiry read over GraphQL: the retention after it was made. */
async function planExpiringWithTheRetention(gw: TestGateway, c: TestMcpClient, name: string): Promise<string> {
  const made = await c.call('create_project', { input: { name } });
  expect(made.isError, textOf(made)).toBeFalsy();
  const planId = made.structuredContent!.planId as string;
  const read = await gw.graphql<{ agentPlan: { status: string; createdAt: string; expiresAt: string } }>(
    READ,
    { id: planId },
    { key: APPROVER_KEY },
  );
  const { status, createdAt, expiresAt } = read.data!.agentPlan;
  expect(status).toBe('PENDING');
  expect(Date.parse(expiresAt) - Date.parse(createdAt)).toBe(RETENTION_MS);
  return planId;
}

async function approve(gw: TestGateway, planId: string): Promise<void> {
  expect((await gw.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY })).data).toEqual({
    approvePlan: { status: 'APPROVED' },
  });
}

describe('a plan under an IDEMPOTENCY_RETENTION shorter than 24 hours', () => {
  it('is EXPIRED once the retention has passed since it was made: execute_plan sends nothing', async () => {
    const { gw, c, advance } = await gatewayWithRetention();
    const planId = await planExpiringWithTheRetention(gw, c, 'outlived');
    advance(RETENTION_MS - 60_000);
    // Approved within its life, the approval (10 minutes) outlasts the plan: it never runs the plan past its expiry.
    await approve(gw, planId);
    advance(60_000);

    const late = await c.call('execute_plan', { planId });
    expect(late.structuredContent).toMatchObject({ planId, status: 'EXPIRED', code: 'PLAN_EXPIRED' });
    expect(textOf(late)).toContain(`plan ${planId} has expired`);
    expect(textOf(late)).toContain('IDEMPOTENCY_RETENTION');
    expect(upstreamCreations(gw)).toEqual([]);
    const read = await gw.graphql(READ, { id: planId }, { key: APPROVER_KEY });
    expect(read.data).toMatchObject({ agentPlan: { status: 'EXPIRED' } });
    const refused = await gw.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY });
    expect(refused.errors?.[0]).toMatchObject({
      message: `plan ${planId} has expired: it can never run`,
      extensions: { code: 'CONFLICT' },
    });
  });

  it('runs before the retention has passed since it was made', async () => {
    const { gw, c, advance } = await gatewayWithRetention();
    const planId = await planExpiringWithTheRetention(gw, c, 'in time');
    advance(RETENTION_MS - 60_000);
    await approve(gw, planId);
    advance(59_000);

    const done = await c.call('execute_plan', { planId });
    expect(done.structuredContent, textOf(done)).toMatchObject({
      planId,
      status: 'SUCCEEDED',
      createProject: { project: { name: 'in time' } },
    });
    expect(upstreamCreations(gw)).toHaveLength(1);
  });
});
