// Errors tell no app that another app's thing exists (docs/apps-and-security.md): a cloud creation naming another
// app's verification or identification as its parent, and an approver's approvePlan, declinePlan or agentPlan on a plan
// its `approves` list leaves out, answer word for word, extensions included, as for an id nothing holds.
// planKafkaCluster and provisionKafkaCluster: test/tenancy/no-oracles.test.ts.
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { appsFile, gatewaysPerTest, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { mcpClient, textOf, type TestMcpClient } from '../helpers/mcp.js';

const A = 'key-errors-app-a-0123456789';
const B = 'key-errors-app-b-9876543210';

/** B's whole answer to `query` with `id` in `variables(id)`, the id written as <id>. */
async function answered(gw: TestGateway, key: string, query: string, variables: Record<string, unknown>, id: string) {
  return JSON.stringify(await gw.graphql(query, variables, { key })).replaceAll(id, '<id>');
}

describe("a cloud creation naming another app's identity record as its parent", () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway({ GATEWAY_API_KEYS: `${A},${B}`, SANDBOX_CALLBACK_DELAY_MS: '600000' });
  });
  afterAll(() => gw?.close());

  it.each([
    ['createNetwork', 'projectId'],
    ['createSubnet', 'networkId'],
  ])("%s with another app's verification or identification as %s is answered as with an unknown id", async (m) => {
    const REGISTER = `mutation { registerVerification(input: { workflowId: "wf-kyc", applicant: { lastName: "P" } }) {
      verification { id } } }`;
    const IDENTIFY = `mutation { createIdentification(input: { workflowId: "wf-errors" }) { identification { id } } }`;
    const verification = (await gw.graphql(REGISTER, {}, { key: A })).data!.registerVerification.verification.id;
    const identification = (await gw.graphql(IDENTIFY, {}, { key: A })).data!.createIdentification.identification.id;
    const project = (
      await gw.graphql(
        `mutation { createProject(input: { name: "errors" }) { project { id } } }`,
        {},
        {
          key: B,
        },
      )
    ).data!.createProject.project.id as string;
    const input = (id: string) =>
      m === 'createNetwork'
        ? { projectId: id, title: 'net' }
        : { projectId: project, networkId: id, title: 'sub', cidr: '10.63.0.0/24' };
    const query = `mutation($input: ${m[0]!.toUpperCase()}${m.slice(1)}Input!) { ${m}(input: $input) { replayed } }`;
    const unknown = randomUUID();
    const ofUnknown = await answered(gw, B, query, { input: input(unknown) }, unknown);
    // An id the ledger does not hold goes to the upstream, which may hold it; there it is unknown too.
    expect(ofUnknown).toContain('<id>');
    for (const id of [verification as string, identification as string])
      expect(await answered(gw, B, query, { input: input(id) }, id)).toBe(ofUnknown);
  });
});

describe("an approver and a plan its approves list leaves out (the approvals page's API)", () => {
  const start = gatewaysPerTest();
  const clients: TestMcpClient[] = [];
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => undefined)));
  });
  const KEYS = {
    agent: 'agent-errors-key-0123456',
    agent2: 'agent2-errors-key-012345',
    approver: 'approver-errors-0123',
  };

  it('agentPlan, approvePlan and declinePlan answer as for a plan that does not exist, extensions included', async () => {
    const gw = await start({
      MCP_MUTATIONS: 'approve',
      GATEWAY_APPS_FILE: appsFile('tenancy-errors-', [
        { name: 'agent', scopes: ['identity:read', 'identity:write'], key: KEYS.agent },
        { name: 'agent2', scopes: ['identity:read', 'identity:write'], key: KEYS.agent2 },
        { name: 'approver2', scopes: ['identity:approve'], approves: ['agent2'], key: KEYS.approver },
      ]),
    });
    const c = await mcpClient(gw, { key: KEYS.agent });
    clients.push(c);
    const planned = await c.call('create_identification', { input: { workflowId: 'wf-errors-plan' } });
    expect(planned.isError, textOf(planned)).toBeFalsy();
    const plan = planned.structuredContent!.planId as string;
    const unknown = randomUUID();
    for (const query of [
      'query($id: ID!) { agentPlan(id: $id) { id app status } }',
      'mutation($id: ID!) { approvePlan(planId: $id) { id status } }',
      'mutation($id: ID!) { declinePlan(planId: $id) { id status } }',
    ]) {
      const theirs = await answered(gw, KEYS.approver, query, { id: plan }, plan);
      expect(theirs).toBe(await answered(gw, KEYS.approver, query, { id: unknown }, unknown));
    }
    expect((await gw.graphql('{ pendingAgentPlans { id } }', {}, { key: KEYS.approver })).data).toEqual({
      pendingAgentPlans: [],
    });
  });
});
