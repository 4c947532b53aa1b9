// A plan whose execution's process stopped (kill -9, a lost replica) does not stay `executing` for ever: a running
// execution touches its plan every third of IDEMPOTENCY_TAKEOVER, as a running idempotent call renews its lease
// (docs/decisions/012); a plan with no sign of life for that long reads as UNKNOWN, its approval spent by the claim of
// the run that stopped: a person approves it again, and execute_plan runs it again under the same idempotency keys,
// once: the upstream creates one resource. A plan whose execution is alive, however
// slow, is refused as being executed, and of two calls that find a lost plan only one runs it. An execution taken for
// lost that was only paused answers its own caller, but the plan keeps the outcome of the call that took it over.
import { once } from 'node:events';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import {
  PROJECTS_PATH,
  SANDBOX_SERVICE_ACCOUNT_TOKEN,
  startCloudSandbox,
  type CloudSandbox,
} from '../../../src/sandbox/cloud.js';
import { upstreamCreations } from '../../helpers/cloud.js';
import { gatewaysPerTest, tempDataDir, type TestGateway } from '../../helpers/gateway.js';
import { testClock } from '../../helpers/jwt.js';
import { AGENT_KEY, APPROVER_KEY, mcpClientsPerTest, OPERATOR_KEY, planApps, textOf } from '../../helpers/mcp.js';
import { gatewayProcesses } from '../../helpers/process.js';
import { waitFor } from '../../helpers/wait.js';

const start = gatewaysPerTest();
const connect = mcpClientsPerTest();
const spawnGateway = gatewayProcesses();

const appsFileOf = () => planApps('mcp-left-executing-', { withOperator: true });

const APPROVE = 'mutation($id: ID!) { approvePlan(planId: $id) { status } }';
/** An UNKNOWN plan is approved again only by naming that state. */
const APPROVE_UNKNOWN = 'mutation($id: ID!) { approvePlan(planId: $id, status: UNKNOWN) { status } }';
const STATUS = 'query($id: ID!) { agentPlan(id: $id) { status } }';
const PENDING = '{ pendingAgentPlans { id status } }';
const AUDIT = 'query($id: ID) { agentAudit(planId: $id) { action detail } }';

async function graphqlAt(url: string, query: string, variables: Record<string, unknown>, key: string): Promise<any> {
  const res = await request(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ query, variables }),
  });
  return res.body.json();
}

async function statusOf(gw: TestGateway, planId: string): Promise<string> {
  return (await gw.graphql(STATUS, { id: planId }, { key: APPROVER_KEY })).data!.agentPlan.status as string;
}

