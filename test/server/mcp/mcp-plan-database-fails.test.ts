// A plan whose run meets the gateway's own database failing (docs/contract.md, the fault matrix: SERVICE_UNAVAILABLE)
// is never taken for done or for failed. With the database unwritable from the start, execute_plan is refused before
// anything is sent and the plan is as it was: called again once the disk is back, it runs and creates once. With the
// database failing after the upstream created the project (its answer could not be stored, nor could the plan's
// outcome), the plan reads as being executed until IDEMPOTENCY_TAKEOVER has passed with no sign of life, then, approved
// again (its approval was spent on the run it claimed), runs again under the same idempotency key: the upstream replays
// what it created, one project, and the plan succeeds. Which status a finished run leaves is the rule of
// test/agents/run-status.test.ts.
import { describe, expect, it } from 'vitest';

import { upstreamCreations } from '../../helpers/cloud.js';
import { fileSizeLimit, fileSizeLimitUnavailable, whileFilesCannotGrow } from '../../helpers/faults.js';
import { gatewaysPerTest, type TestGateway } from '../../helpers/gateway.js';
import { testClock } from '../../helpers/jwt.js';
import {
  AGENT_KEY,
  approveAgainAsUnknown,
  APPROVER_KEY,
  mcpClientsPerTest,
  planApps,
  type TestMcpClient,
} from '../../helpers/mcp.js';
import { waitFor } from '../../helpers/wait.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const appsFileOf = () => planApps('mcp-plan-database-fails-');
const APPROVE = 'mutation($id: ID!) { approvePlan(planId: $id) { status } }';
const STATUS = 'query($id: ID!) { agentPlan(id: $id) { status } }';

async function approvedPlan(gw: TestGateway, c: TestMcpClient, name: string): Promise<string> {
  const planId = (await c.call('create_project', { input: { name } })).structuredContent!.planId as string;
  expect((await gw.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY })).data).toEqual({
    approvePlan: { status: 'APPROVED' },
  });
  return planId;
}

const noFileSizeLimit = fileSizeLimitUnavailable();
describe.skipIf(noFileSizeLimit !== null)("a plan's run and the gateway's database failing", () => {
  it('unwritable from the start: refused, nothing sent, the plan as it was; it runs once the disk is back', async () => {
    const gw = await start({ GATEWAY_APPS_FILE: appsFileOf(), MCP_MUTATIONS: 'approve' });
    const c = await connect(gw, { key: AGENT_KEY });
    const planId = await approvedPlan(gw, c, 'disk-first');

    const refused = await whileFilesCannotGrow(() => c.call('execute_plan', { planId }));
    expect(refused.isError).toBe(true);
    expect(refused.structuredContent).toMatchObject({
      errors: [{ code: 'SERVICE_UNAVAILABLE', retryAfterSeconds: expect.any(Number) }],
    });
    expect(upstreamCreations(gw)).toHaveLength(0);
    expect((await gw.graphql(STATUS, { id: planId }, { key: APPROVER_KEY })).data).toEqual({
      agentPlan: { status: 'APPROVED' },
    });

    const ran = await c.call('execute_plan', { planId });
    expect(ran.structuredContent).toMatchObject({ planId, status: 'SUCCEEDED', replayed: false });
    expect(upstreamCreations(gw)).toHaveLength(1);
  });

  it('failing after the upstream created it: executing until the takeover, then run again and created once', async () => {
    const clock = testClock();
    const gw = await start(
      { GATEWAY_APPS_FILE: appsFileOf(), MCP_MUTATIONS: 'approve', IDEMPOTENCY_TAKEOVER: '30s' },
      { testing: { clock: clock.now } },
    );
    const c = await connect(gw, { key: AGENT_KEY });
    const planId = await approvedPlan(gw, c, 'disk-after');

    const held = gw.gateway.sandbox.cloud!.faults.hold();
    const answer = c.call('execute_plan', { planId });
    await waitFor(() => held.arrived() === 1, 20_000, 'the creation upstream');
    fileSizeLimit(0);
    let failed: Awaited<typeof answer>;
    try {
      held.release();
      failed = await answer;
    } finally {
      fileSizeLimit(null);
    }
    expect(failed.isError).toBe(true);
    expect(failed.structuredContent).toMatchObject({ errors: [{ code: 'SERVICE_UNAVAILABLE' }] });
    expect(upstreamCreations(gw).filter((r) => r.status !== null && r.status < 300)).toHaveLength(1);

    // Neither done nor failed: within the takeover its run may still be alive, and nothing is sent.
    expect((await c.call('execute_plan', { planId })).structuredContent).toMatchObject({
      planId,
      status: 'EXECUTING',
      retryAfterSeconds: expect.any(Number),
    });
    expect(upstreamCreations(gw)).toHaveLength(1);

    clock.advance(30_001);
    expect((await gw.graphql(STATUS, { id: planId }, { key: APPROVER_KEY })).data).toEqual({
      agentPlan: { status: 'UNKNOWN' },
    });
    expect((await c.call('execute_plan', { planId })).structuredContent).toMatchObject({
      planId,
      status: 'UNKNOWN',
      code: 'APPROVAL_REQUIRED',
    });
    expect(upstreamCreations(gw)).toHaveLength(1);
    await approveAgainAsUnknown(gw, planId);
    const ran = await c.call('execute_plan', { planId });
    expect(ran.structuredContent).toMatchObject({
      planId,
      status: 'SUCCEEDED',
      createProject: { project: { name: 'disk-after' } },
    });
    const created = upstreamCreations(gw).filter((r) => r.status !== null && r.status < 300);
    expect(new Set(created.map((r) => r.headers['idempotency-key'])).size).toBe(1);
    // The upstream holds one project of that name: the second run's request was a replay of the first's.
    expect(gw.gateway.sandbox.cloud!.projects().filter((p) => p.name === 'disk-after')).toHaveLength(1);
  });
});
