// The tools of the trusted documents are those of the manifest in force (docs/agents.md): a reload (POST /admin/reload
// or SIGHUP) that changes, adds or removes a document changes tools/list, and a plan made after it runs the text in
// force. A plan made before the reload of a document it changed is still refused: it runs only the text it was made
// from. Over real HTTP, against the sandbox upstream.
import { describe, expect, it } from 'vitest';

import { upstreamCreations } from '../../helpers/cloud.js';
import { appsFile, gatewaysPerTest, type TestGateway } from '../../helpers/gateway.js';
import {
  AGENT_KEY,
  APPROVER_KEY,
  manifestBeside,
  mcpClientsPerTest,
  OPERATOR_KEY,
  reloadAsOperator as reload,
  textOf,
  type TestMcpClient,
} from '../../helpers/mcp.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const BEFORE = 'mutation MakeProject($input: CreateProjectInput!) { createProject(input: $input) { project { id } } }';
// The same operation, taking a name alone: its input schema differs, and so does the text a plan runs.
const AFTER =
  'mutation MakeProject($name: String!) { createProject(input: { name: $name, description: "reloaded" }) { project { id name } } }';
const PLATFORMS = 'query Platforms { catalog { platforms { name } } }';
const PLATFORM_NAMES = 'query PlatformNames { catalog { platforms { name } } }';

async function approve(gw: TestGateway, planId: string): Promise<void> {
  const approved = await gw.graphql(
    'mutation($id: ID!) { approvePlan(planId: $id) { status } }',
    { id: planId },
    { key: APPROVER_KEY },
  );
  expect(approved.data).toEqual({ approvePlan: { status: 'APPROVED' } });
}

async function plan(c: TestMcpClient, args: Record<string, unknown>): Promise<{ planId: string; hash: string }> {
  const planned = await c.call('MakeProject', args);
  expect(planned.isError, textOf(planned)).toBeFalsy();
  return planned.structuredContent as { planId: string; hash: string };
}

describe('the tools of the trusted documents after a reload', () => {
  it('list and plan the manifest in force: a plan made after the reload runs, one made before it is refused', async () => {
    const apps = appsFile('mcp-reload-tools-', [
      { name: 'agent', scopes: ['cloud:read', 'cloud:write'], key: AGENT_KEY },
      { name: 'approver', scopes: ['cloud:approve'], key: APPROVER_KEY },
      { name: 'ops', scopes: ['operator'], key: OPERATOR_KEY },
    ]);
    const manifest = manifestBeside(apps, { 'make-project': BEFORE, platforms: PLATFORMS });
    const gw = await start({ ...manifest.env, MCP_MUTATIONS: 'approve' });
    const c = await connect(gw, { key: AGENT_KEY });
    const before = await plan(c, { input: { name: 'before' } });
    await approve(gw, before.planId);

    // One document changed, one left, one came.
    manifest.write({ 'make-project': AFTER, 'platform-names': PLATFORM_NAMES });
    await reload(gw);

    const { tools } = await c.client.listTools();
    const names = tools.map((t) => t.name);
    expect(names).toContain('PlatformNames');
    expect(names).not.toContain('Platforms');
    const makeProject = tools.find((t) => t.name === 'MakeProject')!;
    expect(Object.keys(makeProject.inputSchema.properties ?? {})).toEqual(['name']);
    const read = await c.call('PlatformNames');
    expect(read.isError, textOf(read)).toBeFalsy();

    // Made before the reload, of a text no longer in force: refused, nothing sent.
    const stale = await c.call('execute_plan', { planId: before.planId });
    expect(stale.isError).toBe(true);
    expect(stale.structuredContent).toMatchObject({ code: 'PLAN_CHANGED', hash: before.hash });

    // Made after it: it plans the text in force, and runs once approved.
    const after = await plan(c, { name: 'after' });
    await approve(gw, after.planId);
    const ran = await c.call('execute_plan', { planId: after.planId });
    expect(ran.isError, textOf(ran)).toBeFalsy();
    expect(ran.structuredContent).toMatchObject({ status: 'SUCCEEDED', createProject: { project: { name: 'after' } } });
    expect(upstreamCreations(gw)).toHaveLength(1);
  });

  it('plan a document whose text alone a reload changed (the same input) from the text in force, and run it', async () => {
    const apps = appsFile('mcp-reload-text-', [
      { name: 'agent', scopes: ['cloud:read', 'cloud:write'], key: AGENT_KEY },
      { name: 'approver', scopes: ['cloud:approve'], key: APPROVER_KEY },
      { name: 'ops', scopes: ['operator'], key: OPERATOR_KEY },
    ]);
    const manifest = manifestBeside(apps, { 'make-project': BEFORE });
    const gw = await start({ ...manifest.env, MCP_MUTATIONS: 'approve' });
    manifest.write({ 'make-project': BEFORE.replace('project { id }', 'project { id name }') });
    await reload(gw);
    const c = await connect(gw, { key: AGENT_KEY });
    const made = await plan(c, { input: { name: 'same input' } });
    await approve(gw, made.planId);
    const ran = await c.call('execute_plan', { planId: made.planId });
    expect(ran.isError, textOf(ran)).toBeFalsy();
    expect(ran.structuredContent).toMatchObject({
      status: 'SUCCEEDED',
      createProject: { project: { name: 'same input' } },
    });
    expect(upstreamCreations(gw)).toHaveLength(1);
  });

  it("are after a reload, an unchanged document's reused, what a gateway started on that manifest lists", async () => {
    // The tools of a document whose text a reload left as it was are reused, not made again: they must be what the
    // same text makes, beside a document the reload changed and one it added.
    const apps = appsFile('mcp-reload-reuse-', [
      { name: 'agent', scopes: ['cloud:read', 'cloud:write'], key: AGENT_KEY },
      { name: 'ops', scopes: ['operator'], key: OPERATOR_KEY },
    ]);
    const manifest = manifestBeside(apps, { 'make-project': BEFORE, platforms: PLATFORMS });
    const reloaded = await start({ ...manifest.env, MCP_MUTATIONS: 'approve' });
    const after = { 'make-project': AFTER, platforms: PLATFORMS, 'platform-names': PLATFORM_NAMES };
    manifest.write(after);
    await reload(reloaded);
    const fresh = await start({
      ...manifestBeside(
        appsFile('mcp-reload-fresh-', [{ name: 'agent', scopes: ['cloud:read', 'cloud:write'], key: AGENT_KEY }]),
        after,
      ).env,
      MCP_MUTATIONS: 'approve',
    });
    const listed = async (gw: TestGateway) =>
      (await (await connect(gw, { key: AGENT_KEY })).client.listTools()).tools.sort((a, b) =>
        a.name.localeCompare(b.name),
      );
    const tools = await listed(reloaded);
    expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(['MakeProject', 'Platforms', 'PlatformNames']));
    expect(tools).toEqual(await listed(fresh));
  });
});
