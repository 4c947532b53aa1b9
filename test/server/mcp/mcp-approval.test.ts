// MCP_MUTATIONS=approve (docs/decisions/060): a person approves every creation, the model cannot. A creation tool
// plans; execute_plan runs the plan once, with an approval bound to its hash, app, approver and expiry, from the person
// (an elicitation the client answers) or from another app holding cloud:approve (approvePlan).
import fs from 'node:fs';
import path from 'node:path';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';

import { approvalTab, readPageConfig } from '../../../src/graphiql-app/page-config.js';
import { upstreamCreations } from '../../helpers/cloud.js';
import { appsFile, gatewaysPerTest, startTestGateway, tempDataDir, type TestGateway } from '../../helpers/gateway.js';
import { testClock } from '../../helpers/jwt.js';
import { mcpClient, mcpClientsPerTest, textOf, type TestMcpClient } from '../../helpers/mcp.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const AGENT_KEY = 'agent-key-0123456789';
const APPROVER_KEY = 'approver-key-0123456789';
const OPERATOR_KEY = 'operator-key-0123456789';
const appsFileOf = () =>
  appsFile('mcp-approval-', [
    { name: 'agent', scopes: ['cloud:read', 'cloud:write', 'cloud:approve'], key: AGENT_KEY },
    { name: 'approver', scopes: ['cloud:approve'], key: APPROVER_KEY },
    { name: 'ops', scopes: ['operator'], key: OPERATOR_KEY },
  ]);

async function plan(c: TestMcpClient, name = 'approved-project'): Promise<{ planId: string; hash: string }> {
  const planned = await c.call('create_project', { input: { name } });
  expect(planned.isError).toBeFalsy();
  return planned.structuredContent as { planId: string; hash: string };
}

const APPROVE = 'mutation($id: ID!) { approvePlan(planId: $id) { id status approvedBy hash } }';

