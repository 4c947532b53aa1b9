// An approver app that retries approvePlan without `status` (its first answer lost, say) while the plan ran and ended
// with an unknown outcome must not approve it to run again: the person approved one run of a PENDING plan, and a repeat
// of an identity check (UPSTREAM_OUTCOME_UNKNOWN: its upstream is not known to honour the key) creates a second
// identification. An UNKNOWN plan is approved again only by an approver naming that state (`status: UNKNOWN`, as the
// approvals page sends what the person read); without it, CONFLICT, and nothing is sent.
import { describe, expect, it } from 'vitest';

import { upstreamCreations } from '../../helpers/cloud.js';
import { appsFile, gatewaysPerTest } from '../../helpers/gateway.js';
import { testClock } from '../../helpers/jwt.js';
import { AGENT_KEY, APPROVER_KEY, mcpClientsPerTest, planApps } from '../../helpers/mcp.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const APPROVE =
  'mutation($id: ID!, $status: AgentPlanStatus) { approvePlan(planId: $id, status: $status) { status approvedBy } }';

describe('approvePlan retried without a status after the run ended unknown', () => {
  it('does not approve an identity check again: one approval, one identification upstream', async () => {
    const gw = await start({
      GATEWAY_APPS_FILE: appsFile('mcp-approval-retry-', [
        { name: 'agent', scopes: ['identity:read', 'identity:write'], key: AGENT_KEY },
        { name: 'approver', scopes: ['identity:approve'], key: APPROVER_KEY },
      ]),
      MCP_MUTATIONS: 'approve',
    });
    const identification = gw.gateway.sandbox.identification!;
    const c = await connect(gw, { key: AGENT_KEY });
    const planId = (await c.call('create_identification', { input: { workflowId: 'wf-retried' } })).structuredContent!
      .planId as string;
    expect((await gw.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY })).data).toEqual({
      approvePlan: { status: 'APPROVED', approvedBy: 'approver' },
    });
    // The upstream creates the identification, then the connection resets: the outcome is unknown, the approval spent.
    identification.faults.enqueueFor(() => true, 'reset-after');
    const first = await c.call('execute_plan', { planId });
    identification.faults.clear();
    expect(first.structuredContent).toMatchObject({
      planId,
      status: 'UNKNOWN',
      errors: [{ code: 'UPSTREAM_OUTCOME_UNKNOWN' }],
    });
    expect(identification.identifications()).toHaveLength(1);

    // The approver app's retry of the same call, as it was sent (no status): refused, the plan left as it is.
    const retried = await gw.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY });
    expect(retried.data).toBeNull();
    expect(retried.errors?.[0]).toMatchObject({
      message: expect.stringContaining(`plan ${planId} is UNKNOWN`),
      extensions: { code: 'CONFLICT', field: 'planId' },
    });
    // A retry that names the state it read before the run is refused as well.
    const stale = await gw.graphql(APPROVE, { id: planId, status: 'PENDING' }, { key: APPROVER_KEY });
    expect(stale.errors?.[0]?.extensions?.code).toBe('CONFLICT');
    const refused = await c.call('execute_plan', { planId });
    expect(refused.structuredContent).toMatchObject({ planId, status: 'UNKNOWN', code: 'APPROVAL_REQUIRED' });
    expect(identification.requests).toHaveLength(1);
    expect(identification.identifications()).toHaveLength(1);

    // A person who checked upstream and approves the UNKNOWN plan by name runs it again, under the same key.
    expect((await gw.graphql(APPROVE, { id: planId, status: 'UNKNOWN' }, { key: APPROVER_KEY })).data).toEqual({
      approvePlan: { status: 'UNKNOWN', approvedBy: 'approver' },
    });
    const again = await c.call('execute_plan', { planId });
    expect(again.structuredContent).toMatchObject({ planId, status: 'SUCCEEDED' });
    expect(identification.requests).toHaveLength(2);
    expect(new Set(identification.requests.map((r) => r.headers['idempotency-key'])).size).toBe(1);
  });

  it('does not approve a cloud creation again once its approval lapsed; by name it runs again, replayed upstream', async () => {
    const clock = testClock();
    const gw = await start(
      {
        GATEWAY_APPS_FILE: planApps('mcp-approval-retry-cloud-'),
        MCP_MUTATIONS: 'approve',
        MCP_APPROVAL_TTL: '10m',
        UPSTREAM_MAX_RETRIES: '1',
        UPSTREAM_RETRY_BUDGET: '2s',
      },
      { testing: { clock: clock.now } },
    );
    const cloud = gw.gateway.sandbox.cloud!;
    const c = await connect(gw, { key: AGENT_KEY });
    const planId = (await c.call('create_project', { input: { name: 'retried' } })).structuredContent!.planId as string;
    expect((await gw.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY })).data).toMatchObject({
      approvePlan: { status: 'APPROVED' },
    });
    // The cloud creates the project, and the answer is lost: the outcome is unknown.
    cloud.faults.enqueueFor((p, m) => m === 'POST' && p.includes('projects'), 'reset-after', 'reset-after');
    const unknown = await c.call('execute_plan', { planId });
    cloud.faults.clear();
    expect(unknown.structuredContent).toMatchObject({ planId, status: 'UNKNOWN' });
    const sent = upstreamCreations(gw).length;
    expect(sent).toBeGreaterThan(0);

    clock.advance(10 * 60_000 + 1);
    const retried = await gw.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY });
    expect(retried.errors?.[0]?.extensions?.code).toBe('CONFLICT');
    expect((await c.call('execute_plan', { planId })).structuredContent).toMatchObject({
      planId,
      status: 'UNKNOWN',
      code: 'APPROVAL_REQUIRED',
    });
    expect(upstreamCreations(gw)).toHaveLength(sent);

    expect((await gw.graphql(APPROVE, { id: planId, status: 'UNKNOWN' }, { key: APPROVER_KEY })).data).toEqual({
      approvePlan: { status: 'UNKNOWN', approvedBy: 'approver' },
    });
    const done = await c.call('execute_plan', { planId });
    expect(done.structuredContent).toMatchObject({ planId, status: 'SUCCEEDED' });
    // Sent once more under the plan's key (derived from its id), and the cloud replays it: one project.
    expect(new Set(upstreamCreations(gw).map((r) => r.headers['idempotency-key'])).size).toBe(1);
    expect(cloud.projects().filter((p) => p.name === 'retried')).toHaveLength(1);
  });
});
