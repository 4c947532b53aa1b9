// An apps-file entry's `approves` says whose plans the app approves (docs/agents.md, "Who approves"); a JWT that
// AUTH_APPS makes that app (`finance=finance`) is the same app, and approves no more than its keys do.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { upstreamCreations } from '../helpers/cloud.js';
import { appsFile, type TestGateway } from '../helpers/gateway.js';
import { sign, signingKey, startJwksServer, startJwtGateway, type JwksServer } from '../helpers/jwt.js';
import { mcpClient, textOf } from '../helpers/mcp.js';

const AGENT_KEY = 'agent-key-0123456789';
const FINANCE_KEY = 'finance-key-0123456789';

let jwks: JwksServer;
let gw: TestGateway;
let token: string;

beforeAll(async () => {
  const key = await signingKey('k1');
  jwks = await startJwksServer([key]);
  gw = await startJwtGateway(jwks, {
    GATEWAY_APPS_FILE: appsFile('approves-jwt-', [
      { name: 'agent', scopes: ['cloud:read', 'cloud:write'], key: AGENT_KEY },
      { name: 'finance', scopes: ['cloud:approve'], approves: ['build-agent'], key: FINANCE_KEY },
    ]),
    AUTH_APPS: 'finance=finance',
    MCP_MUTATIONS: 'approve',
  });
  token = await sign(key, { claims: { azp: 'finance', scope: 'cloud:approve' } });
});
afterAll(async () => {
  await gw?.close();
  await jwks?.stop();
});

describe('the approves list of an app signed in with a JWT', () => {
  it("holds: finance's JWT neither sees nor approves the plan of an app its list does not name", async () => {
    const c = await mcpClient(gw, { key: AGENT_KEY });
    try {
      const planned = await c.call('create_project', { input: { name: 'not-finance' } });
      expect(planned.isError, textOf(planned)).toBeFalsy();
      const planId = planned.structuredContent!.planId as string;
      for (const credential of [FINANCE_KEY, token]) {
        const seen = await gw.graphql(
          'query($id: ID!) { agentPlan(id: $id) { id } }',
          { id: planId },
          {
            key: credential,
          },
        );
        expect(seen.data).toEqual({ agentPlan: null });
        const approved = await gw.graphql(
          'mutation($id: ID!) { approvePlan(planId: $id) { status } }',
          { id: planId },
          { key: credential },
        );
        expect(approved.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
      }
      const executed = await c.call('execute_plan', { planId });
      expect(executed.structuredContent).toMatchObject({ code: 'APPROVAL_REQUIRED' });
      expect(upstreamCreations(gw)).toEqual([]);
    } finally {
      await c.close();
    }
  });
});
