// An app holds at most MAX_OPEN_PLANS_PER_APP plans awaiting approval or execution (docs/agents.md, "Bounds and
// retention"): every plan that has not run to its end and was not declined counts, whatever its state's name: a plan
// running now (EXECUTING) and one whose run ended unknown (UNKNOWN, to be approved and run again) as a pending one.
// The running plan is held by the sandbox (faults.hold) until the test releases it, so nothing here depends on timing.
import { describe, expect, it, vi } from 'vitest';

import { MAX_OPEN_PLANS_PER_APP } from '../../src/store/agent-plans.js';
import { gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';
import { AGENT_KEY, APPROVER_KEY, mcpClientsPerTest, planApps, textOf, type TestMcpClient } from '../helpers/mcp.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

async function plan(c: TestMcpClient, name: string): Promise<string> {
  const planned = await c.call('create_project', { input: { name } });
  expect(planned.isError, textOf(planned)).toBeFalsy();
  return planned.structuredContent!.planId as string;
}

async function approve(gw: TestGateway, planId: string): Promise<void> {
  const approved = await gw.graphql(
    'mutation($id: ID!) { approvePlan(planId: $id) { status } }',
    { id: planId },
    { key: APPROVER_KEY },
  );
  expect(approved.errors).toBeUndefined();
}

describe('the bound on open plans', () => {
  it(`counts executing and unknown plans among the ${MAX_OPEN_PLANS_PER_APP} an app may hold`, async () => {
    const gw = await start({
      GATEWAY_APPS_FILE: planApps('plans-bound-'),
      MCP_MUTATIONS: 'approve',
      RATE_LIMIT_CREATIONS: 'off',
      UPSTREAM_MAX_RETRIES: '1',
      UPSTREAM_RETRY_BUDGET: '2s',
    });
    const c = await connect(gw, { key: AGENT_KEY });
    const cloud = gw.gateway.sandbox.cloud!;

    // One plan whose run ended unknown: the project was created and each answer lost.
    const unknown = await plan(c, 'unknown');
    await approve(gw, unknown);
    cloud.faults.enqueueFor((p, m) => m === 'POST' && p.includes('projects'), 'reset-after', 'reset-after');
    const lost = await c.call('execute_plan', { planId: unknown });
    expect(lost.structuredContent, textOf(lost)).toMatchObject({ planId: unknown, status: 'UNKNOWN' });
    cloud.faults.clear();

    // One plan running now: its request is held by the sandbox.
    const running = await plan(c, 'running');
    await approve(gw, running);
    const held = cloud.faults.hold();
    const execution = c.call('execute_plan', { planId: running });
    // Handled here too: should an assertion below fail, the client closes before the test awaits the call.
    execution.catch(() => undefined);
    try {
      await vi.waitFor(() => expect(held.arrived()).toBe(1), { timeout: 30_000, interval: 10 });
      const read = await gw.graphql<{ agentPlan: { status: string } }>(
        'query($id: ID!) { agentPlan(id: $id) { status } }',
        { id: running },
        { key: APPROVER_KEY },
      );
      expect(read.data!.agentPlan.status).toBe('EXECUTING');

      // The rest of the bound in pending plans; one more is refused, and nothing of it is stored.
      for (let i = 2; i < MAX_OPEN_PLANS_PER_APP; i++) await plan(c, `p${i}`);
      const refused = await c.call('create_project', { input: { name: 'one too many' } });
      expect(refused.isError, textOf(refused)).toBe(true);
      expect(refused.structuredContent!.errors[0]).toMatchObject({ code: 'RATE_LIMITED' });
      expect(textOf(refused)).toMatch(
        new RegExp(`this app has ${MAX_OPEN_PLANS_PER_APP} plans awaiting approval or execution`),
      );
    } finally {
      held.release();
    }
    const ran = await execution;
    expect(ran.structuredContent, textOf(ran)).toMatchObject({ planId: running, status: 'SUCCEEDED' });

    // A plan that ran to its end no longer counts: the app may plan one more.
    await plan(c, 'after the run');
  });
});
