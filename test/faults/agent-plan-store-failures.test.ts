// The writes of an agent's plan since an approval covers one run (docs/decisions/060), and a provisioning's resume
// claimed in one write, meeting their store failing with something unexpected (docs/contract.md, Error codes:
// INTERNAL_SERVER_ERROR): the client gets INTERNAL_SERVER_ERROR with nothing of the error's own, and the log has the
// error once, on a line naming the request. Only an internal throw reaches these paths as a raw error (the database's
// own failures are SERVICE_UNAVAILABLE, test/server/mcp/mcp-plan-database-fails.test.ts): ONE method of the store's
// rows is replaced per case (restored after it), and its error marked with the case.
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';

import { RateLimitedError } from '../../src/ratelimit/buckets.js';
import { AgentPlanRows } from '../../src/store/agent-plans.js';
import { ProvisioningRows } from '../../src/store/provisionings.js';
import { appsFile, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { AGENT_KEY, APPROVER_KEY, mcpClient } from '../helpers/mcp.js';
import { kafkaInput } from '../helpers/resumable.js';

const SECRET = 'secret-internal-detail /var/lib/x SELECT * FROM t';
const LEAKS = [/secret-internal-detail/, /\/var\/lib\/x/, /SELECT \* FROM/, /\bat [^\n"]*:\d+:\d+/, /\.ts:\d+/];
const INTERNAL = 'INTERNAL_SERVER_ERROR';
const PERSON_KEY = 'agent-plan-store-failures-person-01';
const APPROVE = 'mutation($id: ID!) { approvePlan(planId: $id) { status } }';
const PROVISION = `mutation($input: ProvisionKafkaClusterInput!, $key: UUID) {
  provisionKafkaCluster(input: $input, idempotencyKey: $key) { provisioning { id state } replayed }
}`;

let gw: TestGateway;
let elicited: TestGateway;
beforeAll(async () => {
  // A creation's rate limit that nothing reaches: the admission takes its points, so a case can refuse one run.
  const env = { MCP_MUTATIONS: 'approve', RATE_LIMIT_CREATIONS: '100000/1h' };
  gw = await startTestGateway({
    ...env,
    GATEWAY_APPS_FILE: appsFile('agent-plan-store-failures-', [
      { name: 'agent', scopes: ['cloud:read', 'cloud:write'], key: AGENT_KEY },
      { name: 'approver', scopes: ['cloud:approve'], key: APPROVER_KEY },
    ]),
  });
  // The person approves through the agent's client (MCP_APPROVAL=elicitation): the approval is written by execute_plan.
  elicited = await startTestGateway({
    ...env,
    MCP_APPROVAL: 'elicitation',
    GATEWAY_APPS_FILE: appsFile('agent-plan-store-failures-person-', [
      { name: 'agent', scopes: ['cloud:read', 'cloud:write', 'cloud:approve'], key: PERSON_KEY },
    ]),
  });
});
afterAll(async () => {
  await Promise.all([gw?.close(), elicited?.close()]);
});
afterEach(() => {
  vi.restoreAllMocks();
});

/** The rows' method `method` rejects with SECRET marked `[mark]`. */
const rowsThrow = (method: 'approve' | 'claim' | 'release' | 'finish' | 'insertAudit', mark: string) =>
  vi.spyOn(AgentPlanRows.prototype, method).mockRejectedValue(new Error(`${SECRET} [${mark}]`));

/** The cases' marks and the gateway whose log has each: checked again once they all ran. */
const marks = new Map<string, TestGateway>();

/** The log lines of `on` since `from` with `mark`: exactly one, naming a request; returned for more checks. */
function loggedOnce(on: TestGateway, from: number, mark: string) {
  marks.set(mark, on);
  const lines = on
    .logs()
    .slice(from)
    .split('\n')
    .filter((l) => l.includes(`[${mark}]`));
  expect(lines, lines.join('\n')).toHaveLength(1);
  expect((JSON.parse(lines[0]!) as { requestId?: unknown }).requestId, lines[0]).toEqual(expect.any(String));
}

function noLeak(raw: string) {
  for (const leak of LEAKS) expect(raw, `${leak} in the answer`).not.toMatch(leak);
}

describe("execute_plan when the plan's store throws something unexpected", () => {
  it.each([
    ['its claim', 'claim', () => rowsThrow('claim', 'claim')],
    ['the outcome of its run (finish)', 'finish', () => rowsThrow('finish', 'finish')],
    ['its audit row', 'audit', () => rowsThrow('insertAudit', 'audit')],
    [
      'the release of a run refused before sending (release)',
      'release',
      () => {
        vi.spyOn(gw.gateway.services.rateLimits, 'take').mockRejectedValueOnce(
          new RateLimitedError('creations', 3, { points: 1, windowMs: 60_000 } as never),
        );
        rowsThrow('release', 'release');
      },
    ],
  ] as const)('%s: INTERNAL_SERVER_ERROR with nothing of its own, logged once', async (_name, mark, provoke) => {
    const c = await mcpClient(gw, { key: AGENT_KEY });
    try {
      const planned = await c.call('create_project', { input: { name: `store-fails-${mark}` } });
      const planId = planned.structuredContent!.planId as string;
      expect((await gw.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY })).data).toEqual({
        approvePlan: { status: 'APPROVED' },
      });
      const from = gw.logs().length;
      provoke();
      const executed = await c.call('execute_plan', { planId });
      noLeak(JSON.stringify(executed));
      expect(executed.isError).toBe(true);
      expect(executed.structuredContent).toEqual({ errors: [{ message: 'Internal server error', code: INTERNAL }] });
      loggedOnce(gw, from, mark);
    } finally {
      await c.close();
    }
  });

  it('the approval a person gives through the client (MCP_APPROVAL=elicitation): the same', async () => {
    const c = await mcpClient(elicited, { key: PERSON_KEY, person: 'accept' });
    try {
      const planned = await c.call('create_project', { input: { name: 'store-fails-elicited' } });
      const planId = planned.structuredContent!.planId as string;
      const from = elicited.logs().length;
      rowsThrow('approve', 'approve-elicited');
      const executed = await c.call('execute_plan', { planId });
      noLeak(JSON.stringify(executed));
      expect(executed.structuredContent).toEqual({ errors: [{ message: 'Internal server error', code: INTERNAL }] });
      loggedOnce(elicited, from, 'approve-elicited');
    } finally {
      await c.close();
    }
  });
});

describe('approvePlan when the store throws something unexpected', () => {
  it('answers INTERNAL_SERVER_ERROR with nothing of its own, logged once', async () => {
    const c = await mcpClient(gw, { key: AGENT_KEY });
    try {
      const planned = await c.call('create_project', { input: { name: 'store-fails-approve' } });
      const planId = planned.structuredContent!.planId as string;
      const from = gw.logs().length;
      rowsThrow('approve', 'approve');
      const answer = await gw.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY });
      noLeak(JSON.stringify(answer));
      expect(answer.errors).toEqual([
        expect.objectContaining({ message: 'Internal server error', extensions: { code: INTERNAL } }),
      ]);
      loggedOnce(gw, from, 'approve');
    } finally {
      await c.close();
    }
  });
});

