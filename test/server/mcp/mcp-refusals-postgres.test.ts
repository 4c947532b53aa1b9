// On PostgreSQL, where the rate-limit counters are shared and a spent window is then refused from the replica's
// memory: a plan refused at the app's last point gives the point back, and the next plan is made with it; a run the
// rate limit refuses leaves the plan approved, nothing sent (docs/decisions/060).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { appsFile, startTestGateway, type TestGateway } from '../../helpers/gateway.js';
import { mcpClient, textOf } from '../../helpers/mcp.js';
import { startPostgres, type TestPostgres } from '../../helpers/postgres.js';

const AGENT_KEY = 'agent-key-0123456789';
const APPROVER_KEY = 'approver-key-0123456789';

let pg: TestPostgres | undefined;
let gw: TestGateway | undefined;
beforeAll(async () => {
  pg = await startPostgres();
  gw = await startTestGateway({
    DATABASE_URL: await pg.createDatabase('mcp_refusals'),
    GATEWAY_APPS_FILE: appsFile('mcp-refusals-pg-', [
      { name: 'agent', scopes: ['cloud:read', 'cloud:write'], key: AGENT_KEY },
      { name: 'approver', scopes: ['cloud:approve'], key: APPROVER_KEY },
    ]),
    MCP_MUTATIONS: 'approve',
    RATE_LIMIT_CREATIONS: '1/1h',
  });
}, 120_000);
afterAll(async () => {
  await gw?.close();
  await pg?.stop();
});

describe('refusals spend nothing and change nothing on PostgreSQL', () => {
  it("a refused plan gives the app's last point back; a run the rate limit refuses leaves the plan approved", async () => {
    const c = await mcpClient(gw!, { key: AGENT_KEY });
    try {
      const invalid = await c.call('create_subnet', {
        input: {
          projectId: '3fa85f64-5717-4562-b3fc-2c963f66afa6',
          networkId: '3fa85f64-5717-4562-b3fc-2c963f66afa7',
          title: 's',
          cidr: '10.0.0.300/24',
        },
      });
      expect(invalid.structuredContent!.errors[0]).toMatchObject({ code: 'BAD_USER_INPUT', argument: 'input.cidr' });
      const planned = await c.call('create_project', { input: { name: 'the last point' } });
      expect(planned.isError, textOf(planned)).toBeFalsy();
      const planId = planned.structuredContent!.planId as string;
      const over = await c.call('create_project', { input: { name: 'no point left' } });
      expect(over.structuredContent!.errors[0]).toMatchObject({ code: 'RATE_LIMITED' });

      const approve = await gw!.graphql(
        'mutation($id: ID!) { approvePlan(planId: $id) { status } }',
        { id: planId },
        { key: APPROVER_KEY },
      );
      expect(approve.data).toEqual({ approvePlan: { status: 'APPROVED' } });
      const refused = await c.call('execute_plan', { planId });
      expect(refused.structuredContent).toMatchObject({
        planId,
        status: 'APPROVED',
        sent: false,
        errors: [expect.objectContaining({ code: 'RATE_LIMITED' })],
      });
      const read = await gw!.graphql(
        'query($id: ID!) { agentPlan(id: $id) { status approvedBy } }',
        { id: planId },
        { key: APPROVER_KEY },
      );
      expect(read.data).toEqual({ agentPlan: { status: 'APPROVED', approvedBy: 'approver' } });
      expect(
        gw!.gateway.sandbox.cloud!.requests.filter((r) => r.method === 'POST' && !r.path.startsWith('/iam')),
      ).toEqual([]);
    } finally {
      await c.close();
    }
  });
});
