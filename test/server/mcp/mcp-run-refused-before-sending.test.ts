// A plan's run that is refused before anything is sent upstream changes nothing (docs/decisions/060): refused by its
// app's rate limit, or by an open circuit (`sent: false`), the plan stays approved with its approval, the answer says
// why, when to call again and that nothing was sent, and it runs once the cause is gone, creating once. A run that
// may have reached the upstream is UNKNOWN, as before.
import { describe, expect, it } from 'vitest';

import { upstreamCreations } from '../../helpers/cloud.js';
import { gatewaysPerTest, startTestGateway, tempDataDir, type TestGateway } from '../../helpers/gateway.js';
import { testClock } from '../../helpers/jwt.js';
import {
  AGENT_KEY,
  approveAgainAsUnknown,
  APPROVER_KEY,
  mcpClient,
  mcpClientsPerTest,
  OPERATOR_KEY,
  planApps,
  textOf,
  type TestMcpClient,
} from '../../helpers/mcp.js';
import { waitFor } from '../../helpers/wait.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const appsFileOf = () => planApps('mcp-run-refused-', { withOperator: true });

const APPROVE = 'mutation($id: ID!) { approvePlan(planId: $id) { status } }';
const PROJECTS = '/apis/projects/public/v4/projects';

async function approvedPlan(gw: TestGateway, c: TestMcpClient, name: string): Promise<string> {
  const planned = await c.call('create_project', { input: { name } });
  expect(planned.isError, textOf(planned)).toBeFalsy();
  const planId = planned.structuredContent!.planId as string;
  expect((await gw.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY })).data).toEqual({
    approvePlan: { status: 'APPROVED' },
  });
  return planId;
}

async function planOf(gw: TestGateway, planId: string) {
  const read = await gw.graphql<{ agentPlan: { status: string; approvedBy: string | null } }>(
    'query($id: ID!) { agentPlan(id: $id) { status approvedBy } }',
    { id: planId },
    { key: APPROVER_KEY },
  );
  return read.data!.agentPlan;
}

/** execute_plan of `planId`, refused with `code` before anything was sent: the plan is approved as it was. */
async function refusedAsItWas(gw: TestGateway, c: TestMcpClient, planId: string, code: string) {
  const refused = await c.call('execute_plan', { planId });
  expect(refused.isError).toBe(true);
  expect(refused.structuredContent).toMatchObject({
    planId,
    status: 'APPROVED',
    sent: false,
    retryAfterSeconds: expect.any(Number),
    errors: [expect.objectContaining({ code, retryAfterSeconds: expect.any(Number) })],
  });
  expect(refused.structuredContent!.retryAfterSeconds).toBeGreaterThan(0);
  expect(await planOf(gw, planId)).toEqual({ status: 'APPROVED', approvedBy: 'approver' });
  return refused;
}

