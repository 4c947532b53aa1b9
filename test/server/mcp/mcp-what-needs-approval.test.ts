// What needs a person under MCP_MUTATIONS=approve is decided by what an operation's root fields do (src/agents/writes.ts),
// never by a variable's name: a creation whose document has no `$idempotencyKey`, names it otherwise, or hard-codes
// it is planned like any other, and runs only once approved, exactly once.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

import { upstreamCreations } from '../../helpers/cloud.js';
import { appsFile, gatewaysPerTest } from '../../helpers/gateway.js';
import { mcpClientsPerTest, textOf } from '../../helpers/mcp.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const AGENT_KEY = 'agent-key-0123456789';
const APPROVER_KEY = 'approver-key-0123456789';

const DOCUMENTS = {
  'new-project': 'mutation NewProject($input: CreateProjectInput!) { createProject(input: $input) { project { id } } }',
  'new-identification':
    'mutation NewIdentification($input: CreateIdentificationInput!) { createIdentification(input: $input) { identification { id } } }',
  'keyed-as-key':
    'mutation KeyedAsKey($input: CreateProjectInput!, $key: UUID) { createProject(input: $input, idempotencyKey: $key) { project { id } } }',
  'hard-coded':
    'mutation HardCoded($input: CreateProjectInput!) { createProject(input: $input, idempotencyKey: "6f1c2a9e-7d3b-4c5a-8e9f-0a1b2c3d4e5f") { project { id } } }',
  'two-projects':
    'mutation TwoProjects { a: createProject(input: { name: "a" }) { project { id } } b: createProject(input: { name: "b" }) { project { id } } }',
  'approve-plan': 'mutation ApproveIt($id: ID!) { approvePlan(planId: $id) { id } }',
  'fragment-root':
    'mutation FragmentRoot($input: CreateProjectInput!) { ...P } fragment P on Mutation { createProject(input: $input) { project { id } } }',
  token: 'mutation Token { issueMobileIdNotificationToken(ttlSeconds: 60) { token } }',
};

function setup(mutations: 'approve' | 'all') {
  const apps = appsFile('mcp-kinds-', [
    {
      name: 'agent',
      scopes: ['cloud:read', 'cloud:write', 'identity:read', 'identity:write', 'mobile-id:write'],
      key: AGENT_KEY,
    },
    { name: 'approver', scopes: ['cloud:approve'], key: APPROVER_KEY },
  ]);
  // The apps file's fresh directory is the data directory, and holds the manifest too.
  const dir = path.dirname(apps);
  const manifest = path.join(dir, 'manifest.json');
  fs.writeFileSync(manifest, JSON.stringify(DOCUMENTS));
  return {
    DATA_DIR: dir,
    GATEWAY_APPS_FILE: apps,
    MCP_MUTATIONS: mutations,
    MCP_APPROVAL: 'elicitation',
    TRUSTED_DOCUMENTS: 'allow',
    TRUSTED_DOCUMENTS_MANIFEST: manifest,
  };
}

const APPROVE = 'mutation($id: ID!) { approvePlan(planId: $id) { status } }';

