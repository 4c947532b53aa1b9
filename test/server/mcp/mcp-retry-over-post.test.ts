// A creation made through MCP and retried over POST /graphql, and the converse (an agent whose client dropped the
// connection retries with another client): the same key and an equal input replay the first answer with no second
// upstream creation, another input is IDEMPOTENCY_KEY_REUSED, on the creation tools (MCP_MUTATIONS=all) and on an
// executed plan (MCP_MUTATIONS=approve: the plan's key is its id). And the approvers' mutations retried: approvePlan
// again approves the same plan, which runs once; declinePlan again is CONFLICT, and nothing is ever sent.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';

import { upstreamCreations } from '../../helpers/cloud.js';
import { appsFile, gatewaysPerTest, type TestGateway } from '../../helpers/gateway.js';
import { mcpClientsPerTest, textOf, type TestMcpClient } from '../../helpers/mcp.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const AGENT_KEY = 'agent-key-0123456789';
const APPROVER_KEY = 'approver-key-0123456789';

interface Creation {
  tool: string;
  field: string;
  type: string;
  selection: string;
  input: (n: string) => Record<string, unknown>;
  /** The same input written differently. */
  same: (n: string) => Record<string, unknown>;
  other: (n: string) => Record<string, unknown>;
}

const CREATIONS: Creation[] = [
  {
    tool: 'create_project',
    field: 'createProject',
    type: 'CreateProjectInput',
    selection: '{ project { id name } idempotencyKey replayed }',
    input: (n) => ({ name: n }),
    same: (n) => ({ description: '', name: ` ${n} ` }),
    other: (n) => ({ name: `${n}-other` }),
  },
  {
    tool: 'provision_kafka_cluster',
    field: 'provisionKafkaCluster',
    type: 'ProvisionKafkaClusterInput',
    selection: '{ provisioning { id } idempotencyKey replayed }',
    input: (n) => ({
      project: { name: n },
      network: { title: 'net' },
      subnet: { title: 'sub', cidr: '10.63.0.0/24' },
      cluster: { title: 'k', instanceType: 'C2_MEDIUM' },
    }),
    same: (n) => ({
      region: 'MSK',
      cluster: { instanceCount: 3, instanceType: 'C2_MEDIUM', title: 'k ' },
      subnet: { cidr: ' 10.63.0.0/24', title: 'sub' },
      network: { title: 'net' },
      project: { name: n },
    }),
    other: (n) => ({
      project: { name: n },
      network: { title: 'net' },
      subnet: { title: 'sub', cidr: '10.64.0.0/24' },
      cluster: { title: 'k', instanceType: 'C2_MEDIUM' },
    }),
  },
  {
    tool: 'register_verification',
    field: 'registerVerification',
    type: 'RegisterVerificationInput',
    selection: '{ verification { id } idempotencyKey replayed }',
    input: (n) => ({ workflowId: 'wf-kyc', applicant: { lastName: 'Petrova' }, externalId: n }),
    same: (n) => ({ callback: true, externalId: `${n} `, applicant: { lastName: 'Petrova' }, workflowId: 'wf-kyc' }),
    other: (n) => ({ workflowId: 'wf-kyc', applicant: { lastName: 'Ivanova' }, externalId: n }),
  },
];

const post = (gw: TestGateway, c: Creation, input: Record<string, unknown>, key: string) =>
  gw.graphql(
    `mutation($input: ${c.type}!, $key: UUID) { ${c.field}(input: $input, idempotencyKey: $key) ${c.selection} }`,
    { input, key },
    { key: AGENT_KEY },
  );

/** The upstream requests that create something: the cloud's creations and the verification registrations. */
const creations = (gw: TestGateway) =>
  upstreamCreations(gw).length +
  gw.gateway.sandbox.verification!.requests.filter((r) => r.path === '/api/v2/verifications/workflow-instances').length;

/** What a replay must repeat: the resource's id and the key, whatever else each transport selects. */
const shown = (payload: Record<string, any>, c: Creation) => ({
  id: payload[c.selection.split(' ')[1]!].id,
  idempotencyKey: payload.idempotencyKey,
  replayed: payload.replayed,
});

const viaMcp = (c: TestMcpClient, creation: Creation, input: Record<string, unknown>, key: string) =>
  c.call(creation.tool, { input, idempotencyKey: key });

