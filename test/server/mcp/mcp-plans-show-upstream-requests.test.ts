// Every plan, single or composite, shows the exact upstream requests it will send (method, path, headers without
// secrets, body) and its hash covers them (docs/decisions/060): a single creation goes through the same dry run as a
// provisioning plan, and what the sandbox then receives is what the plan showed.
import { describe, expect, it } from 'vitest';

import { appsFile, gatewaysPerTest, startTestGateway, tempDataDir } from '../../helpers/gateway.js';
import { mcpClient, mcpClientsPerTest, textOf } from '../../helpers/mcp.js';
import { clearTextOf } from '../../helpers/store.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const AGENT_KEY = 'agent-key-0123456789';

const appsFileOf = () =>
  appsFile('mcp-requests-', [
    { name: 'agent', scopes: ['cloud:read', 'cloud:write', 'identity:read', 'identity:write'], key: AGENT_KEY },
  ]);

interface ShownRequest {
  upstream: string;
  method: string;
  path: string;
  headers: { name: string; value: string }[];
  body: unknown;
}

function header(r: ShownRequest, name: string): string | undefined {
  return r.headers.find((h) => h.name === name)?.value;
}

describe('a plan shows the exact upstream requests', () => {
  it("a single creation's plan shows its upstream request, and the sandbox receives exactly that", async () => {
    const dir = tempDataDir('mcp-requests-');
    const gw = await start({
      DATA_DIR: dir,
      GATEWAY_APPS_FILE: appsFileOf(),
      MCP_MUTATIONS: 'approve',
      MCP_APPROVAL: 'elicitation',
    });
    const c = await connect(gw, { key: AGENT_KEY, person: 'accept' });
    const planned = await c.call('create_project', { input: { name: 'shown', description: 'exact bytes' } });
    expect(planned.isError, textOf(planned)).toBeFalsy();
    const steps = planned.structuredContent!.requests.steps as {
      name: string;
      action: string;
      request: ShownRequest;
    }[];
    expect(steps).toHaveLength(1);
    const shown = steps[0]!.request;
    expect(shown).toMatchObject({ upstream: 'cloud', method: 'POST', path: expect.stringMatching(/^\//) });
    expect(header(shown, 'authorization')).toBe('Bearer ***');
    expect(header(shown, 'idempotency-key')).toMatch(/^[0-9a-f-]{36}$/);
    expect(planned.structuredContent!.summary).toContain(shown.path);
    expect(gw.gateway.sandbox.cloud!.requests.filter((r) => r.method === 'POST' && !r.path.startsWith('/iam'))).toEqual(
      [],
    );

    const executed = await c.call('execute_plan', { planId: planned.structuredContent!.planId });
    expect(executed.isError, textOf(executed)).toBeFalsy();
    const sent = gw.gateway.sandbox.cloud!.requests.filter((r) => r.method === 'POST' && !r.path.startsWith('/iam'));
    expect(sent).toHaveLength(1);
    expect(sent[0]!.path).toBe(shown.path);
    expect(sent[0]!.body).toEqual(shown.body);
    for (const { name, value } of shown.headers.filter((h) => h.name !== 'authorization'))
      expect(sent[0]!.headers[name], name).toBe(value);
  });

  it('an identification plan shows the identification request, secrets of a verification masked, and sends nothing', async () => {
    const dir = tempDataDir('mcp-requests-');
    const gw = await start({
      DATA_DIR: dir,
      GATEWAY_APPS_FILE: appsFileOf(),
      MCP_MUTATIONS: 'approve',
      MCP_APPROVAL: 'elicitation',
    });
    const c = await connect(gw, { key: AGENT_KEY, person: 'accept' });
    const identification = await c.call('create_identification', {
      input: { workflowId: 'wf-7', linkLifetimeInMinutes: 30 },
    });
    expect(identification.isError, textOf(identification)).toBeFalsy();
    const shown = identification.structuredContent!.requests.steps[0].request as ShownRequest;
    expect(shown).toMatchObject({ upstream: 'identification', method: 'POST' });
    expect(gw.gateway.sandbox.identification!.requests).toEqual([]);
    const executed = await c.call('execute_plan', { planId: identification.structuredContent!.planId });
    expect(executed.isError, textOf(executed)).toBeFalsy();
    const sent = gw.gateway.sandbox.identification!.requests.filter((r) => r.method === 'POST');
    expect(sent).toHaveLength(1);
    expect(sent[0]!.path).toBe(shown.path);
    expect(sent[0]!.body).toEqual(shown.body);
    expect(sent[0]!.headers['idempotency-key']).toBe(header(shown, 'idempotency-key'));

    const verification = await c.call('register_verification', {
      input: { workflowId: 'wf-8', applicant: { firstName: 'Ada' } },
    });
    expect(verification.isError, textOf(verification)).toBeFalsy();
    const body = JSON.stringify(verification.structuredContent!.requests.steps[0].request.body);
    expect(body).toMatch(/\/webhooks\/verification\/\*\*\*/);
    expect(body).toContain('Ada');
    // Stored, an identity plan names nobody: its variables, document, requests and summary are sealed.
    const rows = await gw.gateway.services.store.db.selectFrom('agent_plans').selectAll().execute();
    expect(rows).toHaveLength(2);
    for (const row of rows) {
      for (const column of ['variables', 'document', 'requests', 'summary'] as const) {
        expect(row[column], column).toMatch(/^ctr1\./);
      }
    }
    expect(clearTextOf(rows)).not.toContain('Ada');
    expect(clearTextOf(rows)).not.toContain('wf-8');
    expect(gw.gateway.sandbox.verification!.requests.filter((r) => r.method === 'POST')).toEqual([]);
  });

  it("a change of the gateway's own configuration between plan and execution gives PLAN_CHANGED, and nothing is sent", async () => {
    const dir = tempDataDir('mcp-requests-');
    const env = {
      DATA_DIR: dir,
      GATEWAY_APPS_FILE: appsFileOf(),
      MCP_MUTATIONS: 'approve',
      MCP_APPROVAL: 'elicitation',
    };
    const before = await startTestGateway({ ...env, PUBLIC_URL: 'https://before.example' });
    let planId: string;
    let hash: string;
    try {
      const c = await mcpClient(before, { key: AGENT_KEY });
      const planned = await c.call('register_verification', {
        input: { workflowId: 'wf-9', applicant: { firstName: 'Grace' } },
      });
      expect(planned.isError, textOf(planned)).toBeFalsy();
      ({ planId, hash } = planned.structuredContent as { planId: string; hash: string });
      await c.close();
    } finally {
      await before.close();
    }
    // Where the verification will call back is part of the request: another PUBLIC_URL is another request.
    const after = await startTestGateway({ ...env, PUBLIC_URL: 'https://after.example' });
    try {
      const c = await mcpClient(after, { key: AGENT_KEY, person: 'accept' });
      const refused = await c.call('execute_plan', { planId });
      expect(refused.structuredContent).toMatchObject({ code: 'PLAN_CHANGED', hash });
      expect(refused.structuredContent!.newHash).not.toBe(hash);
      expect(c.asked).toEqual([]);
      expect(after.gateway.sandbox.verification!.requests.filter((r) => r.method === 'POST')).toEqual([]);
      await c.close();
    } finally {
      await after.close();
    }
  });
});
