// Plans are neither free nor unbounded (docs/decisions/060): making one spends a creation point of the app; an app
// holds a bounded number (and size) of plans awaiting approval or execution; a plan may be approved and executed for
// 24 hours, then can never run, and 7 days later it is purged with its audit rows; a repeated refusal adds no audit
// row; the metrics count plans by state.
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';

import { MAX_OPEN_PLANS_PER_APP } from '../../../src/store/agent-plans.js';
import { appsFile, gatewaysPerTest, type TestGateway } from '../../helpers/gateway.js';
import { testClock } from '../../helpers/jwt.js';
import { mcpClient, textOf, type TestMcpClient } from '../../helpers/mcp.js';

const start = gatewaysPerTest();
const clients: TestMcpClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close().catch(() => undefined)));
});
async function connect(gw: TestGateway, key: string): Promise<TestMcpClient> {
  const c = await mcpClient(gw, { key });
  clients.push(c);
  return c;
}

const AGENT_KEY = 'agent-key-0123456789';
const OTHER_KEY = 'other-key-0123456789';
const APPROVER_KEY = 'approver-key-0123456789';
const OPERATOR_KEY = 'operator-key-0123456789';

const appsFileOf = () =>
  appsFile('mcp-bounded-', [
    { name: 'agent', scopes: ['cloud:read', 'cloud:write', 'identity:write'], key: AGENT_KEY },
    { name: 'other', scopes: ['cloud:read', 'cloud:write'], key: OTHER_KEY },
    { name: 'approver', scopes: ['cloud:approve', 'identity:approve'], key: APPROVER_KEY },
    { name: 'ops', scopes: ['operator'], key: OPERATOR_KEY },
  ]);

async function pending(gw: TestGateway): Promise<string[]> {
  const r = await gw.graphql<{ pendingAgentPlans: { id: string }[] }>(
    '{ pendingAgentPlans(first: 1000) { id } }',
    {},
    { key: APPROVER_KEY },
  );
  return r.data!.pendingAgentPlans.map((p) => p.id);
}

async function plansByState(gw: TestGateway): Promise<Record<string, number>> {
  const text = await (await request(`${gw.url}/metrics`)).body.text();
  return Object.fromEntries(
    [...text.matchAll(/^gateway_agent_plans\{state="([a-z]+)"\} (\d+)$/gm)].map((m) => [m[1]!, Number(m[2])]),
  );
}