describe('a creation retried between MCP and POST /graphql (MCP_MUTATIONS=all)', () => {
  const env = () => ({
    GATEWAY_APPS_FILE: appsFile('mcp-retry-', [
      { name: 'agent', scopes: ['cloud:read', 'cloud:write', 'identity:read', 'identity:write'], key: AGENT_KEY },
    ]),
    MCP_MUTATIONS: 'all',
    SANDBOX_CALLBACK_DELAY_MS: '600000',
  });

  it.each(CREATIONS.map((c) => ({ c, tool: c.tool })))(
    '$tool first over MCP, then over POST, then over MCP again: replayed, one creation',
    async ({ c }) => {
      const gw = await start(env());
      const mcp = await connect(gw, { key: AGENT_KEY });
      const key = randomUUID();
      const n = `n-${key.slice(0, 8)}`;
      const first = await viaMcp(mcp, c, c.input(n), key);
      expect(first.isError, textOf(first)).toBeFalsy();
      const made = first.structuredContent![c.field];
      expect(made).toMatchObject({ idempotencyKey: key, replayed: false });
      await gw.gateway.services.provisioning.idle();
      const sent = creations(gw);
      const overPost = await post(gw, c, c.same(n), key.toUpperCase());
      expect(overPost.errors, JSON.stringify(overPost.errors)).toBeUndefined();
      expect(shown(overPost.data![c.field], c)).toEqual({ ...shown(made, c), replayed: true });
      const overMcp = await viaMcp(mcp, c, c.same(n), key);
      expect(overMcp.isError, textOf(overMcp)).toBeFalsy();
      expect(shown(overMcp.structuredContent![c.field], c)).toEqual({ ...shown(made, c), replayed: true });
      const reused = await viaMcp(mcp, c, c.other(n), key);
      expect(reused.isError).toBe(true);
      expect(reused.structuredContent?.errors?.[0]?.code, textOf(reused)).toBe('IDEMPOTENCY_KEY_REUSED');
      await gw.gateway.services.provisioning.idle();
      expect(creations(gw)).toBe(sent);
    },
  );

  it.each(CREATIONS.map((c) => ({ c, tool: c.tool })))(
    '$tool first over POST, then over MCP: replayed, one creation',
    async ({ c }) => {
      const gw = await start(env());
      const mcp = await connect(gw, { key: AGENT_KEY });
      const key = randomUUID();
      const n = `n-${key.slice(0, 8)}`;
      const first = await post(gw, c, c.input(n), key);
      expect(first.errors, JSON.stringify(first.errors)).toBeUndefined();
      await gw.gateway.services.provisioning.idle();
      const sent = creations(gw);
      const again = await viaMcp(mcp, c, c.same(n), key);
      expect(again.isError, textOf(again)).toBeFalsy();
      expect(shown(again.structuredContent![c.field], c)).toEqual({
        ...shown(first.data![c.field], c),
        replayed: true,
      });
      await gw.gateway.services.provisioning.idle();
      expect(creations(gw)).toBe(sent);
    },
  );
});

describe('an executed plan retried over POST, and the approvers’ mutations retried (MCP_MUTATIONS=approve)', () => {
  const env = () => ({
    GATEWAY_APPS_FILE: appsFile('mcp-retry-approve-', [
      { name: 'agent', scopes: ['cloud:read', 'cloud:write'], key: AGENT_KEY },
      { name: 'approver', scopes: ['cloud:approve'], key: APPROVER_KEY },
    ]),
    MCP_MUTATIONS: 'approve',
  });
  const APPROVE = 'mutation($id: ID!) { approvePlan(planId: $id) { id status approvedBy hash } }';
  const DECLINE = 'mutation($id: ID!) { declinePlan(planId: $id) { id status declinedBy } }';

  it('approvePlan twice approves the same plan; it runs once, and the app’s retry over POST with its key replays', async () => {
    const gw = await start(env());
    const mcp = await connect(gw, { key: AGENT_KEY });
    const planned = await mcp.call('create_project', { input: { name: 'planned' } });
    const { planId, hash } = planned.structuredContent as { planId: string; hash: string };
    for (let i = 0; i < 2; i++) {
      const approved = await gw.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY });
      expect(approved.data).toEqual({ approvePlan: { id: planId, status: 'APPROVED', approvedBy: 'approver', hash } });
    }
    const executed = await mcp.call('execute_plan', { planId });
    expect(executed.isError, textOf(executed)).toBeFalsy();
    const made = executed.structuredContent!.createProject;
    expect(made).toMatchObject({ idempotencyKey: planId, replayed: false });
    const again = await gw.graphql(
      'mutation($input: CreateProjectInput!, $key: UUID) { createProject(input: $input, idempotencyKey: $key) { project { id name } idempotencyKey replayed } }',
      { input: { name: ' planned' }, key: planId },
      { key: AGENT_KEY },
    );
    expect(again.errors, JSON.stringify(again.errors)).toBeUndefined();
    expect(again.data!.createProject).toMatchObject({ project: { id: made.project.id }, replayed: true });
    // Approving it once more after it ran is refused, and nothing is sent again.
    const late = await gw.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY });
    expect(late.errors?.[0]?.extensions?.code).toBe('CONFLICT');
    const replayed = await mcp.call('execute_plan', { planId });
    expect(replayed.structuredContent).toMatchObject({ status: 'SUCCEEDED', replayed: true });
    expect(upstreamCreations(gw)).toHaveLength(1);
  });

  it('declinePlan twice: the plan stays declined (the repeat is CONFLICT, as documented), and nothing is sent', async () => {
    const gw = await start(env());
    const mcp = await connect(gw, { key: AGENT_KEY });
    const planned = await mcp.call('create_project', { input: { name: 'declined' } });
    const { planId } = planned.structuredContent as { planId: string };
    const declined = await gw.graphql(DECLINE, { id: planId }, { key: APPROVER_KEY });
    expect(declined.data).toEqual({ declinePlan: { id: planId, status: 'DECLINED', declinedBy: 'approver' } });
    const repeated = await gw.graphql(DECLINE, { id: planId }, { key: APPROVER_KEY });
    expect(repeated.errors?.[0]?.extensions?.code).toBe('CONFLICT');
    const approved = await gw.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY });
    expect(approved.errors?.[0]?.extensions?.code).toBe('CONFLICT');
    const executed = await mcp.call('execute_plan', { planId });
    expect(executed.isError).toBe(true);
    expect(textOf(executed)).toMatch(/declined/i);
    expect(upstreamCreations(gw)).toHaveLength(0);
  });
});
