// The claim of an agent's plan spends its approval in one conditional UPDATE; on two replicas sharing one PostgreSQL
// that write is what keeps a plan to one run. Each race here is made certain, not likely: the test holds the plan's
// row locked (SELECT … FOR UPDATE in its own transaction) while both calls read the plan and reach their write, waits
// until PostgreSQL shows them waiting for that lock, then lets them go. Upstream requests are held at the sandboxes,
// and the replicas share a clock the test moves: nothing waits for a duration.
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { PROJECTS_PATH } from '../../../src/sandbox/cloud.js';
import { startTestGateway, type TestGateway } from '../../helpers/gateway.js';
import { testClock } from '../../helpers/jwt.js';
import { AGENT_KEY, APPROVER_KEY, mcpClientsPerTest, planApps, textOf } from '../../helpers/mcp.js';
import { startPostgres, type TestPostgres } from '../../helpers/postgres.js';
import { waitFor } from '../../helpers/wait.js';

const connect = mcpClientsPerTest();

const APPROVE = 'mutation($id: ID!) { approvePlan(planId: $id) { status } }';
const APPROVE_UNKNOWN = 'mutation($id: ID!) { approvePlan(planId: $id, status: UNKNOWN) { status } }';
const PENDING = '{ pendingAgentPlans { id status } }';

let postgres: TestPostgres;
let url: string;
let a: TestGateway;
let b: TestGateway;
const clock = testClock();

beforeAll(async () => {
  postgres = await startPostgres();
  url = await postgres.createDatabase('plan_claims');
  const env = {
    DATABASE_URL: url,
    TOKEN_ENCRYPTION_KEY: 'ab'.repeat(32),
    GATEWAY_APPS_FILE: planApps('mcp-plan-claims-'),
    MCP_MUTATIONS: 'approve',
  };
  a = await startTestGateway(env, { testing: { clock: clock.now } });
  b = await startTestGateway(env, { testing: { clock: clock.now } });
}, 180_000);
afterAll(async () => {
  await a?.close();
  await b?.close();
  await postgres?.stop();
});

/** Releases whatever a test left held at the sandboxes. */
const holds: Array<{ release(): void }> = [];
afterEach(() => {
  for (const h of holds.splice(0)) h.release();
});

/** Project creations both replicas' sandboxes received. */
const creations = () =>
  [a, b].flatMap((g) => g.gateway.sandbox.cloud!.requests.filter((r) => r.path === PROJECTS_PATH)).length;

/** Holds every upstream request of both replicas from now on; `arrived()` counts them. */
function holdBoth() {
  const held = [a, b].map((g) => g.gateway.sandbox.cloud!.faults.hold());
  holds.push(...held);
  return { arrived: () => held.reduce((n, h) => n + h.arrived(), 0), release: () => held.forEach((h) => h.release()) };
}

/**
 * Locks the plan's row in a transaction of the test's own, until `release()`; `waiters()` counts the sessions of the
 * database waiting for a lock (the replicas' conditional updates of that row).
 */
async function lockRow(table: string, id: string) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query('BEGIN');
  await client.query(`SELECT id FROM ${table} WHERE id = $1 FOR UPDATE`, [id]);
  return {
    waiters: async () =>
      Number(
        (
          await client.query<{ n: string }>(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
          )
        ).rows[0]!.n,
      ),
    release: async () => {
      await client.query('COMMIT');
      await client.end();
    },
  };
}

async function approvedPlan(name: string): Promise<string> {
  const agent = await connect(a, { key: AGENT_KEY });
  const planned = await agent.call('create_project', { input: { name } });
  expect(planned.isError, textOf(planned)).toBeFalsy();
  const planId = planned.structuredContent!.planId as string;
  expect((await a.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY })).data).toEqual({
    approvePlan: { status: 'APPROVED' },
  });
  return planId;
}

