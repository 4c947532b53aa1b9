// A plan whose approval lapsed needs a person's approval again (execute_plan answers APPROVAL_REQUIRED with the
// approvals page's link): pendingAgentPlans and pendingAgentPlansChanged (what the approvals page lists) show it,
// beside the plans never approved, and leave out the ones whose approval holds.
import { describe, expect, it } from 'vitest';

import { gatewaysPerTest } from '../../helpers/gateway.js';
import { subscribe } from '../../helpers/identity.js';
import { testClock } from '../../helpers/jwt.js';
import { AGENT_KEY, APPROVER_KEY, mcpClientsPerTest, planApps } from '../../helpers/mcp.js';
import { wsClient } from '../../helpers/mobile-id.js';
import { waitFor } from '../../helpers/wait.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const appsFileOf = () => planApps('mcp-lapsed-');

const APPROVE = 'mutation($id: ID!) { approvePlan(planId: $id) { status } }';
const FIELDS = 'id status approvedBy';

describe('plans awaiting approval', () => {
  it('list a plan whose approval lapsed, beside the pending ones, and not one whose approval holds', async () => {
    const clock = testClock();
    const gw = await start(
      { GATEWAY_APPS_FILE: appsFileOf(), MCP_MUTATIONS: 'approve', MCP_APPROVAL_TTL: '10m' },
      { testing: { clock: clock.now } },
    );
    const c = await connect(gw, { key: AGENT_KEY });
    const plan = async (name: string) =>
      (await c.call('create_project', { input: { name } })).structuredContent!.planId as string;
    const lapsed = await plan('lapsed');
    expect((await gw.graphql(APPROVE, { id: lapsed }, { key: APPROVER_KEY })).data).toEqual({
      approvePlan: { status: 'APPROVED' },
    });
    clock.advance(10 * 60_000 + 1);
    const pending = await plan('pending');
    const approved = await plan('approved');
    expect((await gw.graphql(APPROVE, { id: approved }, { key: APPROVER_KEY })).data).toEqual({
      approvePlan: { status: 'APPROVED' },
    });
    expect((await c.call('execute_plan', { planId: lapsed })).structuredContent).toMatchObject({
      code: 'APPROVAL_REQUIRED',
    });

    const expected = [
      { id: pending, status: 'PENDING', approvedBy: null },
      { id: lapsed, status: 'APPROVED', approvedBy: 'approver' },
    ];
    expect((await gw.graphql(`{ pendingAgentPlans { ${FIELDS} } }`, {}, { key: APPROVER_KEY })).data).toEqual({
      pendingAgentPlans: expected,
    });
    // The approvals page lists what this subscription gives.
    const ws = wsClient(gw, { key: APPROVER_KEY });
    try {
      const sub = subscribe(ws, `subscription { pendingAgentPlansChanged { ${FIELDS} } }`);
      const [first] = await waitFor(() => sub.received.length > 0 && sub.received, 20_000, 'the first list');
      expect(sub.errors).toEqual([]);
      expect(first).toEqual({ pendingAgentPlansChanged: expected });
      sub.stop();
    } finally {
      await ws.dispose();
    }
  });
});
