// A plan runs once however its trusted document writes its upstream writes' keys (docs/agents.md, "What a plan
// binds", "Running, once"): an execution whose outcome is unknown, approved again (an approval covers one run), runs
// again under the same upstream keys, so the upstream (the sandbox, counted here by the resources it holds) creates
// each resource once.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

import { appsFile, gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';
import { approveAgainAsUnknown, mcpClientsPerTest, textOf, type TestMcpClient } from '../helpers/mcp.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const AGENT_KEY = 'agent-key-0123456789';
const APPROVER_KEY = 'approver-key-0123456789';

const MANIFEST = {
  // A key written as null is no key: the resolver would give each call a new random one.
  'null-key':
    'mutation NullKey($input: CreateProjectInput!) { createProject(input: $input, idempotencyKey: null) { project { id } } }',
  aliased:
    'mutation TwoProjects($input: CreateProjectInput!) { a: createProject(input: $input) { project { id } } ' +
    'b: createProject(input: { name: "second" }) { project { id } } }',
  // Each write's key is a variable: the plan fills each with a key of its own.
  'keyed-variables':
    'mutation TwoKeyedProjects($input: CreateProjectInput!, $k1: UUID, $k2: UUID) { ' +
    'a: createProject(input: $input, idempotencyKey: $k1) { project { id } } ' +
    'b: createProject(input: { name: "third" }, idempotencyKey: $k2) { project { id } } }',
};

async function gateway(): Promise<TestGateway> {
  const apps = appsFile('plans-run-once-', [
    { name: 'agent', scopes: ['cloud:read', 'cloud:write'], key: AGENT_KEY },
    { name: 'approver', scopes: ['cloud:approve'], key: APPROVER_KEY },
  ]);
  const dir = path.dirname(apps);
  const manifest = path.join(dir, 'manifest.json');
  fs.writeFileSync(manifest, JSON.stringify(MANIFEST));
  return start({
    DATA_DIR: dir,
    GATEWAY_APPS_FILE: apps,
    MCP_MUTATIONS: 'approve',
    TRUSTED_DOCUMENTS: 'allow',
    TRUSTED_DOCUMENTS_MANIFEST: manifest,
    UPSTREAM_MAX_RETRIES: '1',
    UPSTREAM_RETRY_BUDGET: '2s',
  });
}

async function approvedPlan(gw: TestGateway, c: TestMcpClient, tool: string, name: string): Promise<string> {
  const planned = await c.call(tool, { input: { name } });
  expect(planned.isError, textOf(planned)).toBeFalsy();
  const planId = planned.structuredContent!.planId as string;
  const approved = await gw.graphql(
    'mutation($id: ID!) { approvePlan(planId: $id) { status } }',
    { id: planId },
    { key: APPROVER_KEY },
  );
  expect(approved.errors).toBeUndefined();
  return planId;
}

describe('a plan runs once under its keys', () => {
  it('a document writing idempotencyKey: null: an unknown outcome run again creates nothing twice', async () => {
    const gw = await gateway();
    const c = await connect(gw, { key: AGENT_KEY });
    const planId = await approvedPlan(gw, c, 'NullKey', 'null-key');
    const cloud = gw.gateway.sandbox.cloud!;
    // The project is created, and each answer is lost: the outcome is unknown.
    cloud.faults.enqueueFor((p, m) => m === 'POST' && p.includes('projects'), 'reset-after', 'reset-after');
    const first = await c.call('execute_plan', { planId });
    expect(first.structuredContent, textOf(first)).toMatchObject({ planId, status: 'UNKNOWN' });
    cloud.faults.clear();
    expect((await c.call('execute_plan', { planId })).structuredContent).toMatchObject({
      planId,
      status: 'UNKNOWN',
      code: 'APPROVAL_REQUIRED',
    });
    await approveAgainAsUnknown(gw, planId);
    const again = await c.call('execute_plan', { planId });
    expect(again.structuredContent, textOf(again)).toMatchObject({ planId, status: 'SUCCEEDED' });
    expect(cloud.projects().filter((p) => p.name === 'null-key')).toHaveLength(1);
  });

  it('two aliased creations in one plan: shown as two, run once each, a repeat replays', async () => {
    const gw = await gateway();
    const c = await connect(gw, { key: AGENT_KEY });
    const planned = await c.call('TwoProjects', { input: { name: 'first' } });
    expect(planned.structuredContent).toMatchObject({ creations: 2 });
    const planId = planned.structuredContent!.planId as string;
    await gw.graphql(
      'mutation($id: ID!) { approvePlan(planId: $id) { status } }',
      { id: planId },
      { key: APPROVER_KEY },
    );
    const cloud = gw.gateway.sandbox.cloud!;
    cloud.faults.enqueueFor((p, m) => m === 'POST' && p.includes('projects'), 'reset-after', 'reset-after');
    const first = await c.call('execute_plan', { planId });
    expect(first.structuredContent, textOf(first)).toMatchObject({ status: 'UNKNOWN' });
    cloud.faults.clear();
    await approveAgainAsUnknown(gw, planId);
    expect((await c.call('execute_plan', { planId })).structuredContent).toMatchObject({ status: 'SUCCEEDED' });
    expect((await c.call('execute_plan', { planId })).structuredContent).toMatchObject({ replayed: true });
    expect(
      cloud
        .projects()
        .map((p) => p.name)
        .sort(),
    ).toEqual(['first', 'second']);
  });

  it('two creations whose keys are variables: each gets a key of its own, each runs once, a repeat replays', async () => {
    const gw = await gateway();
    const c = await connect(gw, { key: AGENT_KEY });
    const planId = await approvedPlan(gw, c, 'TwoKeyedProjects', 'keyed');
    const cloud = gw.gateway.sandbox.cloud!;
    const first = await c.call('execute_plan', { planId });
    expect(first.structuredContent, textOf(first)).toMatchObject({ status: 'SUCCEEDED' });
    expect((await c.call('execute_plan', { planId })).structuredContent).toMatchObject({ replayed: true });
    expect(
      cloud
        .projects()
        .map((p) => p.name)
        .sort(),
    ).toEqual(['keyed', 'third']);
  });
});
