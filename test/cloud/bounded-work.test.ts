import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { SSH_KEY } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

// No request may hold the event loop: a plan or provisioning costs work linear in its topics and users, each list
// input has a bound checked before any work, and the cost estimate counts list inputs (docs/decisions/038).

const PLAN_KAFKA = `query($input: ProvisionKafkaClusterInput!) { planKafkaCluster(input: $input) { valid steps { name } defaults { field value } } }`;
const PROVISION_KAFKA = `mutation($input: ProvisionKafkaClusterInput!) { provisionKafkaCluster(input: $input) { provisioning { id } } }`;

const topics = (n: number) =>
  Array.from({ length: n }, (_, i) => ({
    name: `topic-${i}`,
    partitions: 3,
    replicationFactor: 1,
    retentionMs: '3600000',
  }));
const input = (n: number, users = 1) => ({
  project: { name: 'bounded' },
  network: { title: 'net' },
  subnet: { title: 'sub', cidr: '10.70.0.0/24' },
  cluster: { title: 'kafka', instanceType: 'C2_MEDIUM' },
  topics: topics(n),
  users: Array.from({ length: users }, (_, i) => ({ name: `svc-${i}`, password: 'Bounded-secret-1' })),
});

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(async () => {
  await gw?.close();
});

/** Steps the planner ran (against its recording cloud) to answer one plan of `n` topics. */
async function workOfPlan(n: number): Promise<number> {
  const planner = gw.gateway.services.plans;
  const before = planner.stepsRun;
  const res = await gw.graphql(PLAN_KAFKA, { input: input(n) });
  expect(res.errors).toBeUndefined();
  expect(res.data!.planKafkaCluster.valid).toBe(true);
  return planner.stepsRun - before;
}

/** `users` users with `acls` ACLs and `acls` group ACLs each, beside 10 topics. */
const withAcls = (users: number, acls: number) => ({
  ...input(10),
  users: Array.from({ length: users }, (_, i) => ({
    name: `svc-${i}`,
    password: 'Bounded-secret-1',
    // The schema fills in the fields left out (patternType literal, operation rw), as for any caller.
    acls: Array.from({ length: acls }, (_, j) => ({ pattern: `t${j}` })),
    groupAcls: Array.from({ length: acls }, (_, j) => ({ pattern: `g${j}` })),
  })),
});

/** The input nodes the planner handed to its dry runs (copied or shared), and the steps it ran, for one plan. */
async function nodesOfPlan(given: unknown): Promise<{ nodes: number; steps: number }> {
  const planner = gw.gateway.services.plans;
  const before = { nodes: planner.inputNodes, steps: planner.stepsRun };
  const res = await gw.graphql(PLAN_KAFKA, { input: given });
  expect(res.errors).toBeUndefined();
  expect(res.data!.planKafkaCluster.valid).toBe(true);
  return { nodes: planner.inputNodes - before.nodes, steps: planner.stepsRun - before.steps };
}