describe("a provisioning's resume when its claim's one write throws something unexpected", () => {
  it('answers INTERNAL_SERVER_ERROR with nothing of its own, logged once', async () => {
    const sandbox = gw.gateway.sandbox.cloud!;
    // The cluster's creation answers with no id it can read: the provisioning is FAILED, and a call again resumes it.
    sandbox.faults.enqueueFor((p, method) => method === 'POST' && p === '/ocs/v1/services', 'ok-no-id');
    const key = randomUUID();
    const input = kafkaInput('store-fails-resume', '10.30.0.0/24');
    const first = await gw.graphql(PROVISION, { input, key }, { key: AGENT_KEY });
    expect(first.errors, JSON.stringify(first.errors)).toBeUndefined();
    await gw.gateway.services.provisioning.idle();
    const read = await gw.graphql(
      'query($id: ID!) { provisioning(id: $id) { state } }',
      {
        id: first.data!.provisionKafkaCluster.provisioning.id,
      },
      { key: AGENT_KEY },
    );
    expect(read.data).toEqual({ provisioning: { state: 'FAILED' } });
    const from = gw.logs().length;
    vi.spyOn(ProvisioningRows.prototype, 'claimResume').mockRejectedValue(new Error(`${SECRET} [resume]`));
    const again = await gw.graphql(PROVISION, { input, key }, { key: AGENT_KEY });
    noLeak(JSON.stringify(again));
    expect(again.errors).toEqual([
      expect.objectContaining({ message: 'Internal server error', extensions: { code: INTERNAL } }),
    ]);
    loggedOnce(gw, from, 'resume');
  });
});

describe('what the cases logged late', () => {
  it('no mark is logged again after its case', () => {
    for (const [mark, on] of marks) {
      const lines = on
        .logs()
        .split('\n')
        .filter((l) => l.includes(`[${mark}]`));
      expect(lines, `${mark}: ${lines.join('\n')}`).toHaveLength(1);
    }
  });
});
