// Under TRUSTED_DOCUMENTS=enforce the gateway's own approval pages still work (docs/graphql-api.md, Trusted
// documents; docs/agents.md, The approvals page): the exact texts the approvals page sends (its live list over
// graphql-ws, its read, approval and decline over HTTP POST) and GraphiQL's approval tab are admitted beside the
// manifest's documents, so an agent's plan, made over MCP, is approved by an approver and runs once. Any other free
// text is still refused, a page text changed by a single character too, and the page's texts reach only what the
// caller's scopes let them reach.
import { createClient as createSseClient } from 'graphql-sse';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';

import { approvalTab, readPageConfig } from '../../src/graphiql-app/page-config.js';
import { APPROVALS_PAGE_DOCUMENTS as PAGE } from '../../src/server/approval-documents.js';
import { upstreamCreations } from '../helpers/cloud.js';
import { appsFile, gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';
import { manifestBeside, mcpClientsPerTest, textOf, type TestMcpClient } from '../helpers/mcp.js';
import { collect, wsClient } from '../helpers/mobile-id.js';
import { waitFor } from '../helpers/wait.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const AGENT_KEY = 'agent-key-0123456789';
const APPROVER_KEY = 'approver-key-0123456789';

// The operator's manifest: the agent's one creation, which MCP offers as a tool that plans.
const MANIFEST = {
  'create-project':
    'mutation CreateProject($input: CreateProjectInput!) { createProject(input: $input) { project { id } } }',
};

async function enforced(): Promise<TestGateway> {
  const apps = appsFile('approvals-enforce-', [
    { name: 'agent', scopes: ['cloud:read', 'cloud:write'], key: AGENT_KEY },
    { name: 'finance', scopes: ['cloud:approve'], key: APPROVER_KEY },
  ]);
  const { env } = manifestBeside(apps, MANIFEST);
  return start({ ...env, TRUSTED_DOCUMENTS: 'enforce', MCP_MUTATIONS: 'approve' });
}

async function plan(c: TestMcpClient, name: string): Promise<string> {
  const planned = await c.call('CreateProject', { input: { name } });
  expect(planned.isError, textOf(planned)).toBeFalsy();
  return planned.structuredContent!.planId as string;
}

const codes = (body: { errors?: readonly { extensions?: Record<string, unknown> }[] }) =>
  (body.errors ?? []).map((e) => e.extensions?.code);

describe('TRUSTED_DOCUMENTS=enforce: the approvals page and GraphiQL approval tab still approve', () => {
  it("the page's live list (graphql-ws) shows the plan, its approvePlan (HTTP) approves it, it runs once", async () => {
    const gw = await enforced();
    // The texts are those the page's script sends, as it is served.
    const script = await (await request(`${gw.url}/approvals/app.js`)).body.text();
    for (const text of Object.values(PAGE)) expect(script).toContain(JSON.stringify(text));

    const live = collect(wsClient(gw, { key: APPROVER_KEY }), PAGE.pending, {});
    try {
      await waitFor(() => live.results.length > 0 || live.errors.length > 0, 20_000, 'the first list');
      expect(live.errors).toEqual([]);
      expect(live.results[0]).toEqual({ data: { pendingAgentPlansChanged: [] } });

      const agent = await connect(gw, { key: AGENT_KEY });
      const planId = await plan(agent, 'approved-under-enforce');
      const listed = await waitFor(
        () => live.results.at(-1)?.data?.pendingAgentPlansChanged?.find((p: { id: string }) => p.id === planId),
        20_000,
        'the plan in the live list',
      );
      expect(listed).toMatchObject({ app: 'agent', tool: 'CreateProject', status: 'PENDING', creations: 1 });

      // The plan the page's link opens, read as the page reads it.
      const read = await gw.graphql(PAGE.plan, { id: planId }, { key: APPROVER_KEY });
      expect(read.errors).toBeUndefined();
      expect(read.data!.agentPlan).toMatchObject({ id: planId, status: 'PENDING', hash: listed.hash });

      const approved = await gw.graphql(PAGE.approve, { id: planId, status: 'PENDING' }, { key: APPROVER_KEY });
      expect(approved.errors).toBeUndefined();
      expect(approved.data).toEqual({ plan: { id: planId, status: 'APPROVED' } });
      await waitFor(
        () => live.results.at(-1)?.data?.pendingAgentPlansChanged?.length === 0,
        20_000,
        'the approved plan gone from the live list',
      );

      const executed = await agent.call('execute_plan', { planId });
      expect(executed.isError, textOf(executed)).toBeFalsy();
      expect(executed.structuredContent).toMatchObject({ planId, status: 'SUCCEEDED', replayed: false });
      const again = await agent.call('execute_plan', { planId });
      expect(again.structuredContent).toMatchObject({ planId, status: 'SUCCEEDED', replayed: true });
      expect(upstreamCreations(gw)).toHaveLength(1);
      expect(live.errors).toEqual([]);
    } finally {
      live.stop();
    }
  });

  it("the page's declinePlan, and the live list over graphql-sse, are admitted too", async () => {
    const gw = await enforced();
    const agent = await connect(gw, { key: AGENT_KEY });
    const planId = await plan(agent, 'declined-under-enforce');

    const sse = createSseClient({
      url: `${gw.url}/graphql/stream`,
      headers: { authorization: `Bearer ${APPROVER_KEY}` },
      retryAttempts: 0,
    });
    const live = collect(sse, PAGE.pending, {});
    try {
      const first = await waitFor(() => live.results[0] ?? live.errors[0], 20_000, 'the list over SSE');
      expect(live.errors).toEqual([]);
      expect(first.errors).toBeUndefined();
      expect(first.data.pendingAgentPlansChanged.map((p: { id: string }) => p.id)).toEqual([planId]);
    } finally {
      live.stop();
      sse.dispose();
    }

    const declined = await gw.graphql(PAGE.decline, { id: planId }, { key: APPROVER_KEY });
    expect(declined.errors).toBeUndefined();
    expect(declined.data).toEqual({ plan: { id: planId, status: 'DECLINED' } });
    const executed = await agent.call('execute_plan', { planId });
    expect(executed.structuredContent, textOf(executed)).toMatchObject({ code: 'DECLINED' });
    expect(upstreamCreations(gw)).toEqual([]);
  });

  it("GraphiQL's approval tab reads and approves the plan as it is sent, whole", async () => {
    const gw = await enforced();
    const agent = await connect(gw, { key: AGENT_KEY });
    const planId = await plan(agent, 'approved-in-graphiql');
    const tab = approvalTab(`?approvePlan=${planId}`, readPageConfig({ apiKeyRequired: true }))!;
    const run = (operationName: string) =>
      request(`${gw.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${APPROVER_KEY}` },
        body: JSON.stringify({ query: tab.query, variables: JSON.parse(tab.variables!), operationName }),
      }).then((r) => r.body.json() as Promise<{ data?: Record<string, any>; errors?: { extensions?: any }[] }>);
    const read = await run('Plan');
    expect(read.errors).toBeUndefined();
    expect(read.data!.agentPlan).toMatchObject({ id: planId, status: 'PENDING' });
    const approved = await run('Approve');
    expect(approved.errors).toBeUndefined();
    expect(approved.data!.approvePlan).toMatchObject({ status: 'APPROVED', approvedBy: 'finance' });
    expect((await agent.call('execute_plan', { planId })).structuredContent).toMatchObject({ status: 'SUCCEEDED' });
    expect(upstreamCreations(gw)).toHaveLength(1);
  });

  it('refuses any other free text, a page text changed by a character too; the scopes still decide', async () => {
    const gw = await enforced();
    const agent = await connect(gw, { key: AGENT_KEY });
    const planId = await plan(agent, 'refused-under-enforce');
    const refused = [
      'mutation Approve($id: ID!) { approvePlan(planId: $id) { status } }',
      `${PAGE.approve} `,
      PAGE.approve.replace('{ id status }', '{ id status approvedBy }'),
    ];
    for (const text of refused) {
      const answer = await gw.graphql(text, { id: planId, status: 'PENDING' }, { key: APPROVER_KEY });
      expect(codes(answer), text).toEqual(['PERSISTED_QUERY_NOT_FOUND']);
      expect(answer.errors![0]!.message).toMatch(/trusted documents only/);
    }
    const ws = collect(wsClient(gw, { key: APPROVER_KEY }), PAGE.pending.replace('requests', ''), {});
    await ws.done;
    expect((ws.errors[0] as { extensions: { code: string } }[]).map((e) => e.extensions.code)).toEqual([
      'PERSISTED_QUERY_NOT_FOUND',
    ]);

    // The page's own text is admitted, and its resolver still asks for an approve scope: the agent holds none.
    const byAgent = await gw.graphql(PAGE.approve, { id: planId, status: 'PENDING' }, { key: AGENT_KEY });
    expect(codes(byAgent)).toEqual(['FORBIDDEN']);

    const read = await gw.graphql(PAGE.plan, { id: planId }, { key: APPROVER_KEY });
    expect(read.data!.agentPlan).toMatchObject({ status: 'PENDING' });
    const executed = await agent.call('execute_plan', { planId });
    expect(executed.structuredContent, textOf(executed)).toMatchObject({ code: 'APPROVAL_REQUIRED' });
    expect(upstreamCreations(gw)).toEqual([]);
  });
});