describe('bounded work per request', () => {
  it('plans with work linear in the number of topics (a dry run per field of every topic was quadratic)', async () => {
    const w10 = await workOfPlan(10);
    const w20 = await workOfPlan(20);
    const w40 = await workOfPlan(40);
    // Linear: each 10 more topics add the same work. Quadratic would be 4x from 20 to 40.
    expect(w40 - w20).toBe(2 * (w20 - w10));
    expect(w40).toBeLessThan(5 * w10);
  });

  it('plans with work linear in users × ACLs: input nodes copied and steps run grow by equal increments (10 → 20 → 40 ACLs, 6 → 12 → 24 users)', async () => {
    // A dry run per field of a user, each a copy of the whole user, was quadratic in its ACLs.
    const a10 = await nodesOfPlan(withAcls(4, 10));
    const a20 = await nodesOfPlan(withAcls(4, 20));
    const a40 = await nodesOfPlan(withAcls(4, 40));
    expect(a40.nodes - a20.nodes).toBe(2 * (a20.nodes - a10.nodes));
    expect(a40.steps - a20.steps).toBe(2 * (a20.steps - a10.steps));
    const u6 = await nodesOfPlan(withAcls(6, 20));
    const u12 = await nodesOfPlan(withAcls(12, 20));
    const u24 = await nodesOfPlan(withAcls(24, 20));
    expect(u24.nodes - u12.nodes).toBe(2 * (u12.nodes - u6.nodes));
    expect(u24.steps - u12.steps).toBe(2 * (u12.steps - u6.steps));
    // A small constant per field (an ACL is 3 fields, a group ACL 2), where a copy of the whole user per field was hundreds.
    expect((a40.nodes - a20.nodes) / (4 * 20 * 5)).toBeLessThan(16);
  });

  it('plans a virtual machine with work linear in its users × SSH keys (5 → 10 → 20 keys, 5 → 10 → 20 users)', async () => {
    const planVm = `query($input: ProvisionVirtualMachineInput!) { planVirtualMachine(input: $input) { valid } }`;
    const vm = (users: number, keys: number) => ({
      project: { name: 'bounded-vm' },
      network: { title: 'net' },
      subnet: { title: 'sub', cidr: '10.71.0.0/24' },
      ipAddress: { title: 'ip' },
      virtualMachine: {
        title: 'vm',
        instanceType: 'C2_MEDIUM',
        bootDisk: { sizeGb: 30, image: 'UBUNTU_22_04' },
        users: Array.from({ length: users }, (_, i) => ({
          name: `u${i}`,
          sshKeys: Array.from({ length: keys }, () => SSH_KEY),
        })),
      },
    });
    const work = async (users: number, keys: number) => {
      const planner = gw.gateway.services.plans;
      const before = planner.inputNodes;
      const res = await gw.graphql(planVm, { input: vm(users, keys) });
      expect(res.errors).toBeUndefined();
      expect(res.data!.planVirtualMachine.valid).toBe(true);
      return planner.inputNodes - before;
    };
    const k5 = await work(4, 5);
    const k10 = await work(4, 10);
    const k20 = await work(4, 20);
    expect(k20 - k10).toBe(2 * (k10 - k5));
    const u5 = await work(5, 4);
    const u10 = await work(10, 4);
    const u20 = await work(20, 4);
    expect(u20 - u10).toBe(2 * (u10 - u5));
  });

  it('reports the defaults of every ACL of a plan of 24 users with 50 ACLs each, as in a plan of one user with one ACL', async () => {
    const perAcl = (plan: { defaults: Array<{ field: string }> }, user: number, acl: number) =>
      plan.defaults
        .filter(
          (d) =>
            d.field.startsWith(`input.users[${user}].acls[${acl}].`) ||
            d.field.startsWith(`input.users[${user}].groupAcls[${acl}].`),
        )
        .map((d) => d.field.replace(/\[\d+\]/g, '[i]'));
    const query = `query($input: ProvisionKafkaClusterInput!) { planKafkaCluster(input: $input) { valid steps { name defaults { field } } defaults { field value } } }`;
    const one = (await gw.graphql(query, { input: withAcls(1, 1) })).data!.planKafkaCluster;
    const all = (await gw.graphql(query, { input: withAcls(24, 50) })).data!.planKafkaCluster;
    expect(all.valid).toBe(true);
    expect(perAcl(one, 0, 0).sort()).toEqual([
      'input.users[i].acls[i].operation',
      'input.users[i].acls[i].patternType',
      'input.users[i].groupAcls[i].patternType',
    ]);
    for (const [user, acl] of [
      [0, 0],
      [11, 37],
      [23, 49],
    ] as const)
      expect(perAcl(all, user, acl).sort()).toEqual(perAcl(one, 0, 0).sort());
    const user = all.steps.find((s: { name: string }) => s.name === 'user:svc-11');
    expect(user.defaults.map((d: { field: string }) => d.field)).toContain('input.users[11].acls[37].patternType');
  });

  it('reports the defaults of every topic in the largest allowed plan, as in a plan of one topic', async () => {
    const one = (await gw.graphql(PLAN_KAFKA, { input: input(1) })).data!.planKafkaCluster;
    const all = (await gw.graphql(PLAN_KAFKA, { input: input(100) })).data!.planKafkaCluster;
    expect(all.valid).toBe(true);
    const perTopic = (plan: { defaults: Array<{ field: string }> }, i: number) =>
      plan.defaults
        .filter((d) => d.field.startsWith(`input.topics[${i}].`))
        .map((d) => d.field.replace(/\[\d+\]/, '[i]'));
    expect(perTopic(one, 0).length).toBeGreaterThan(0);
    for (const i of [0, 57, 99]) expect(perTopic(all, i)).toEqual(perTopic(one, 0));
  });

  it('refuses more topics than PROVISIONING_MAX_TOPICS with BAD_USER_INPUT naming the limit, before any work', async () => {
    const planner = gw.gateway.services.plans;
    const before = planner.stepsRun;
    const plan = await gw.graphql(PLAN_KAFKA, { input: input(101) });
    expect(plan.errors?.[0]).toMatchObject({
      message: expect.stringMatching(/at most 100 entries \(PROVISIONING_MAX_TOPICS\); got 101/),
      extensions: { code: 'BAD_USER_INPUT', field: 'input.topics' },
    });
    expect(planner.stepsRun).toBe(before);

    const provisionings = await gw.gateway.services.store.db
      .selectFrom('provisionings')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    const created = await gw.graphql(PROVISION_KAFKA, { input: input(101) });
    expect(created.errors?.[0]).toMatchObject({ extensions: { code: 'BAD_USER_INPUT', field: 'input.topics' } });
    const after = await gw.gateway.services.store.db
      .selectFrom('provisionings')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    expect(Number(after.n)).toBe(Number(provisionings.n));
  });

  it('refuses more users than PROVISIONING_MAX_USERS, and more ACLs per user than 50', async () => {
    const users = await gw.graphql(PLAN_KAFKA, { input: input(1, 51) });
    expect(users.errors?.[0]).toMatchObject({
      message: expect.stringMatching(/PROVISIONING_MAX_USERS/),
      extensions: { code: 'BAD_USER_INPUT', field: 'input.users' },
    });
    const acls = Array.from({ length: 51 }, (_, i) => ({
      pattern: `t${i}`,
      patternType: 'LITERAL',
      operation: 'READ',
    }));
    const withAcls = { ...input(1), users: [{ name: 'svc', password: 'Bounded-secret-1', acls }] };
    const res = await gw.graphql(PLAN_KAFKA, { input: withAcls });
    expect(res.errors?.[0]).toMatchObject({ extensions: { code: 'BAD_USER_INPUT', field: 'input.users[0].acls' } });
  });
});