describe("approval of agents' creations", () => {
  it('a creation tool plans and sends nothing: plan id, hash, exact requests, creations, rate-limit points and a summary', async () => {
    const gw = await start({ GATEWAY_APPS_FILE: appsFileOf(), MCP_MUTATIONS: 'approve' });
    const c = await connect(gw, { key: AGENT_KEY });
    const planned = await c.call('provision_kafka_cluster', {
      input: {
        project: { name: 'p' },
        network: { title: 'n' },
        subnet: { title: 's', cidr: '10.1.0.0/24' },
        cluster: { title: 'k', instanceCount: 1, instanceType: 'C1_MEDIUM' },
      },
    });
    expect(planned.isError, textOf(planned)).toBeFalsy();
    const s = planned.structuredContent!;
    expect(s).toMatchObject({
      planId: expect.any(String),
      hash: expect.stringMatching(/^[0-9a-f]{64}$/),
      status: 'PENDING',
      creations: 4,
      rateLimitPoints: 4,
    });
    expect(
      s.requests.steps
        .filter((st: { action: string }) => st.action === 'CREATE')
        .map((st: { request: { path: string } }) => st.request.path),
    ).toHaveLength(4);
    expect(s.summary).toMatch(/4 upstream creation/);
    expect(s.approveUrl).toBe(`${gw.url}/approvals?plan=${s.planId}`);
    expect(upstreamCreations(gw)).toEqual([]);
    const tool = (await c.client.listTools()).tools.find((t) => t.name === 'provision_kafka_cluster')!;
    expect(tool.annotations).toMatchObject({ readOnlyHint: true });
    expect(Object.keys(tool.inputSchema.properties!)).not.toContain('idempotencyKey');
  });

  it('plan, then the person accepts the elicitation: one upstream creation, and a retried execute_plan replays it', async () => {
    const gw = await start({ GATEWAY_APPS_FILE: appsFileOf(), MCP_MUTATIONS: 'approve', MCP_APPROVAL: 'elicitation' });
    const c = await connect(gw, { key: AGENT_KEY, person: 'accept' });
    const { planId, hash } = await plan(c);
    const executed = await c.call('execute_plan', { planId });
    expect(executed.isError, textOf(executed)).toBeFalsy();
    expect(c.asked).toHaveLength(1);
    expect(c.asked[0]).toContain(hash);
    expect(executed.structuredContent).toMatchObject({
      planId,
      status: 'SUCCEEDED',
      replayed: false,
      createProject: { idempotencyKey: planId, project: { name: 'approved-project' } },
    });
    expect(upstreamCreations(gw)).toHaveLength(1);
    const again = await c.call('execute_plan', { planId });
    expect(again.structuredContent).toMatchObject({
      planId,
      status: 'SUCCEEDED',
      replayed: true,
      createProject: { project: { id: executed.structuredContent!.createProject.project.id } },
    });
    expect(c.asked).toHaveLength(1);
    expect(upstreamCreations(gw)).toHaveLength(1);
    const audit = await gw.graphql<{ agentAudit: { action: string; actor: string }[] }>(
      'query($id: ID) { agentAudit(planId: $id) { action actor } }',
      { id: planId },
      { key: OPERATOR_KEY },
    );
    expect(audit.data!.agentAudit.map((e) => e.action).reverse()).toEqual([
      'planned',
      'approved',
      'executed',
      'replayed',
    ]);
    expect(audit.data!.agentAudit.find((e) => e.action === 'approved')!.actor).toMatch(/a person through agent/);
    expect(gw.logs()).toMatch(/"agentAudit":\{"planId":"[^"]+","app":"agent","actor":"agent","action":"planned"/);
  });

  it('an outcome the upstream left unknown is reported with the plan id, and executing again creates exactly once', async () => {
    const gw = await start({
      GATEWAY_APPS_FILE: appsFileOf(),
      MCP_MUTATIONS: 'approve',
      MCP_APPROVAL: 'elicitation',
      UPSTREAM_MAX_RETRIES: '1',
      UPSTREAM_RETRY_BUDGET: '2s',
    });
    const c = await connect(gw, { key: AGENT_KEY, person: 'accept' });
    const { planId } = await plan(c, 'flaky');
    gw.gateway.sandbox.cloud!.faults.enqueueFor((p, m) => m === 'POST' && p.includes('projects'), '503', '503', '503');
    const unknown = await c.call('execute_plan', { planId });
    expect(unknown.isError).toBe(true);
    expect(unknown.structuredContent).toMatchObject({ planId, status: 'UNKNOWN' });
    expect(textOf(unknown)).toContain(`execute_plan with planId ${planId} again`);
    gw.gateway.sandbox.cloud!.faults.clear();
    const done = await c.call('execute_plan', { planId });
    expect(done.structuredContent).toMatchObject({
      planId,
      status: 'SUCCEEDED',
      createProject: { project: { name: 'flaky' } },
    });
    expect(upstreamCreations(gw).filter((r) => r.status !== null && r.status < 300)).toHaveLength(1);
    expect(new Set(upstreamCreations(gw).map((r) => r.headers['idempotency-key'])).size).toBe(1);
  });

  it('a person who declines, and a client that cannot elicit: nothing is sent in either case', async () => {
    const gw = await start({ GATEWAY_APPS_FILE: appsFileOf(), MCP_MUTATIONS: 'approve', MCP_APPROVAL: 'elicitation' });
    const declining = await connect(gw, { key: AGENT_KEY, person: 'decline' });
    const first = await plan(declining);
    const declined = await declining.call('execute_plan', { planId: first.planId });
    expect(declined.isError).toBe(true);
    expect(declined.structuredContent).toMatchObject({ code: 'DECLINED', status: 'PENDING' });
    expect(declining.asked).toHaveLength(1);

    for (const era of ['auto', 'legacy'] as const) {
      const mute = await connect(gw, { key: AGENT_KEY, era, person: null });
      const second = await plan(mute);
      const refused = await mute.call('execute_plan', { planId: second.planId });
      expect(refused.isError).toBe(true);
      expect(refused.structuredContent).toMatchObject({
        code: 'APPROVAL_REQUIRED',
        approveUrl: `${gw.url}/approvals?plan=${second.planId}`,
      });
    }
    expect(upstreamCreations(gw)).toEqual([]);
    expect((await gw.graphql('{ projects { id } }', {}, { key: AGENT_KEY })).data).toEqual({ projects: [] });
  });

  it('an app that may call no creation tool sees neither plans nor execute_plan', async () => {
    const gw = await start({ GATEWAY_APPS_FILE: appsFileOf(), MCP_MUTATIONS: 'approve' });
    const names = await (await connect(gw, { key: APPROVER_KEY })).toolNames();
    expect(names).toEqual([]);
    const agent = await (await connect(gw, { key: AGENT_KEY })).toolNames();
    expect(agent).toEqual(expect.arrayContaining(['create_project', 'provision_kafka_cluster', 'execute_plan']));
  });

  it('an argument the model fills is never an approval', async () => {
    const gw = await start({ GATEWAY_APPS_FILE: appsFileOf(), MCP_MUTATIONS: 'approve' });
    const c = await connect(gw, { key: AGENT_KEY });
    const { planId } = await plan(c);
    const forged = await c.call('execute_plan', { planId, approved: true });
    expect(forged.isError).toBe(true);
    expect(textOf(forged)).toMatch(/an approval is never an argument/);
    expect(upstreamCreations(gw)).toEqual([]);
  });

  it("another app with cloud:approve approves with approvePlan; the agent's own approvePlan is refused", async () => {
    const gw = await start({ GATEWAY_APPS_FILE: appsFileOf(), MCP_MUTATIONS: 'approve' });
    const c = await connect(gw, { key: AGENT_KEY });
    const { planId, hash } = await plan(c);
    const own = await gw.graphql(APPROVE, { id: planId }, { key: AGENT_KEY });
    expect(own.errors?.[0]?.message).toMatch(/never approves its own plan/);
    const shown = await gw.graphql<{ agentPlan: { summary: string; status: string } }>(
      'query($id: ID!) { agentPlan(id: $id) { summary status creations } }',
      { id: planId },
      { key: APPROVER_KEY },
    );
    expect(shown.data!.agentPlan).toMatchObject({
      status: 'PENDING',
      summary: expect.stringMatching(/create_project/),
    });
    const approved = await gw.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY });
    expect(approved.data).toEqual({ approvePlan: { id: planId, status: 'APPROVED', approvedBy: 'approver', hash } });
    const executed = await c.call('execute_plan', { planId });
    expect(executed.isError, textOf(executed)).toBeFalsy();
    expect(upstreamCreations(gw)).toHaveLength(1);
  });

  it('the approve link opens the approvals page; GraphiQL opens the plan to read and its approval to run', async () => {
    const gw = await start({ GATEWAY_APPS_FILE: appsFileOf(), MCP_MUTATIONS: 'approve' });
    const c = await connect(gw, { key: AGENT_KEY });
    const planned = await c.call('create_project', { input: { name: 'linked' } });
    const approvals = await request(planned.structuredContent!.approveUrl as string, {
      headers: { accept: 'text/html' },
    });
    expect(approvals.statusCode).toBe(200);
    expect(await approvals.body.text()).toMatch(/<html/i);
    const link = `${gw.url}/graphql?approvePlan=${planned.structuredContent!.planId}`;
    const page = await request(link, { headers: { accept: 'text/html' } });
    expect(page.statusCode).toBe(200);
    expect(await page.body.text()).toMatch(/<html/i);
    const tab = approvalTab(new URL(link).search, readPageConfig({ apiKeyRequired: true }))!;
    const variables = JSON.parse(tab.variables!) as Record<string, unknown>;
    const run = (operationName: string) =>
      request(`${gw.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${APPROVER_KEY}` },
        body: JSON.stringify({ query: tab.query, variables, operationName }),
      }).then((r) => r.body.json() as Promise<{ data: Record<string, any>; errors?: Array<Record<string, any>> }>);
    expect((await run('Plan')).data.agentPlan).toMatchObject({
      id: planned.structuredContent!.planId,
      status: 'PENDING',
      creations: 1,
    });
    expect((await run('Approve')).data.approvePlan).toMatchObject({ status: 'APPROVED', approvedBy: 'approver' });
    // The tab approves the plan as the person read it, PENDING: run again, it approves nothing more.
    const again = await run('Approve');
    expect(again.errors?.[0]).toMatchObject({ extensions: { code: 'CONFLICT' } });
    expect(again.errors?.[0]!.message).toMatch(/not PENDING as shown/);
  });

  it('an approved provisioning plan starts the provisioning with the plan id as its idempotency key', async () => {
    const gw = await start({ GATEWAY_APPS_FILE: appsFileOf(), MCP_MUTATIONS: 'approve' });
    const c = await connect(gw, { key: AGENT_KEY });
    const planned = await c.call('provision_virtual_machine', {
      input: {
        project: { name: 'vm-p' },
        network: { title: 'vm-n' },
        subnet: { title: 'vm-s', cidr: '10.2.0.0/24' },
        ipAddress: { title: 'vm-ip' },
        virtualMachine: {
          title: 'vm',
          platform: 'COMPUTE_V2',
          instanceType: 'C1_SMALL',
          bootDisk: { sizeGb: 20, diskType: 'SSD_BASIC', image: 'DEBIAN_11' },
          users: [{ name: 'ops', password: 'Sup3r-secret-pw' }],
        },
      },
    });
    expect(planned.isError, textOf(planned)).toBeFalsy();
    const { planId, creations: plannedCreations } = planned.structuredContent as { planId: string; creations: number };
    expect(plannedCreations).toBe(5);
    expect(JSON.stringify(planned.structuredContent)).not.toContain('Sup3r-secret-pw');
    expect((await gw.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY })).data).toMatchObject({
      approvePlan: { status: 'APPROVED' },
    });
    const executed = await c.call('execute_plan', { planId });
    expect(executed.isError, textOf(executed)).toBeFalsy();
    expect(executed.structuredContent).toMatchObject({
      status: 'SUCCEEDED',
      provisionVirtualMachine: { idempotencyKey: planId, replayed: false },
    });
    await gw.gateway.services.provisioning.idle();
    expect(upstreamCreations(gw)).toHaveLength(5);
    expect(gw.logs()).not.toContain('Sup3r-secret-pw');
  });

  it('an approval expires after MCP_APPROVAL_TTL: the plan then needs approving again, and nothing is sent before', async () => {
    const clock = testClock();
    const gw = await startTestGateway(
      { GATEWAY_APPS_FILE: appsFileOf(), MCP_MUTATIONS: 'approve', MCP_APPROVAL_TTL: '10m' },
      { testing: { clock: clock.now } },
    );
    try {
      const c = await mcpClient(gw, { key: AGENT_KEY });
      const { planId } = await plan(c);
      expect((await gw.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY })).data).toMatchObject({
        approvePlan: { status: 'APPROVED' },
      });
      clock.advance(10 * 60_000 + 1);
      const expired = await c.call('execute_plan', { planId });
      expect(expired.structuredContent).toMatchObject({ code: 'APPROVAL_REQUIRED' });
      expect(upstreamCreations(gw)).toEqual([]);
      expect((await gw.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY })).data).toMatchObject({
        approvePlan: { status: 'APPROVED' },
      });
      expect((await c.call('execute_plan', { planId })).structuredContent).toMatchObject({ status: 'SUCCEEDED' });
      expect(upstreamCreations(gw)).toHaveLength(1);
      await c.close();
    } finally {
      await gw.close();
    }
  });

  it('approvePlan needs cloud:approve, which keys of GATEWAY_API_KEYS do not hold', async () => {
    const gw = await start({ GATEWAY_API_KEYS: 'agent:k1,other:k2', MCP_MUTATIONS: 'approve' });
    const c = await connect(gw, { key: 'k1' });
    const { planId } = await plan(c);
    const refused = await gw.graphql(APPROVE, { id: planId }, { key: 'k2' });
    expect(refused.errors?.[0]?.extensions).toMatchObject({ code: 'FORBIDDEN', scope: 'cloud:approve' });
  });

  it('a plan whose operation changed since it was approved is refused with the new hash, and nothing is sent', async () => {
    const dir = tempDataDir('mcp-changed-');
    const manifest = path.join(dir, 'manifest.json');
    const write = (selection: string) =>
      fs.writeFileSync(
        manifest,
        JSON.stringify({
          'make-project': `mutation MakeProject($input: CreateProjectInput!, $idempotencyKey: UUID) { createProject(input: $input, idempotencyKey: $idempotencyKey) { ${selection} } }`,
        }),
      );
    write('project { id }');
    const env = {
      DATA_DIR: dir,
      GATEWAY_APPS_FILE: appsFileOf(),
      MCP_MUTATIONS: 'approve',
      MCP_APPROVAL: 'elicitation',
      TRUSTED_DOCUMENTS: 'allow',
      TRUSTED_DOCUMENTS_MANIFEST: manifest,
    };
    const before = await startTestGateway(env);
    let planId: string;
    let hash: string;
    try {
      const c = await mcpClient(before, { key: AGENT_KEY });
      const planned = await c.call('MakeProject', { input: { name: 'changing' } });
      expect(planned.isError, textOf(planned)).toBeFalsy();
      ({ planId, hash } = planned.structuredContent as { planId: string; hash: string });
      expect((await before.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY })).data).toMatchObject({
        approvePlan: { status: 'APPROVED' },
      });
      await c.close();
    } finally {
      await before.close();
    }
    // The operator ships a new manifest: the operation the plan runs is another document now.
    write('project { id name } replayed');
    const after = await startTestGateway(env);
    try {
      const c = await mcpClient(after, { key: AGENT_KEY, person: 'accept' });
      const refused = await c.call('execute_plan', { planId });
      expect(refused.isError).toBe(true);
      expect(refused.structuredContent).toMatchObject({
        code: 'PLAN_CHANGED',
        hash,
        newHash: expect.stringMatching(/^[0-9a-f]{64}$/),
      });
      expect(refused.structuredContent!.newHash).not.toBe(hash);
      expect(c.asked).toEqual([]);
      expect(upstreamCreations(after)).toEqual([]);
      await c.close();
    } finally {
      await after.close();
    }
  });

  it("another app's plan reads as one that does not exist", async () => {
    const gw = await start({
      GATEWAY_API_KEYS: 'agent:k1,rival:k2',
      MCP_MUTATIONS: 'approve',
      MCP_APPROVAL: 'elicitation',
    });
    const { planId } = await plan(await connect(gw, { key: 'k1' }));
    const rival = await connect(gw, { key: 'k2', person: 'accept' });
    const refused = await rival.call('execute_plan', { planId });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toBe(`no plan ${planId} of this app; nothing was sent`);
    expect(rival.asked).toEqual([]);
    expect(upstreamCreations(gw)).toEqual([]);
  });

  it('MCP_MUTATIONS=all lets creation tools run at once, and says so at start-up', async () => {
    const gw = await start({ GATEWAY_API_KEYS: 'agent:k1', MCP_MUTATIONS: 'all' });
    expect(gw.logs()).toMatch(/MCP_MUTATIONS is all/);
    const c = await connect(gw, { key: 'k1' });
    const created = await c.call('create_project', { input: { name: 'direct' } });
    expect(created.structuredContent).toMatchObject({
      createProject: { project: { name: 'direct' }, replayed: false },
    });
    expect(upstreamCreations(gw)).toHaveLength(1);
  });
});