describe('plans cost points and are bounded', () => {
  it('making a plan spends a creation point: past RATE_LIMIT_CREATIONS it is refused and nothing is stored', async () => {
    const gw = await start({ GATEWAY_APPS_FILE: appsFileOf(), MCP_MUTATIONS: 'approve', RATE_LIMIT_CREATIONS: '3/1m' });
    const c = await connect(gw, AGENT_KEY);
    for (let i = 0; i < 3; i++) {
      const planned = await c.call('create_project', { input: { name: `p${i}` } });
      expect(planned.isError, textOf(planned)).toBeFalsy();
    }
    const refused = await c.call('create_project', { input: { name: 'p3' } });
    expect(refused.isError).toBe(true);
    expect(refused.structuredContent!.errors[0]).toMatchObject({ code: 'RATE_LIMITED' });
    expect(await pending(gw)).toHaveLength(3);
  });

  it(`an app holds at most ${MAX_OPEN_PLANS_PER_APP} plans awaiting approval, and a bounded size of them; other apps are not affected`, async () => {
    const gw = await start({ GATEWAY_APPS_FILE: appsFileOf(), MCP_MUTATIONS: 'approve', RATE_LIMIT_CREATIONS: 'off' });
    const c = await connect(gw, AGENT_KEY);
    for (let i = 0; i < MAX_OPEN_PLANS_PER_APP; i++) {
      const planned = await c.call('create_project', { input: { name: `p${i}` } });
      expect(planned.isError, textOf(planned)).toBeFalsy();
    }
    const refused = await c.call('create_project', { input: { name: 'one too many' } });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(/this app has 100 plans awaiting approval or execution, the most an app may hold/);
    expect(refused.structuredContent!.errors[0]).toMatchObject({ code: 'RATE_LIMITED' });
    expect(await pending(gw)).toHaveLength(MAX_OPEN_PLANS_PER_APP);
    const other = await connect(gw, OTHER_KEY);
    expect((await other.call('create_project', { input: { name: 'theirs' } })).isError).toBeFalsy();

    // Size: big plans reach the bound of stored characters before the count.
    const sizeGw = await start({
      GATEWAY_APPS_FILE: appsFileOf(),
      MCP_MUTATIONS: 'approve',
      RATE_LIMIT_CREATIONS: 'off',
    });
    const big = await connect(sizeGw, AGENT_KEY);
    const applicant = { notes: 'x'.repeat(90_000) };
    let made = 0;
    let refusal = '';
    for (; made < 30; made++) {
      const planned = await big.call('register_verification', { input: { workflowId: 'wf', applicant } });
      if (planned.isError) {
        refusal = textOf(planned);
        break;
      }
    }
    expect(made).toBeGreaterThan(0);
    expect(made).toBeLessThan(30);
    expect(refusal).toMatch(/would hold \d+ characters, more than an app may hold \(4194304\)/);
  });

  it('an expired plan can never run; 7 days later it is purged with its audit rows; metrics count plans by state; a repeated refusal adds no row', async () => {
    const clock = testClock();
    const runs = new Map<string, () => void | Promise<void>>();
    const gw = await start(
      { GATEWAY_APPS_FILE: appsFileOf(), MCP_MUTATIONS: 'approve' },
      {
        testing: {
          clock: clock.now,
          scheduleJob: (name, run) => {
            runs.set(name, run);
            return () => undefined;
          },
        },
      },
    );
    const purge = async () => {
      runs.get('purge agent plans')!();
      // The job's run is a promise the scheduler does not hand back: the metrics show when it is done.
    };
    // Waits for the metrics to show `counts` (the run's end); the deadline only bounds a failure: expect.poll's own
    // second expired while a loaded machine was still purging.
    const metricsShow = (counts: Record<string, number>) =>
      expect.poll(() => plansByState(gw), { timeout: 20_000 }).toEqual(counts);
    const c = await connect(gw, AGENT_KEY);
    const first = (await c.call('create_project', { input: { name: 'soon expired' } })).structuredContent!
      .planId as string;
    for (let i = 0; i < 5; i++) {
      const refused = await c.call('execute_plan', { planId: first });
      expect(refused.structuredContent).toMatchObject({ code: 'APPROVAL_REQUIRED' });
    }
    const audit = async (planId: string) =>
      (
        await gw.graphql<{ agentAudit: { action: string }[] }>(
          'query($id: ID) { agentAudit(planId: $id) { action } }',
          { id: planId },
          { key: OPERATOR_KEY },
        )
      ).data!.agentAudit.map((e) => e.action);
    // One row for the five refusals (the clock stands still here: the rows are compared as a set).
    expect((await audit(first)).sort()).toEqual(['planned', 'refused']);

    await purge();
    await metricsShow({ pending: 1 });

    clock.advance(24 * 3_600_000 + 1);
    const expired = await c.call('execute_plan', { planId: first });
    expect(expired.structuredContent).toMatchObject({ code: 'PLAN_EXPIRED', status: 'EXPIRED' });
    const approve = await gw.graphql(
      'mutation($id: ID!) { approvePlan(planId: $id) { status } }',
      { id: first },
      { key: APPROVER_KEY },
    );
    expect(approve.errors![0]!.message).toMatch(/has expired: it can never run/);
    const read = await gw.graphql(
      'query($id: ID!) { agentPlan(id: $id) { status } }',
      { id: first },
      {
        key: APPROVER_KEY,
      },
    );
    expect(read.data).toEqual({ agentPlan: { status: 'EXPIRED' } });
    expect(await pending(gw)).toEqual([]);
    expect(gw.gateway.sandbox.cloud!.requests.filter((r) => r.method === 'POST' && !r.path.startsWith('/iam'))).toEqual(
      [],
    );
    await purge();
    await metricsShow({ expired: 1 });

    clock.advance(7 * 24 * 3_600_000);
    await purge();
    await metricsShow({});
    expect(
      (await gw.graphql('query($id: ID!) { agentPlan(id: $id) { status } }', { id: first }, { key: APPROVER_KEY }))
        .data,
    ).toEqual({ agentPlan: null });
    expect(await audit(first)).toEqual([]);
  });
});