describe('the bounds and the cost are configurable', () => {
  let small: TestGateway;
  beforeAll(async () => {
    small = await startTestGateway({ PROVISIONING_MAX_TOPICS: '5', GRAPHQL_MAX_COST: '60' });
  });
  afterAll(async () => {
    await small?.close();
  });

  it('takes PROVISIONING_MAX_TOPICS from the environment', async () => {
    const res = await small.graphql(PLAN_KAFKA, { input: input(6) });
    expect(res.errors?.[0]).toMatchObject({
      message: expect.stringMatching(/at most 5 entries \(PROVISIONING_MAX_TOPICS\)/),
    });
  });

  it('counts every element of a list argument in the cost: a small selection over a long list input is refused', async () => {
    const within = await small.graphql(
      `query($ids: [ID!]!) { verificationResults(externalIds: $ids) { externalId } }`,
      { ids: ['a', 'b'] },
    );
    expect(within.errors).toBeUndefined();
    const ids = Array.from({ length: 70 }, (_, i) => `id-${i}`);
    const over = await small.graphql(`query($ids: [ID!]!) { verificationResults(externalIds: $ids) { __typename } }`, {
      ids,
    });
    expect(over.errors?.[0]).toMatchObject({
      extensions: { code: 'GRAPHQL_VALIDATION_FAILED', limit: 'GRAPHQL_MAX_COST' },
    });
    expect(over.errors?.[0]!.message).toMatch(/list arguments hold 70 elements/);
  });
});
