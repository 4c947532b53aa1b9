// An approval binds the text that runs (docs/decisions/060): a plan stores the exact document and variables it was
// made from, execute_plan runs that text (never a trusted document's id resolved again), and a plan whose document or
// requests would differ now is refused with PLAN_CHANGED and its new hash.
import fs from 'node:fs';
import path from 'node:path';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';

import { upstreamCreations } from '../../helpers/cloud.js';
import { appsFile, gatewaysPerTest, type TestGateway } from '../../helpers/gateway.js';
import { mcpClientsPerTest, textOf, type TestMcpClient } from '../../helpers/mcp.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();

const AGENT_KEY = 'agent-key-0123456789';
const APPROVER_KEY = 'approver-key-0123456789';
const OPERATOR_KEY = 'operator-key-0123456789';

const ONE =
  'mutation MakeProject($input: CreateProjectInput!, $idempotencyKey: UUID) { createProject(input: $input, idempotencyKey: $idempotencyKey) { project { id } } }';
const TWO =
  'mutation MakeProject($input: CreateProjectInput!, $idempotencyKey: UUID) { createProject(input: $input, idempotencyKey: $idempotencyKey) { project { id } } extra: createProject(input: { name: "extra" }) { project { id } } }';

function setup() {
  const apps = appsFile('mcp-bind-', [
    { name: 'agent', scopes: ['cloud:read', 'cloud:write'], key: AGENT_KEY },
    { name: 'approver', scopes: ['cloud:approve'], key: APPROVER_KEY },
    { name: 'ops', scopes: ['operator'], key: OPERATOR_KEY },
  ]);
  // The apps file's fresh directory is the data directory, and holds the manifest too.
  const dir = path.dirname(apps);
  const manifest = path.join(dir, 'manifest.json');
  const write = (documents: Record<string, string>) => fs.writeFileSync(manifest, JSON.stringify(documents));
  write({ 'make-project': ONE });
  return {
    write,
    env: {
      DATA_DIR: dir,
      GATEWAY_APPS_FILE: apps,
      MCP_MUTATIONS: 'approve',
      MCP_APPROVAL: 'elicitation',
      TRUSTED_DOCUMENTS: 'allow',
      TRUSTED_DOCUMENTS_MANIFEST: manifest,
    },
  };
}

async function reload(gw: TestGateway): Promise<void> {
  const res = await request(`${gw.url}/admin/reload`, {
    method: 'POST',
    headers: { authorization: `Bearer ${OPERATOR_KEY}` },
  });
  expect(res.statusCode, await res.body.text()).toBe(200);
}

async function approvedPlan(gw: TestGateway, c: TestMcpClient): Promise<{ planId: string; hash: string }> {
  const planned = await c.call('MakeProject', { input: { name: 'bound' } });
  expect(planned.isError, textOf(planned)).toBeFalsy();
  const { planId, hash } = planned.structuredContent as { planId: string; hash: string };
  const approved = await gw.graphql(
    'mutation($id: ID!) { approvePlan(planId: $id) { status } }',
    { id: planId },
    { key: APPROVER_KEY },
  );
  expect(approved.data).toEqual({ approvePlan: { status: 'APPROVED' } });
  return { planId, hash };
}

describe('an approval binds the text that runs', () => {
  it('an approved plan whose trusted document a reload changed is refused with PLAN_CHANGED, and nothing is sent', async () => {
    const { env, write } = setup();
    const gw = await start(env);
    const c = await connect(gw, { key: AGENT_KEY, person: 'accept' });
    const { planId, hash } = await approvedPlan(gw, c);
    // Same id, one more createProject: the operator ships a new manifest and reloads.
    write({ 'make-project': TWO });
    await reload(gw);
    const refused = await c.call('execute_plan', { planId });
    expect(refused.isError).toBe(true);
    expect(refused.structuredContent).toMatchObject({
      code: 'PLAN_CHANGED',
      hash,
      newHash: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    expect(refused.structuredContent!.newHash).not.toBe(hash);
    expect(c.asked).toEqual([]);
    expect(upstreamCreations(gw)).toEqual([]);

    // The document leaves the manifest: still refused, still nothing sent.
    write({ other: '{ catalog { platforms { name } } }' });
    await reload(gw);
    const gone = await c.call('execute_plan', { planId });
    expect(gone.structuredContent).toMatchObject({ code: 'PLAN_CHANGED', newHash: null });
    expect(upstreamCreations(gw)).toEqual([]);
  });

  it('a reload that leaves the document as it was runs the approved text, once', async () => {
    const { env, write } = setup();
    const gw = await start(env);
    const c = await connect(gw, { key: AGENT_KEY });
    const { planId } = await approvedPlan(gw, c);
    write({ 'make-project': ONE, other: '{ catalog { platforms { name } } }' });
    await reload(gw);
    const executed = await c.call('execute_plan', { planId });
    expect(executed.isError, textOf(executed)).toBeFalsy();
    expect(executed.structuredContent).toMatchObject({ status: 'SUCCEEDED', createProject: { project: {} } });
    expect(upstreamCreations(gw)).toHaveLength(1);
  });
});