describe('a plan left executing by a process that stopped', () => {
  let cloud: CloudSandbox;
  beforeAll(async () => {
    cloud = await startCloudSandbox();
  });
  afterAll(() => cloud.close());

  it('killed after the upstream created it: refused while it may run, then UNKNOWN, run, created once', async () => {
    const env = {
      DATA_DIR: tempDataDir(),
      GATEWAY_APPS_FILE: appsFileOf(),
      MCP_MUTATIONS: 'approve',
      CLOUD_API_URL: cloud.url,
      CLOUD_API_TOKEN: SANDBOX_SERVICE_ACCOUNT_TOKEN,
      SANDBOX_UPSTREAMS: 'identification,verification,rfm,mobile-id',
    };
    const name = 'left executing';
    const created = () => cloud.projects().filter((p) => p.name === name);

    // The first process stops for good once the upstream has created the project, before anything is recorded.
    const first = await spawnGateway({ ...env, GATEWAY_TEST_PAUSE_AT: 'upstream-answered' });
    const paused = first.waitFor('paused at a test phase');
    const agentOnFirst = await connect(first, { key: AGENT_KEY });
    const planned = await agentOnFirst.call('create_project', { input: { name } });
    expect(planned.isError, textOf(planned)).toBeFalsy();
    const planId = planned.structuredContent!.planId as string;
    expect((await graphqlAt(first.url, APPROVE, { id: planId }, APPROVER_KEY)).data).toEqual({
      approvePlan: { status: 'APPROVED' },
    });
    const lost = agentOnFirst.call('execute_plan', { planId }).catch((err: unknown) => err);
    await paused;
    expect(created()).toHaveLength(1);
    const exited = once(first.child, 'exit');
    first.child.kill('SIGKILL');
    await exited;
    await lost;
    const killedAt = Date.now();

    // The next process, on the same database and upstream, with a clock the test moves.
    const clock = testClock(killedAt);
    const gw = await start(env, { testing: { clock: clock.now } });
    const takeoverMs = gw.gateway.services.config.idempotencyTakeoverMs;
    const agent = await connect(gw, { key: AGENT_KEY });
    // Within IDEMPOTENCY_TAKEOVER of its last sign of life the execution may still run: refused, nothing sent.
    expect(await statusOf(gw, planId)).toBe('EXECUTING');
    const refused = await agent.call('execute_plan', { planId });
    expect(refused.isError).toBe(true);
    expect(refused.structuredContent).toMatchObject({ planId, status: 'EXECUTING' });
    expect(refused.structuredContent!.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(refused.structuredContent!.retryAfterSeconds).toBeLessThanOrEqual(takeoverMs / 1000);
    expect(textOf(refused)).toContain(`plan ${planId} is being executed`);
    expect(cloud.requests.filter((r) => r.path === PROJECTS_PATH)).toHaveLength(1);

    // No sign of life for IDEMPOTENCY_TAKEOVER: its outcome is unknown. Its approval was spent on the run that
    // stopped: the agent's call sends nothing, the plan is listed for approval, and once approved again execute_plan
    // runs it again under the same key.
    clock.advance(takeoverMs + 1);
    expect(await statusOf(gw, planId)).toBe('UNKNOWN');
    expect((await gw.graphql(PENDING, {}, { key: APPROVER_KEY })).data).toEqual({
      pendingAgentPlans: [{ id: planId, status: 'UNKNOWN' }],
    });
    expect((await agent.call('execute_plan', { planId })).structuredContent).toMatchObject({
      planId,
      status: 'UNKNOWN',
      code: 'APPROVAL_REQUIRED',
    });
    expect(cloud.requests.filter((r) => r.path === PROJECTS_PATH)).toHaveLength(1);
    expect((await gw.graphql(APPROVE_UNKNOWN, { id: planId }, { key: APPROVER_KEY })).data).toEqual({
      approvePlan: { status: 'UNKNOWN' },
    });
    const done = await agent.call('execute_plan', { planId });
    expect(done.isError, textOf(done)).toBeFalsy();
    expect(done.structuredContent).toMatchObject({
      planId,
      status: 'SUCCEEDED',
      replayed: false,
      createProject: { project: { name } },
    });
    expect(created()).toHaveLength(1);
    expect(done.structuredContent!.createProject.project.id).toBe(created()[0]!.id);
    const sent = cloud.requests.filter((r) => r.path === PROJECTS_PATH);
    expect(sent).toHaveLength(2);
    expect(new Set(sent.map((r) => r.headers['idempotency-key'])).size).toBe(1);
    expect(await statusOf(gw, planId)).toBe('SUCCEEDED');
    expect((await agent.call('execute_plan', { planId })).structuredContent).toMatchObject({
      planId,
      status: 'SUCCEEDED',
      replayed: true,
    });
    expect(cloud.requests.filter((r) => r.path === PROJECTS_PATH)).toHaveLength(2);
    const audit = (await gw.graphql(AUDIT, { id: planId }, { key: OPERATOR_KEY })).data!.agentAudit as {
      action: string;
      detail: string;
    }[];
    expect(audit.find((e) => e.action === 'unknown')?.detail).toMatch(/its execution stopped without an answer/);
  }, 120_000);

  it('with its approval lapsed, it is listed as UNKNOWN, approved again (never declined) and runs once', async () => {
    const clock = testClock();
    const gw = await start(
      { GATEWAY_APPS_FILE: appsFileOf(), MCP_MUTATIONS: 'approve', MCP_APPROVAL_TTL: '10m' },
      { testing: { clock: clock.now } },
    );
    const plans = gw.gateway.services.agentPlans;
    const agent = await connect(gw, { key: AGENT_KEY });
    const planId = (await agent.call('create_project', { input: { name: 'lapsed' } })).structuredContent!
      .planId as string;
    expect((await gw.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY })).data).toEqual({
      approvePlan: { status: 'APPROVED' },
    });
    // A process claims it and stops before sending anything.
    expect(await plans.claim((await plans.get(planId))!)).not.toBeNull();
    clock.advance(10 * 60_000 + 1);
    expect(await statusOf(gw, planId)).toBe('UNKNOWN');
    expect((await gw.graphql(PENDING, {}, { key: APPROVER_KEY })).data).toEqual({
      pendingAgentPlans: [{ id: planId, status: 'UNKNOWN' }],
    });
    const again = await agent.call('execute_plan', { planId });
    expect(again.structuredContent).toMatchObject({ planId, status: 'UNKNOWN', code: 'APPROVAL_REQUIRED' });
    const declined = await gw.graphql(
      'mutation($id: ID!) { declinePlan(planId: $id) { status } }',
      { id: planId },
      {
        key: APPROVER_KEY,
      },
    );
    expect(declined.errors?.[0]?.extensions?.code).toBe('CONFLICT');
    expect((await gw.graphql(APPROVE_UNKNOWN, { id: planId }, { key: APPROVER_KEY })).data).toEqual({
      approvePlan: { status: 'UNKNOWN' },
    });
    expect((await gw.graphql(PENDING, {}, { key: APPROVER_KEY })).data).toEqual({ pendingAgentPlans: [] });
    const done = await agent.call('execute_plan', { planId });
    expect(done.structuredContent).toMatchObject({ planId, status: 'SUCCEEDED', replayed: false });
    expect(upstreamCreations(gw)).toHaveLength(1);
  });

  it('a live execution is never taken for lost, however long it runs; two calls never both take one over', async () => {
    const clock = testClock();
    const gw = await start(
      { GATEWAY_APPS_FILE: appsFileOf(), MCP_MUTATIONS: 'approve', IDEMPOTENCY_TAKEOVER: '300ms' },
      { testing: { clock: clock.now } },
    );
    const plans = gw.gateway.services.agentPlans;
    const agent = await connect(gw, { key: AGENT_KEY });
    const approved = async (name: string) => {
      const planId = (await agent.call('create_project', { input: { name } })).structuredContent!.planId as string;
      expect((await gw.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY })).data).toEqual({
        approvePlan: { status: 'APPROVED' },
      });
      return planId;
    };

    // A running execution touches its plan every third of IDEMPOTENCY_TAKEOVER, by the gateway's clock.
    const slow = await approved('slow');
    const claim = await plans.claim((await plans.get(slow))!);
    expect(claim).not.toBeNull();
    let release!: () => void;
    const running = plans.running(claim!, () => new Promise<void>((resolve) => (release = resolve)));
    for (let i = 0; i < 3; i++) {
      clock.advance(200);
      await waitFor(async () => (await plans.get(slow))!.lostAt === clock.now() + 300, 20_000, 'a heartbeat');
      expect(await statusOf(gw, slow)).toBe('EXECUTING');
      const refused = await agent.call('execute_plan', { planId: slow });
      expect(refused.structuredContent).toMatchObject({ planId: slow, status: 'EXECUTING', retryAfterSeconds: 1 });
    }
    release();
    await running;
    // Its run over, nothing touches it: had its process stopped there, it would be lost.
    clock.advance(301);
    expect(await statusOf(gw, slow)).toBe('UNKNOWN');

    // Two calls find a lost plan approved again: one claims and runs it, the other is refused; the upstream creates
    // it once.
    const approvedAgain = async (planId: string) =>
      expect((await gw.graphql(APPROVE_UNKNOWN, { id: planId }, { key: APPROVER_KEY })).data).toEqual({
        approvePlan: { status: 'UNKNOWN' },
      });
    const raced = await approved('raced');
    expect(await plans.claim((await plans.get(raced))!)).not.toBeNull();
    clock.advance(301);
    await approvedAgain(raced);
    const other = await connect(gw, { key: AGENT_KEY });
    const [a, b] = await Promise.all([
      agent.call('execute_plan', { planId: raced }),
      other.call('execute_plan', { planId: raced }),
    ]);
    const ran = [a, b].filter((r) => r.structuredContent?.status === 'SUCCEEDED' && !r.structuredContent.replayed);
    expect(ran, JSON.stringify([a.structuredContent, b.structuredContent])).toHaveLength(1);
    expect(upstreamCreations(gw)).toHaveLength(1);

    // A lost plan is never claimed on the approval its lost run spent; approved again, the store's claim is true for
    // exactly one of two claims at once.
    const twice = await approved('twice');
    const plan = (await plans.get(twice))!;
    expect(await plans.claim(plan)).not.toBeNull();
    clock.advance(301);
    expect((await plans.get(twice))!.status).toBe('unknown');
    expect(await plans.claim(plan)).toBeNull();
    await approvedAgain(twice);
    const lostPlan = (await plans.get(twice))!;
    expect(lostPlan.status).toBe('unknown');
    const claims = await Promise.all([plans.claim(lostPlan), plans.claim(lostPlan)]);
    expect(claims.map(Boolean).sort()).toEqual([false, true]);
  });
  it('an execution taken over while it ran answers its own caller, but never overwrites the stored outcome of the call that took it over', async () => {
    const clock = testClock();
    // No heartbeat is due within this test: the first execution is taken for lost only when the test moves the clock.
    const gw = await start(
      {
        GATEWAY_APPS_FILE: appsFileOf(),
        MCP_MUTATIONS: 'approve',
        IDEMPOTENCY_TAKEOVER: '5m',
        UPSTREAM_MAX_RETRIES: '0',
      },
      { testing: { clock: clock.now } },
    );
    const agent = await connect(gw, { key: AGENT_KEY });
    const name = 'taken over';
    const planId = (await agent.call('create_project', { input: { name } })).structuredContent!.planId as string;
    expect((await gw.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY })).data).toEqual({
      approvePlan: { status: 'APPROVED' },
    });

    // The first execution's request waits at the upstream while its process shows no sign of life for longer than
    // IDEMPOTENCY_TAKEOVER (a long pause): the plan reads as UNKNOWN.
    const faults = gw.gateway.sandbox.cloud!.faults;
    const paused = faults.hold();
    const first = agent.call('execute_plan', { planId });
    await waitFor(() => paused.arrived() === 1, 20_000, 'the first execution at the upstream');
    clock.advance(5 * 60_000 + 1);
    expect(await statusOf(gw, planId)).toBe('UNKNOWN');

    // A person approves it again (its approval was spent on the first run), and another call takes the plan over and
    // runs it to its end (a new hold, released at once, lets its request by).
    expect((await gw.graphql(APPROVE_UNKNOWN, { id: planId }, { key: APPROVER_KEY })).data).toEqual({
      approvePlan: { status: 'UNKNOWN' },
    });
    faults.hold().release();
    const other = await connect(gw, { key: AGENT_KEY });
    const taker = await other.call('execute_plan', { planId });
    expect(taker.structuredContent).toMatchObject({ planId, status: 'SUCCEEDED', replayed: false });
    expect(await statusOf(gw, planId)).toBe('SUCCEEDED');

    // The first execution goes on: its request fails, as may have been applied. Its caller hears its own outcome;
    // the plan keeps the outcome of the call that took it over.
    faults.enqueueFor(PROJECTS_PATH, { status: 503, retryAfterSeconds: null });
    paused.release();
    const lost = await first;
    expect(lost.structuredContent).toMatchObject({ planId, status: 'UNKNOWN' });
    expect(await statusOf(gw, planId)).toBe('SUCCEEDED');
    expect((await agent.call('execute_plan', { planId })).structuredContent).toMatchObject({
      planId,
      status: 'SUCCEEDED',
      replayed: true,
      createProject: { project: { id: taker.structuredContent!.createProject.project.id, name } },
    });
    expect(upstreamCreations(gw)).toHaveLength(2);
    expect(gw.logs()).toContain('agent plan outcome not stored: another execution took the plan over');
    const audit = (await gw.graphql(AUDIT, { id: planId }, { key: OPERATOR_KEY })).data!.agentAudit as {
      action: string;
      detail: string;
    }[];
    expect(audit.filter((e) => e.detail.includes('not stored'))).toEqual([
      {
        action: 'unknown',
        detail:
          `create_project with idempotency key ${planId}: unknown; its outcome was not stored: another execution ` +
          "took the plan over (this one was taken for lost), and the plan's outcome is that execution's",
      },
    ]);
  });
});