describe('agent plans on two PostgreSQL replicas', () => {
  it('two execute_plan calls at once, on A and B, both past their checks: one run, the other answered EXECUTING', async () => {
    const planId = await approvedPlan('raced claims');
    const onA = await connect(a, { key: AGENT_KEY });
    const onB = await connect(b, { key: AGENT_KEY });
    const before = creations();
    const upstream = holdBoth();
    const lock = await lockRow('agent_plans', planId);
    // Both calls read the plan approved, and wait at their claims.
    const calls = [onA.call('execute_plan', { planId }), onB.call('execute_plan', { planId })];
    await waitFor(async () => (await lock.waiters()) === 2, 20_000, 'both claims waiting for the row');
    await lock.release();
    // The winner's request reaches its sandbox, where it is held; the loser answers meanwhile.
    await waitFor(() => upstream.arrived() === 1, 20_000, "the winner's request upstream");
    const loser = await Promise.race(calls);
    expect(loser.isError, textOf(loser)).toBe(true);
    expect(loser.structuredContent, textOf(loser)).toMatchObject({ planId, status: 'EXECUTING' });
    expect(loser.structuredContent!.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    upstream.release();
    const both = await Promise.all(calls);
    const ran = both.filter((r) => r.structuredContent?.status === 'SUCCEEDED' && !r.structuredContent.replayed);
    expect(ran, JSON.stringify(both.map((r) => r.structuredContent))).toHaveLength(1);
    expect(creations()).toBe(before + 1);
    const third = await onB.call('execute_plan', { planId });
    expect(third.structuredContent).toMatchObject({ planId, status: 'SUCCEEDED', replayed: true });
    expect(creations()).toBe(before + 1);
  }, 60_000);

  it('a plan lost on A is listed on B and runs there only once approved again as UNKNOWN, once', async () => {
    const planId = await approvedPlan('lost on A');
    const plansOnA = a.gateway.services.agentPlans;
    // A claims it and its process is gone before it sends anything: no run, no heartbeat.
    expect(await plansOnA.claim((await plansOnA.get(planId))!)).not.toBeNull();
    const onB = await connect(b, { key: AGENT_KEY });
    const before = creations();
    const running = await onB.call('execute_plan', { planId });
    expect(running.structuredContent).toMatchObject({ planId, status: 'EXECUTING' });
    clock.advance(b.gateway.services.config.idempotencyTakeoverMs + 1);
    expect((await b.graphql(PENDING, {}, { key: APPROVER_KEY })).data).toEqual({
      pendingAgentPlans: [{ id: planId, status: 'UNKNOWN' }],
    });
    const refused = await onB.call('execute_plan', { planId });
    expect(refused.structuredContent).toMatchObject({ planId, status: 'UNKNOWN', code: 'APPROVAL_REQUIRED' });
    // An approval naming no status (an approver app's retry of its first approval) does not run it again.
    expect((await b.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY })).errors?.[0]?.extensions?.code).toBe(
      'CONFLICT',
    );
    expect((await onB.call('execute_plan', { planId })).structuredContent).toMatchObject({
      code: 'APPROVAL_REQUIRED',
    });
    expect(creations()).toBe(before);
    expect((await b.graphql(APPROVE_UNKNOWN, { id: planId }, { key: APPROVER_KEY })).data).toEqual({
      approvePlan: { status: 'UNKNOWN' },
    });
    const onA = await connect(a, { key: AGENT_KEY });
    const both = await Promise.all([onA.call('execute_plan', { planId }), onB.call('execute_plan', { planId })]);
    const ran = both.filter((r) => r.structuredContent?.status === 'SUCCEEDED' && !r.structuredContent.replayed);
    expect(ran, JSON.stringify(both.map((r) => r.structuredContent))).toHaveLength(1);
    expect(creations()).toBe(before + 1);
  }, 60_000);

  it('a claim that goes first makes a racing re-approval CONFLICT; the plan runs once', async () => {
    const planId = await approvedPlan('claim first');
    const onA = await connect(a, { key: AGENT_KEY });
    const before = creations();
    const upstream = holdBoth();
    const lock = await lockRow('agent_plans', planId);
    const executed = onA.call('execute_plan', { planId });
    await waitFor(async () => (await lock.waiters()) === 1, 20_000, 'the claim waiting for the row');
    clock.advance(1);
    const reapproved = b.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY });
    await waitFor(async () => (await lock.waiters()) === 2, 20_000, 'the re-approval waiting for the row');
    await lock.release();
    const answer = await reapproved;
    expect(answer.errors?.[0]?.extensions?.code, JSON.stringify(answer)).toBe('CONFLICT');
    await waitFor(() => upstream.arrived() === 1, 20_000, 'the run upstream');
    upstream.release();
    expect((await executed).structuredContent).toMatchObject({ planId, status: 'SUCCEEDED', replayed: false });
    expect(creations()).toBe(before + 1);
  }, 60_000);

  it('a re-approval that goes first leaves the racing claim unspent: the plan is still approved, and runs once', async () => {
    const planId = await approvedPlan('approval first');
    const onA = await connect(a, { key: AGENT_KEY });
    const before = creations();
    const lock = await lockRow('agent_plans', planId);
    clock.advance(1);
    const reapproved = b.graphql(APPROVE, { id: planId }, { key: APPROVER_KEY });
    await waitFor(async () => (await lock.waiters()) === 1, 20_000, 'the re-approval waiting for the row');
    const executed = onA.call('execute_plan', { planId });
    await waitFor(async () => (await lock.waiters()) === 2, 20_000, 'the claim waiting for the row');
    await lock.release();
    expect((await reapproved).data).toEqual({ approvePlan: { status: 'APPROVED' } });
    const first = await executed;
    // The claim checked the approval it read, which the re-approval replaced: nothing was sent, and the answer says
    // what the plan is now, not that its outcome is unknown.
    expect(first.isError, textOf(first)).toBe(true);
    expect(first.structuredContent, textOf(first)).toMatchObject({ planId, status: 'APPROVED' });
    expect(textOf(first)).not.toMatch(/unknown/i);
    expect(creations()).toBe(before);
    const again = await onA.call('execute_plan', { planId });
    expect(again.structuredContent).toMatchObject({ planId, status: 'SUCCEEDED', replayed: false });
    expect(creations()).toBe(before + 1);
    const replay = await onA.call('execute_plan', { planId });
    expect(replay.structuredContent).toMatchObject({ planId, status: 'SUCCEEDED', replayed: true });
  }, 60_000);
});
