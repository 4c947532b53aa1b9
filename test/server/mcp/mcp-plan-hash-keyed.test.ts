// A plan's hash (docs/agents.md) is shown to approvers, written in the audit trail and logged. It covers every byte a
// plan sends, a Kafka user's password among them: were it a plain SHA-256 of those bytes, whoever reads a hash and the
// plan (its document, variables and requests, as an approver sees them) could test guesses at a password offline. It
// is a keyed digest under the gateway's key (TOKEN_ENCRYPTION_KEY), which no reader holds.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';

import { canonical } from '../../../src/agents/workflow.js';
import { appsFile, gatewaysPerTest } from '../../helpers/gateway.js';
import { mcpClientsPerTest, textOf } from '../../helpers/mcp.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const AGENT_KEY = 'agent-key-0123456789';

describe("an agent plan's hash", () => {
  it('cannot be made again from the plan: a SHA-256 of everything it sends is not it', async () => {
    const gw = await start({
      GATEWAY_APPS_FILE: appsFile('mcp-plan-hash-', [
        { name: 'agent', scopes: ['cloud:read', 'cloud:write'], key: AGENT_KEY },
      ]),
      MCP_MUTATIONS: 'approve',
    });
    const c = await connect(gw, { key: AGENT_KEY });
    // No secret in this plan: what it sends is what it shows, so all its bytes are known here.
    const planned = await c.call('create_project', { input: { name: 'hashed' } });
    expect(planned.isError, textOf(planned)).toBeFalsy();
    const { planId, hash } = planned.structuredContent as { planId: string; hash: string };
    const plan = (await gw.gateway.services.agentPlans.get(planId))!;
    const requests = plan.requests as { steps: { request?: { body: unknown } }[] };
    const sent = requests.steps.flatMap((s) => (s.request ? [s.request.body] : []));
    expect(sent).toHaveLength(1);
    const plain = createHash('sha256')
      .update(canonical({ tool: plan.tool, document: plan.document, variables: plan.variables, requests, sent }))
      .digest('hex');
    expect(hash).toMatch(/^[0-9a-f]{64}$/);
    expect(hash).not.toBe(plain);
  });
});