describe('what needs an approval is what the operation does', () => {
  it('a creation whose document has no $idempotencyKey is planned, sends nothing, and runs once approved with the plan key', async () => {
    const gw = await start(setup('approve'));
    const c = await connect(gw, { key: AGENT_KEY });
    const tool = (await c.client.listTools()).tools.find((t) => t.name === 'NewProject')!;
    expect(tool.annotations).toMatchObject({ destructiveHint: true });
    const planned = await c.call('NewProject', { input: { name: 'unkeyed' } });
    expect(planned.isError, textOf(planned)).toBeFalsy();
    const { planId } = planned.structuredContent as { planId: string };
    expect(planned.structuredContent).toMatchObject({ status: 'PENDING', creations: 1 });
    expect(upstreamCreations(gw)).toEqual([]);

    const early = await c.call('execute_plan', { planId });
    expect(early.structuredContent).toMatchObject({ code: 'APPROVAL_REQUIRED' });
    expect(upstreamCreations(gw)).toEqual([]);

    expect((await gw.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY })).data).toEqual({
      approvePlan: { status: 'APPROVED' },
    });
    const executed = await c.call('execute_plan', { planId });
    expect(executed.isError, textOf(executed)).toBeFalsy();
    expect(upstreamCreations(gw)).toHaveLength(1);
    const again = await c.call('execute_plan', { planId });
    expect(again.structuredContent).toMatchObject({ status: 'SUCCEEDED', replayed: true });
    expect(upstreamCreations(gw)).toHaveLength(1);
    // The upstream key derives from the plan id (the key a document with $idempotencyKey would have been given).
    const keyed = await gw.graphql<{ createProject: { upstreamIdempotencyKey: string; replayed: boolean } }>(
      'mutation($k: UUID) { createProject(input: { name: "unkeyed" }, idempotencyKey: $k) { upstreamIdempotencyKey replayed } }',
      { k: planId },
      { key: AGENT_KEY },
    );
    expect(keyed.data!.createProject.replayed).toBe(true);
    expect(upstreamCreations(gw)[0]!.headers['idempotency-key']).toBe(keyed.data!.createProject.upstreamIdempotencyKey);
  });

  it('an identification without a key, a key named $key and a hard-coded key are all planned, and nothing is sent', async () => {
    const gw = await start(setup('approve'));
    const c = await connect(gw, { key: AGENT_KEY });
    const listed = (await c.client.listTools()).tools;
    const keyedAs = listed.find((t) => t.name === 'KeyedAsKey')!;
    expect(Object.keys(keyedAs.inputSchema.properties!)).toEqual(['input']);
    expect(listed.find((t) => t.name === 'NewIdentification')!.annotations).toMatchObject({ destructiveHint: true });

    const identification = await c.call('NewIdentification', { input: { workflowId: 'wf-1' } });
    expect(identification.isError, textOf(identification)).toBeFalsy();
    expect(identification.structuredContent).toMatchObject({ status: 'PENDING' });
    expect(gw.gateway.sandbox.identification!.requests).toEqual([]);

    const forged = await c.call('KeyedAsKey', { input: { name: 'k' }, key: '0b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e' });
    expect(forged.isError).toBe(true);
    expect(textOf(forged)).toMatch(/a plan derives its idempotency key from its id/);
    for (const name of ['KeyedAsKey', 'HardCoded', 'TwoProjects']) {
      const planned = await c.call(name, name === 'TwoProjects' ? {} : { input: { name } });
      expect(planned.isError, textOf(planned)).toBeFalsy();
      expect(planned.structuredContent).toMatchObject({ status: 'PENDING' });
    }
    expect(upstreamCreations(gw)).toEqual([]);
  });

  it('two creations in one document run once each when approved, each with a key of its own', async () => {
    const gw = await start(setup('approve'));
    const c = await connect(gw, { key: AGENT_KEY, person: 'accept' });
    const planned = await c.call('TwoProjects', {});
    expect(planned.structuredContent).toMatchObject({ creations: 2, rateLimitPoints: 2 });
    const { planId } = planned.structuredContent as { planId: string };
    const executed = await c.call('execute_plan', { planId });
    expect(executed.isError, textOf(executed)).toBeFalsy();
    expect(upstreamCreations(gw)).toHaveLength(2);
    expect(new Set(upstreamCreations(gw).map((r) => r.headers['idempotency-key'])).size).toBe(2);
    await c.call('execute_plan', { planId });
    expect(upstreamCreations(gw)).toHaveLength(2);
  });

  it('a mutation that cannot be planned is not offered under approve, and the start-up log names it; a harmless write runs at once', async () => {
    const gw = await start(setup('approve'));
    const names = await (await connect(gw, { key: AGENT_KEY })).toolNames();
    expect(names).not.toContain('ApproveIt');
    expect(names).not.toContain('FragmentRoot');
    expect(gw.logs()).toMatch(/cannot be planned/);
    expect(gw.logs()).toMatch(/ApproveIt \(approvePlan has no dry run\)/);
    expect(gw.logs()).toMatch(/FragmentRoot \(a fragment among its root fields\)/);
    const c = await connect(gw, { key: AGENT_KEY });
    const token = await c.call('Token', {});
    expect(token.isError, textOf(token)).toBeFalsy();
    expect(token.structuredContent).toMatchObject({ issueMobileIdNotificationToken: { token: expect.any(String) } });
    const tool = (await c.client.listTools()).tools.find((t) => t.name === 'Token')!;
    expect(tool.annotations).toMatchObject({ destructiveHint: false });
  });

  it('under MCP_MUTATIONS=all every mutation that calls an upstream is annotated destructive, whatever its variables', async () => {
    const gw = await start(setup('all'));
    const tools = (await (await connect(gw, { key: AGENT_KEY })).client.listTools()).tools;
    for (const name of [
      'NewProject',
      'NewIdentification',
      'KeyedAsKey',
      'HardCoded',
      'create_project',
      'create_identification',
    ])
      expect(tools.find((t) => t.name === name)?.annotations, name).toMatchObject({ destructiveHint: true });
    expect(tools.find((t) => t.name === 'issue_mobile_id_notification_token')!.annotations).toMatchObject({
      destructiveHint: false,
    });
  });
});