describe('a run refused before anything was sent leaves the plan as it was', () => {
  it("refused by the app's rate limit: RATE_LIMITED with its retry-after, still approved, and it runs once the budget is back", async () => {
    const dir = tempDataDir('mcp-run-refused-');
    const env = {
      DATA_DIR: dir,
      GATEWAY_APPS_FILE: appsFileOf(),
      MCP_MUTATIONS: 'approve',
      RATE_LIMIT_CREATIONS: '1/1h',
    };
    const gw = await startTestGateway(env);
    let planId: string;
    try {
      const c = await mcpClient(gw, { key: AGENT_KEY });
      // Making the plan spends the app's one point: its run, a creation like any other, finds none left.
      planId = await approvedPlan(gw, c, 'over budget');
      for (let i = 0; i < 2; i++) {
        const refused = await refusedAsItWas(gw, c, planId, 'RATE_LIMITED');
        expect(textOf(refused)).toMatch(
          /nothing was sent, and the plan is as it was \(APPROVED, with its approval\): call execute_plan .* again in \d+ s/,
        );
      }
      expect(upstreamCreations(gw)).toEqual([]);
      const audit = await gw.graphql<{ agentAudit: { action: string; detail: string }[] }>(
        'query($id: ID) { agentAudit(planId: $id) { action detail } }',
        { id: planId },
        { key: OPERATOR_KEY },
      );
      expect(audit.data!.agentAudit.filter((e) => e.action === 'refused')).toEqual([
        {
          action: 'refused',
          detail: 'the run was refused before anything was sent (RATE_LIMITED); the plan is as it was (APPROVED)',
        },
      ]);
      expect(audit.data!.agentAudit.map((e) => e.action)).not.toContain('unknown');
      await c.close();
    } finally {
      await gw.close();
    }

    // A new window (here: a restart, whose limiter starts afresh): the same approval runs it, once.
    const after = await start(env);
    const c = await connect(after, { key: AGENT_KEY });
    const ran = await c.call('execute_plan', { planId });
    expect(ran.structuredContent).toMatchObject({ planId, status: 'SUCCEEDED', replayed: false });
    expect(upstreamCreations(after)).toHaveLength(1);
  });

  it("refused by the upstream's open circuit (sent: false): still approved, and it runs once the circuit lets calls through; a run that may have been sent is UNKNOWN", async () => {
    const clock = testClock();
    const gw = await start(
      {
        GATEWAY_APPS_FILE: appsFileOf(),
        MCP_MUTATIONS: 'approve',
        UPSTREAM_MAX_RETRIES: '0',
        UPSTREAM_CIRCUIT_VOLUME: '3',
        UPSTREAM_CIRCUIT_RESET_TIMEOUT: '30s',
      },
      { testing: { clock: clock.now } },
    );
    const c = await connect(gw, { key: AGENT_KEY });
    const planId = await approvedPlan(gw, c, 'behind an open circuit');
    const faults = gw.gateway.sandbox.cloud!.faults;
    const unavailable = { status: 503, retryAfterSeconds: null };
    faults.enqueueFor(PROJECTS, unavailable, unavailable, unavailable);
    for (let i = 0; gw.gateway.circuits().cloud !== 'open'; i++) {
      expect(i, 'the circuit opens within its sample').toBeLessThan(3);
      await gw.graphql(
        'mutation($input: CreateProjectInput!) { createProject(input: $input) { project { id } } }',
        { input: { name: `failing ${i}` } },
        { key: AGENT_KEY },
      );
    }
    faults.clear();
    const before = upstreamCreations(gw).length;

    await refusedAsItWas(gw, c, planId, 'UPSTREAM_UNAVAILABLE');
    expect(upstreamCreations(gw)).toHaveLength(before);

    clock.advance(30_001);
    const ran = await c.call('execute_plan', { planId });
    expect(ran.structuredContent).toMatchObject({ planId, status: 'SUCCEEDED', replayed: false });
    expect(upstreamCreations(gw)).toHaveLength(before + 1);

    // Sent, and answered 503: it may have been applied, so it is UNKNOWN, to run again under the same key.
    const sent = await approvedPlan(gw, c, 'sent and failed');
    faults.enqueueFor(PROJECTS, unavailable);
    const unknown = await c.call('execute_plan', { planId: sent });
    expect(unknown.structuredContent).toMatchObject({ planId: sent, status: 'UNKNOWN' });
    expect(await planOf(gw, sent)).toMatchObject({ status: 'UNKNOWN' });
    expect(upstreamCreations(gw)).toHaveLength(before + 2);
  });

  it('a claim another call took over (this one taken for lost) is neither touched nor given back by the call that lost it', async () => {
    const clock = testClock();
    const gw = await start(
      { GATEWAY_APPS_FILE: appsFileOf(), MCP_MUTATIONS: 'approve', IDEMPOTENCY_TAKEOVER: '300ms' },
      { testing: { clock: clock.now } },
    );
    const c = await connect(gw, { key: AGENT_KEY });
    const planId = await approvedPlan(gw, c, 'taken over');
    const plans = gw.gateway.services.agentPlans;
    const lost = (await plans.claim((await plans.get(planId))!))!;
    clock.advance(301);
    // The lost run spent the approval: a person approves the plan again, as UNKNOWN, for the call that takes it over.
    expect(await plans.claim((await plans.get(planId))!)).toBeNull();
    await approveAgainAsUnknown(gw, planId);
    const taker = await plans.claim((await plans.get(planId))!);
    expect(taker).not.toBeNull();
    // The call that lost it still runs: its heartbeat finds the plan claimed by the other, and leaves it so.
    let end!: () => void;
    const running = plans.running(lost, () => new Promise<void>((resolve) => (end = resolve)));
    await waitFor(() => gw.logs().includes('agent plan taken over by another execution'), 20_000, 'a heartbeat');
    end();
    await running;
    expect(await plans.release(lost)).toBe(false);
    expect((await plans.get(planId))!.status).toBe('executing');
    // The taker's own claim is given back as the plan was when it took it: unknown (its last run was lost).
    expect(await plans.release(taker!)).toBe(true);
    expect(await planOf(gw, planId)).toEqual({ status: 'UNKNOWN', approvedBy: 'approver' });
  });
});
