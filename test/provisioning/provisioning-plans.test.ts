import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';

import { M, ok, SSH_KEY } from '../helpers/cloud.js';
import { gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';

const gateway = gatewaysPerTest();

const PLAN_FIELDS = `kind valid idempotencyKey
  errors { field code message }
  defaults { field value }
  references { placeholder step value }
  steps { name action resourceId resource { id } defaults { field value } errors { field code message } request { method path headers { name value } body } }`;
const PLAN_KAFKA = `query($input: ProvisionKafkaClusterInput!, $key: UUID) { planKafkaCluster(input: $input, idempotencyKey: $key) { ${PLAN_FIELDS} } }`;
const PLAN_VM = `query($input: ProvisionVirtualMachineInput!, $key: UUID) { planVirtualMachine(input: $input, idempotencyKey: $key) { ${PLAN_FIELDS} } }`;
const PROVISION_KAFKA = `mutation($input: ProvisionKafkaClusterInput!, $key: UUID) { provisionKafkaCluster(input: $input, idempotencyKey: $key) { provisioning { id } } }`;
const PROVISION_VM = `mutation($input: ProvisionVirtualMachineInput!, $key: UUID) { provisionVirtualMachine(input: $input, idempotencyKey: $key) { provisioning { id } } }`;
const STATUS = `query($id: ID!) { provisioning(id: $id) { state steps { name state resourceId } publicAddress { address } } }`;

const KAFKA_PASSWORD = 'Plan-kafka-secret-1';
const VM_PASSWORD = 'Plan-vm-secret-2';

const kafkaInput = {
  project: { name: 'planned' },
  network: { title: 'net', bandwidthMbps: 200 },
  subnet: { title: 'sub', cidr: '10.60.0.0/24' },
  ipAddress: { title: 'public' },
  cluster: { title: 'kafka', instanceType: 'C2_MEDIUM' },
  topics: [{ name: 'orders', replicationFactor: 3, retentionMs: '3600000' }],
  users: [{ name: 'svc', password: KAFKA_PASSWORD }],
};

const vmInput = {
  project: { name: 'planned-vm' },
  network: { title: 'net' },
  subnet: { title: 'sub', cidr: '10.61.0.0/24' },
  ipAddress: { title: 'ip' },
  virtualMachine: {
    title: 'vm',
    instanceType: 'C2_MEDIUM',
    bootDisk: { sizeGb: 30, image: 'UBUNTU_22_04' },
    users: [{ name: 'ops', password: VM_PASSWORD, sshKeys: [SSH_KEY] }],
  },
};

type Plan = {
  valid: boolean;
  errors: Array<{ field: string | null; code: string; message: string }>;
  defaults: Array<{ field: string; value: unknown }>;
  references: Array<{ placeholder: string; step: string; value: string }>;
  steps: Array<{
    name: string;
    action: string;
    resourceId: string | null;
    resource: { id: string } | null;
    defaults: Array<{ field: string; value: unknown }>;
    errors: Array<{ field: string | null; code: string; message: string }>;
    request: { method: string; path: string; headers: Array<{ name: string; value: string }>; body: unknown } | null;
  }>;
};

async function plan(gw: TestGateway, query: string, input: unknown, key?: string): Promise<Plan> {
  const res = await gw.graphql(query, { input, key });
  expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
  return Object.values(res.data!)[0] as Plan;
}

/** Creation requests the cloud sandbox received (the token endpoint aside). */
function creations(gw: TestGateway) {
  return gw.gateway.sandbox.cloud!.requests.filter((r) => r.method === 'POST' && !r.path.includes('/iam/'));
}

/** The test's own masking: every `password` value becomes `***`. */
function masked(body: unknown): unknown {
  if (Array.isArray(body)) return body.map(masked);
  if (body && typeof body === 'object')
    return Object.fromEntries(Object.entries(body).map(([k, v]) => [k, k === 'password' ? '***' : masked(v)]));
  return body;
}

function substitute(body: unknown, values: Map<string, string>): unknown {
  let text = JSON.stringify(body);
  for (const [placeholder, value] of values) text = text.split(JSON.stringify(placeholder)).join(JSON.stringify(value));
  return JSON.parse(text);
}

async function tableCounts(gw: TestGateway): Promise<Record<string, number>> {
  const db = gw.gateway.services.store.db;
  const counts: Record<string, number> = {};
  for (const table of ['resources', 'idempotency_records', 'provisionings', 'events']) {
    const row = await sql<{ n: number }>`select count(*) as n from ${sql.table(table)}`.execute(db);
    counts[table] = Number(row.rows[0]!.n);
  }
  return counts;
}

/** Runs the provisioning with the plan's key and compares every request the sandbox received with the plan. */
async function provisionAndCompare(gw: TestGateway, mutation: string, input: unknown, key: string, planned: Plan) {
  const res = await gw.graphql(mutation, { input, key });
  expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
  await gw.gateway.services.provisioning.idle();
  const status = (
    await gw.graphql(STATUS, { id: (Object.values(res.data!)[0] as { provisioning: { id: string } }).provisioning.id })
  ).data!.provisioning;
  expect(status.state).toBe('SUCCEEDED');

  const values = new Map<string, string>();
  for (const s of status.steps as Array<{ name: string; resourceId: string }>)
    values.set(`{{${s.name}.id}}`, s.resourceId);
  if (status.publicAddress) values.set('{{ipAddress.address}}', status.publicAddress.address);
  for (const ref of planned.references) expect(values.has(ref.placeholder), ref.placeholder).toBe(true);

  const sent = creations(gw);
  const planRequests = planned.steps.filter((s) => s.action === 'CREATE').map((s) => s.request!);
  expect(sent.map((r) => r.path)).toEqual(planRequests.map((r) => r.path));
  for (const [i, request] of planRequests.entries()) {
    const received = sent[i]!;
    expect(received.method).toBe(request.method);
    expect(masked(received.body)).toEqual(substitute(request.body, values));
    for (const { name, value } of request.headers) {
      if (name === 'authorization') expect(received.headers.authorization).toMatch(/^Bearer \S+$/);
      else expect(received.headers[name], name).toBe(value);
    }
  }
  return sent;
}

describe('provisioning plans', () => {
  it('a Kafka plan holds the exact requests provisionKafkaCluster then sends, in order', async () => {
    const gw = await gateway();
    const key = randomUUID();
    const planned = await plan(gw, PLAN_KAFKA, kafkaInput, key);
    expect(planned.valid).toBe(true);
    expect(planned.steps.map((s) => `${s.name}:${s.action}`)).toEqual([
      'project:CREATE',
      'network:CREATE',
      'subnet:CREATE',
      'ipAddress:CREATE',
      'kafkaCluster:CREATE',
      'topic:orders:CREATE',
      'user:svc:CREATE',
    ]);
    // The cluster's white_host is read from the IP's creation response at run time: the plan says so.
    expect(JSON.stringify(planned.steps[4]!.request!.body)).toContain('{{ipAddress.address}}');
    expect(planned.references).toContainEqual({
      placeholder: '{{ipAddress.address}}',
      step: 'ipAddress',
      value: 'address',
    });
    const sent = await provisionAndCompare(gw, PROVISION_KAFKA, kafkaInput, key, planned);
    expect(sent).toHaveLength(7);
  });

  it('a virtual machine plan holds the exact requests provisionVirtualMachine then sends, in order', async () => {
    const gw = await gateway();
    const key = randomUUID();
    const planned = await plan(gw, PLAN_VM, vmInput, key);
    expect(planned.valid).toBe(true);
    expect(planned.steps.map((s) => s.name)).toEqual(['project', 'network', 'subnet', 'ipAddress', 'virtualMachine']);
    const sent = await provisionAndCompare(gw, PROVISION_VM, vmInput, key, planned);
    expect(sent).toHaveLength(5);
  });

  it('a plan with the key of a provisioning of another input is not valid: the run would be IDEMPOTENCY_KEY_REUSED', async () => {
    const gw = await gateway();
    const key = randomUUID();
    const started = await gw.graphql(PROVISION_KAFKA, { input: kafkaInput, key });
    expect(started.errors).toBeUndefined();
    await gw.gateway.services.provisioning.idle();
    const other = { ...kafkaInput, project: { name: 'another' } };
    const planned = await plan(gw, PLAN_KAFKA, other, key);
    expect(planned.valid).toBe(false);
    expect(planned.errors).toEqual([
      {
        field: null,
        code: 'IDEMPOTENCY_KEY_REUSED',
        message: `idempotency key ${key} was already used for a different provisioning; use a new key`,
      },
    ]);
    const before = creations(gw).length;
    const run = await gw.graphql(PROVISION_KAFKA, { input: other, key });
    expect(run.errors![0]!.extensions!.code).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(creations(gw)).toHaveLength(before);
    // The same input with its key: no such error (the run replays it), as another kind with a fresh key.
    expect((await plan(gw, PLAN_KAFKA, kafkaInput, key)).errors).toEqual([]);
    expect((await plan(gw, PLAN_VM, vmInput, key)).errors.map((e) => e.code)).toEqual(['IDEMPOTENCY_KEY_REUSED']);
    expect((await plan(gw, PLAN_KAFKA, other, randomUUID())).valid).toBe(true);
  });

  it("a plan with the key of another creation (a project's) is not valid: the run would be IDEMPOTENCY_KEY_REUSED", async () => {
    const gw = await gateway();
    const key = randomUUID();
    const project = await gw.graphql(M.project, { input: { name: 'holds-the-key' }, key });
    expect(project.errors).toBeUndefined();
    const planned = await plan(gw, PLAN_KAFKA, kafkaInput, key);
    expect(planned.valid).toBe(false);
    expect(planned.errors).toEqual([
      {
        field: null,
        code: 'IDEMPOTENCY_KEY_REUSED',
        message: `idempotency key ${key} was already used for a different request (createProject); use a new key for a new request`,
      },
    ]);
    const before = creations(gw).length;
    const run = await gw.graphql(PROVISION_KAFKA, { input: kafkaInput, key });
    expect(run.errors![0]!.extensions!.code).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(run.errors![0]!.message).toBe(planned.errors[0]!.message);
    expect(creations(gw)).toHaveLength(before);
  });

  it('a plan makes no upstream call and writes nothing', async () => {
    const gw = await gateway();
    await ok(gw, M.project, { input: { name: 'existing', description: '' } });
    const before = await tableCounts(gw);
    const requestsBefore = gw.gateway.sandbox.cloud!.requests.length;
    await plan(gw, PLAN_KAFKA, kafkaInput, randomUUID());
    await plan(gw, PLAN_VM, vmInput);
    await plan(gw, PLAN_KAFKA, { ...kafkaInput, subnet: { title: 'bad', cidr: '10.0.0.1/24' } });
    expect(gw.gateway.sandbox.cloud!.requests.length).toBe(requestsBefore);
    expect(await tableCounts(gw)).toEqual(before);
    expect(before.resources).toBe(1);
  });

  it('a plan lists every failing step with its field, where the provisioning stops at the first', async () => {
    const gw = await gateway();
    const input = {
      ...kafkaInput,
      subnet: { title: 'sub', cidr: '10.60.0.1/24' },
      cluster: { title: 'kafka', instanceType: 'C2_MEDIUM', instanceCount: 2 },
      topics: [{ name: 'orders', replicationFactor: 3 }],
    };
    const planned = await plan(gw, PLAN_KAFKA, input);
    expect(planned.valid).toBe(false);
    const failing = planned.steps.filter((s) => s.errors.length > 0);
    expect(failing.map((s) => [s.name, s.errors.map((e) => [e.field, e.code])])).toEqual([
      ['subnet', [['input.subnet.cidr', 'BAD_USER_INPUT']]],
      ['topic:orders', [['input.topics[0].replicationFactor', 'BAD_USER_INPUT']]],
    ]);
    expect(failing.every((s) => s.request === null)).toBe(true);
    expect(planned.steps.find((s) => s.name === 'network')!.request).not.toBeNull();

    const provision = await gw.graphql(PROVISION_KAFKA, { input });
    expect(provision.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'input.subnet.cidr' });
    expect(creations(gw)).toHaveLength(0);
  });

  it('an input with both or neither of an id and a spec is a plan-level error with no steps', async () => {
    const gw = await gateway();
    const planned = await plan(gw, PLAN_VM, { ...vmInput, projectId: randomUUID(), network: undefined });
    expect(planned.valid).toBe(false);
    expect(planned.steps).toEqual([]);
    expect(planned.errors.map((e) => e.field)).toEqual(['input.project', 'input.network']);
  });

  it('a plan shows which steps reuse a resource from the ledger, and uses their ids in the bodies', async () => {
    const gw = await gateway();
    const projectId = (await ok(gw, M.project, { input: { name: 'existing', description: '' } })).project.id;
    const networkId = (await ok(gw, M.network, { input: { projectId, title: 'existing-net' } })).network.id;
    const outside = randomUUID();
    const planned = await plan(gw, PLAN_VM, {
      ...vmInput,
      project: undefined,
      projectId,
      network: undefined,
      networkId,
      ipAddress: undefined,
      ipAddressId: outside,
    });
    expect(planned.steps.map((s) => [s.name, s.action, s.resourceId, s.resource?.id ?? null])).toEqual([
      ['project', 'REUSE', projectId, projectId],
      ['network', 'REUSE', networkId, networkId],
      ['subnet', 'CREATE', '{{subnet.id}}', null],
      ['ipAddress', 'REUSE', outside, null],
      ['virtualMachine', 'CREATE', '{{virtualMachine.id}}', null],
    ]);
    const subnetBody = JSON.stringify(planned.steps[2]!.request!.body);
    expect(subnetBody).toContain(projectId);
    expect(subnetBody).toContain(networkId);
    expect(JSON.stringify(planned.steps[4]!.request!.body)).toContain(outside);
  });

  it('a plan lists the defaults it applied, and not the values the caller chose', async () => {
    const gw = await gateway();
    const planned = await plan(gw, PLAN_KAFKA, kafkaInput);
    const defaults = Object.fromEntries(planned.defaults.map((d) => [d.field, d.value]));
    expect(defaults).toMatchObject({
      'input.region': 'MSK',
      'input.zone': 'MSK_AVNTG',
      'input.network.defaultFirewallAction': 'ALLOW',
      'input.cluster.instanceCount': 3,
      'input.cluster.diskType': 'SSD_BASIC',
      'input.cluster.kafkaVersion': 'V3_1_0',
      'input.topics[0].partitions': 1,
    });
    expect(defaults).not.toHaveProperty(['input.network.bandwidthMbps']);
    expect(defaults).not.toHaveProperty(['input.topics[0].retentionMs']);
    expect(defaults).not.toHaveProperty(['input.cluster.instanceType']);
    const network = planned.steps.find((s) => s.name === 'network')!;
    expect(network.defaults.map((d) => d.field)).toContain('input.network.defaultFirewallAction');
    expect(network.defaults.every((d) => d.field.startsWith('input.network.'))).toBe(true);
  });

  it('a plan lists no defaults for a step that fails: it has no request to compare', async () => {
    const gw = await gateway();
    const input = {
      ...kafkaInput,
      cluster: { title: 'kafka', instanceType: 'C2_MEDIUM', instanceCount: 2 },
      topics: [{ name: 'orders', replicationFactor: 3 }, { name: 'events' }],
    };
    const planned = await plan(gw, PLAN_KAFKA, input);
    const failing = planned.steps.find((s) => s.name === 'topic:orders')!;
    expect(failing.errors.map((e) => e.field)).toEqual(['input.topics[0].replicationFactor']);
    expect(failing.defaults).toEqual([]);
    expect(planned.defaults.filter((d) => d.field.startsWith('input.topics[0].'))).toEqual([]);
    // The other topic's defaults are still there.
    expect(planned.defaults.map((d) => d.field)).toContain('input.topics[1].partitions');
    expect(planned.steps.find((s) => s.name === 'topic:events')!.defaults.map((d) => d.field)).toContain(
      'input.topics[1].partitions',
    );
  });

  it('a plan masks the bearer token and passwords, and shows the Idempotency-Key only for a given key', async () => {
    const gw = await gateway();
    const withoutKey = await plan(gw, PLAN_KAFKA, kafkaInput);
    const user = withoutKey.steps.find((s) => s.name === 'user:svc')!.request!;
    expect(user.headers).toContainEqual({ name: 'authorization', value: 'Bearer ***' });
    expect(user.headers.find((h) => h.name === 'idempotency-key')!.value).toMatch(/pass idempotencyKey/);
    expect(JSON.stringify(withoutKey)).not.toContain(KAFKA_PASSWORD);
    expect(JSON.stringify(user.body)).toContain('"password":"***"');
    const vm = await plan(gw, PLAN_VM, vmInput, randomUUID());
    expect(JSON.stringify(vm)).not.toContain(VM_PASSWORD);
    expect(vm.steps[4]!.request!.headers.find((h) => h.name === 'idempotency-key')!.value).toMatch(/^[0-9a-f-]{36}$/);
    expect(gw.logs()).not.toContain(KAFKA_PASSWORD);
  });
});
