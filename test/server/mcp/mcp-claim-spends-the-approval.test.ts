// An approval is spent when a run claims its plan, in the claim's own write: a plan runs once per approval, however its
// run ends. Should the run's outcome never be stored (the process dies, the store's write fails, the run throws), the
// plan reads as UNKNOWN once IDEMPOTENCY_TAKEOVER passes, and the agent's next execute_plan sends nothing: it runs
// again only once a person approves it again, naming that state. An identity check, whose upstream is not known to
// honour its key, is never sent a second time on the approval of its first run.
import { afterEach, describe, expect, it, vi } from 'vitest';

import { AgentPlans } from '../../../src/agents/plans.js';
import { PROJECTS_PATH } from '../../../src/sandbox/cloud.js';
import { AgentPlanRows } from '../../../src/store/agent-plans.js';
import { upstreamCreations } from '../../helpers/cloud.js';
import { appsFile, gatewaysPerTest } from '../../helpers/gateway.js';
import { testClock } from '../../helpers/jwt.js';
import {
  AGENT_KEY,
  approveAgainAsUnknown,
  APPROVER_KEY,
  mcpClientsPerTest,
  planApps,
  textOf,
} from '../../helpers/mcp.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const APPROVE = 'mutation($id: ID!) { approvePlan(planId: $id) { status } }';
const PENDING = '{ pendingAgentPlans { id status } }';
const REGISTRATIONS = '/api/v2/verifications/workflow-instances';

afterEach(() => {
  vi.restoreAllMocks();
});

/** The store fails once as a run's outcome is written: the plan stays executing, its run's end unrecorded. */
function outcomeWriteFailsOnce() {
  vi.spyOn(AgentPlanRows.prototype, 'finish').mockRejectedValueOnce(new Error('the database went away'));
}

describe('a run whose outcome was never stored', () => {
  it('an identity check, its answer lost: the takeover sends nothing until a person approves it again', async () => {
    const clock = testClock();
    const gw = await start(
      {
        GATEWAY_APPS_FILE: appsFile('mcp-claim-spends-', [
          { name: 'agent', scopes: ['identity:read', 'identity:write'], key: AGENT_KEY },
          { name: 'approver', scopes: ['identity:approve'], key: APPROVER_KEY },
        ]),
        MCP_MUTATIONS: 'approve',
      },
      { testing: { clock: clock.now } },
    );
    const takeoverMs = gw.gateway.services.config.idempotencyTakeoverMs;
    const verification = gw.gateway.sandbox.verification!;
    const sent = () => verification.requests.filter((r) => r.path === REGISTRATIONS);
    const agent = await connect(gw, { key: AGENT_KEY });
    const planned = await agent.call('register_verification', {
      input: { workflowId: 'wf-kyc', applicant: { lastName: 'Petrova' } },
    });
    expect(planned.isError, textOf(planned)).toBeFalsy();
    const planId = planned.structuredContent!.planId as string;
    expect((await gw.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY })).data).toEqual({
      approvePlan: { status: 'APPROVED' },
    });

    // The upstream registers the verification, then the connection resets; the outcome's write fails.
    verification.faults.enqueueFor(() => true, 'reset-after');
    outcomeWriteFailsOnce();
    const first = await agent.call('execute_plan', { planId }).catch((err: unknown) => err);
    verification.faults.clear();
    expect(first).toBeDefined();
    expect(sent()).toHaveLength(1);

    // No sign of life for IDEMPOTENCY_TAKEOVER: UNKNOWN, its approval spent by the claim of the run that sent it.
    clock.advance(takeoverMs + 1);
    const again = await agent.call('execute_plan', { planId });
    expect(again.structuredContent).toMatchObject({ planId, status: 'UNKNOWN', code: 'APPROVAL_REQUIRED' });
    expect(sent()).toHaveLength(1);
    expect((await gw.graphql(PENDING, {}, { key: APPROVER_KEY })).data).toEqual({
      pendingAgentPlans: [{ id: planId, status: 'UNKNOWN' }],
    });

    // A person who checked upstream approves it again, as UNKNOWN: it is sent once more, under the same key.
    await approveAgainAsUnknown(gw, planId);
    const done = await agent.call('execute_plan', { planId });
    expect(done.structuredContent, textOf(done)).toMatchObject({ planId, status: 'SUCCEEDED' });
    expect(sent()).toHaveLength(2);
    expect(new Set(sent().map((r) => r.headers['idempotency-key'])).size).toBe(1);
  });

  it('a cloud creation whose run threw after sending: UNKNOWN, and run again only on a new approval', async () => {
    const gw = await start({ GATEWAY_APPS_FILE: planApps('mcp-claim-spends-cloud-'), MCP_MUTATIONS: 'approve' });
    const agent = await connect(gw, { key: AGENT_KEY });
    const planId = (await agent.call('create_project', { input: { name: 'thrown' } })).structuredContent!
      .planId as string;
    expect((await gw.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY })).data).toEqual({
      approvePlan: { status: 'APPROVED' },
    });
    // The run sends its request, then fails before it answers.
    const running = AgentPlans.prototype.running;
    vi.spyOn(AgentPlans.prototype, 'running').mockImplementationOnce(async function (this: AgentPlans, claim, run) {
      await running.call(this, claim, run);
      throw new Error('the process lost its database');
    });
    const first = await agent.call('execute_plan', { planId });
    expect(first.structuredContent).toMatchObject({ planId, status: 'UNKNOWN' });
    expect(upstreamCreations(gw)).toHaveLength(1);

    const again = await agent.call('execute_plan', { planId });
    expect(again.structuredContent).toMatchObject({ planId, status: 'UNKNOWN', code: 'APPROVAL_REQUIRED' });
    expect(upstreamCreations(gw)).toHaveLength(1);
  });

  it('a cloud creation whose outcome is unknown runs again only on a new approval, under the same key', async () => {
    const gw = await start({
      GATEWAY_APPS_FILE: planApps('mcp-claim-spends-retry-'),
      MCP_MUTATIONS: 'approve',
      UPSTREAM_MAX_RETRIES: '0',
    });
    const agent = await connect(gw, { key: AGENT_KEY });
    const planId = (await agent.call('create_project', { input: { name: 'unknown' } })).structuredContent!
      .planId as string;
    expect((await gw.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY })).data).toEqual({
      approvePlan: { status: 'APPROVED' },
    });
    const faults = gw.gateway.sandbox.cloud!.faults;
    faults.enqueueFor(PROJECTS_PATH, { status: 503, retryAfterSeconds: null });
    const first = await agent.call('execute_plan', { planId });
    faults.clear();
    expect(first.structuredContent).toMatchObject({ planId, status: 'UNKNOWN' });
    const sent = () => gw.gateway.sandbox.cloud!.requests.filter((r) => r.path === PROJECTS_PATH);
    expect(sent()).toHaveLength(1);

    const again = await agent.call('execute_plan', { planId });
    expect(again.structuredContent).toMatchObject({ planId, status: 'UNKNOWN', code: 'APPROVAL_REQUIRED' });
    expect(sent()).toHaveLength(1);
    await approveAgainAsUnknown(gw, planId);
    const done = await agent.call('execute_plan', { planId });
    expect(done.structuredContent, textOf(done)).toMatchObject({ planId, status: 'SUCCEEDED' });
    expect(sent()).toHaveLength(2);
    expect(new Set(sent().map((r) => r.headers['idempotency-key'])).size).toBe(1);
  });
});
