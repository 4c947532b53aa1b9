import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';

import { SSH_KEY } from '../helpers/cloud.js';
import { gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';
import { wsClient } from '../helpers/mobile-id.js';

const gateway = gatewaysPerTest();

const PROVISION_KAFKA = `mutation($input: ProvisionKafkaClusterInput!, $key: UUID) {
  provisionKafkaCluster(input: $input, idempotencyKey: $key) { provisioning { id state } idempotencyKey replayed }
}`;
const STATUS = `query($id: ID!) {
  provisioning(id: $id) {
    id kind state error { code status }
    steps { name state resourceId idempotencyKey error { code } }
    project { id } kafkaCluster { id publicIp topics { name } users { name } } virtualMachine { id }
  }
}`;

const kafkaInput = {
  project: { name: 'composite' },
  network: { title: 'net' },
  subnet: { title: 'sub', cidr: '10.50.0.0/24' },
  ipAddress: { title: 'public' },
  cluster: { title: 'kafka', instanceType: 'C2_MEDIUM' },
  topics: [{ name: 'orders', replicationFactor: 3 }],
  users: [{ name: 'svc', password: 'Pr0vision-secret' }],
};

async function settle(gw: TestGateway, id: string) {
  await gw.gateway.services.provisioning.idle();
  const res = await gw.graphql(STATUS, { id });
  expect(res.errors).toBeUndefined();
  return res.data!.provisioning;
}

describe('composite provisioning', () => {
  it('provisionKafkaCluster runs the documented order and links every step', async () => {
    const gw = await gateway();
    const res = await gw.graphql(PROVISION_KAFKA, { input: kafkaInput, key: randomUUID() });
    expect(res.errors).toBeUndefined();
    expect(res.data!.provisionKafkaCluster.provisioning.state).toBe('RUNNING');
    const p = await settle(gw, res.data!.provisionKafkaCluster.provisioning.id);
    expect(p.state).toBe('SUCCEEDED');
    expect(p.steps.map((s: { name: string; state: string }) => `${s.name}:${s.state}`)).toEqual([
      'project:DONE',
      'network:DONE',
      'subnet:DONE',
      'ipAddress:DONE',
      'kafkaCluster:DONE',
      'topic:orders:DONE',
      'user:svc:DONE',
    ]);
    const calls = gw.gateway.sandbox.cloud!.requests.map((r) =>
      r.path.includes('projects') ? 'project' : (r.body as { kind: string }).kind,
    );
    expect(calls).toEqual(['project', 'network', 'subnet', 'ip', 'compute', 'topic', 'user']);
    // the public address of the created IP becomes the cluster's white_host
    expect(p.kafkaCluster.publicIp).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    expect(p.kafkaCluster.topics).toEqual([{ name: 'orders' }]);
    expect(p.kafkaCluster.users).toEqual([{ name: 'svc' }]);
  });

  it('resumes after a failure with the same key: finished steps replay, the failed one is retried, nothing is created twice', async () => {
    const gw = await gateway({ UPSTREAM_MAX_RETRIES: '0' });
    const sandbox = gw.gateway.sandbox.cloud!;
    // fail the cluster step (the 5th creation) once
    sandbox.faults.enqueueFor(
      (path, method) => method === 'POST' && path === '/ocs/v1/services' && sandbox.resources().length === 3,
      '503',
    );
    const key = randomUUID();
    const first = await gw.graphql(PROVISION_KAFKA, { input: kafkaInput, key });
    const failed = await settle(gw, first.data!.provisionKafkaCluster.provisioning.id);
    expect(failed.state).toBe('FAILED');
    expect(failed.error).toEqual({ code: 'UPSTREAM_UNAVAILABLE', status: 503 });
    expect(failed.steps.find((s: { name: string }) => s.name === 'kafkaCluster').state).toBe('FAILED');
    const createdBefore = sandbox.resources().length + sandbox.projects().length;
    expect(createdBefore).toBe(4);

    const again = await gw.graphql(PROVISION_KAFKA, { input: kafkaInput, key });
    expect(again.data!.provisionKafkaCluster).toMatchObject({ replayed: false, provisioning: { id: failed.id } });
    const done = await settle(gw, failed.id);
    expect(done.state).toBe('SUCCEEDED');
    expect(sandbox.projects()).toHaveLength(1);
    expect(sandbox.resources()).toHaveLength(6);
    // step keys are derived from the call's key and stay the same across the two calls
    const keysBefore = failed.steps.filter((s: { idempotencyKey: string | null }) => s.idempotencyKey);
    expect(keysBefore.map((s: { name: string }) => s.name)).toEqual([
      'project',
      'network',
      'subnet',
      'ipAddress',
      'kafkaCluster',
    ]);
    for (const step of keysBefore)
      expect(done.steps.find((s: { name: string }) => s.name === step.name).idempotencyKey).toBe(step.idempotencyKey);
    // the cluster's upstream key was the same on the failed and the successful attempt
    const clusterCalls = sandbox.requests.filter(
      (r) => (r.body as { platform?: { productCode?: string }; kind?: string })?.kind === 'compute',
    );
    expect(clusterCalls.map((r) => r.status)).toEqual([503, 201]);
    expect(new Set(clusterCalls.map((r) => r.headers['idempotency-key'])).size).toBe(1);

    const replay = await gw.graphql(PROVISION_KAFKA, { input: kafkaInput, key });
    expect(replay.data!.provisionKafkaCluster).toMatchObject({ replayed: true, provisioning: { state: 'SUCCEEDED' } });
    const reused = await gw.graphql(PROVISION_KAFKA, { input: { ...kafkaInput, topics: [] }, key });
    expect(reused.errors![0]!.extensions!.code).toBe('IDEMPOTENCY_KEY_REUSED');
  });

  it('provisionVirtualMachine reuses given ids and creates the rest', async () => {
    const gw = await gateway();
    const project = await gw.graphql(`mutation { createProject(input: { name: "existing" }) { project { id } } }`);
    const projectId = project.data!.createProject.project.id;
    const res = await gw.graphql(
      `mutation($input: ProvisionVirtualMachineInput!) { provisionVirtualMachine(input: $input) { provisioning { id } } }`,
      {
        input: {
          projectId,
          network: { title: 'n' },
          subnet: { title: 's', cidr: '192.168.10.0/24' },
          ipAddress: { title: 'ip' },
          virtualMachine: {
            title: 'vm',
            instanceType: 'C4_LARGE',
            bootDisk: { sizeGb: 30, image: 'ROCKY_LINUX_9' },
            users: [{ name: 'ops', sshKeys: [SSH_KEY] }],
          },
        },
      },
    );
    expect(res.errors).toBeUndefined();
    const p = await settle(gw, res.data!.provisionVirtualMachine.provisioning.id);
    expect(p.steps.map((s: { name: string; state: string }) => `${s.name}:${s.state}`)).toEqual([
      'project:REUSED',
      'network:DONE',
      'subnet:DONE',
      'ipAddress:DONE',
      'virtualMachine:DONE',
    ]);
    expect(p.project.id).toBe(projectId);
    expect(p.virtualMachine.id).toBeTruthy();
  });

  it('refuses bad input before any step, naming the nested field', async () => {
    const gw = await gateway();
    const res = await gw.graphql(PROVISION_KAFKA, {
      input: { ...kafkaInput, subnet: { title: 's', cidr: '10.0.0.1/24' } },
    });
    expect(res.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'input.subnet.cidr' });
    const res2 = await gw.graphql(PROVISION_KAFKA, {
      input: { ...kafkaInput, topics: [{ name: 't', replicationFactor: 5 }] },
    });
    expect(res2.errors![0]!.extensions).toMatchObject({
      code: 'BAD_USER_INPUT',
      field: 'input.topics[0].replicationFactor',
    });
    const res3 = await gw.graphql(PROVISION_KAFKA, { input: { ...kafkaInput, projectId: randomUUID() } });
    expect(res3.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'input.project' });
    expect(gw.gateway.sandbox.cloud!.requests).toHaveLength(0);
  });

  it('streams progress over graphql-ws until the provisioning succeeds', async () => {
    const gw = await gateway();
    // The upstream holds the steps' requests until the subscriber has its first message: the steps then run while it
    // is connected, however long a loaded machine takes to connect it.
    const held = gw.gateway.sandbox.cloud!.faults.hold();
    const res = await gw.graphql(PROVISION_KAFKA, { input: kafkaInput });
    const id = res.data!.provisionKafkaCluster.provisioning.id;
    const client = wsClient(gw);
    const states: string[] = [];
    try {
      const sub = client.iterate<{ provisioningProgress: { state: string; steps: { state: string }[] } }>({
        query: `subscription($id: ID!) { provisioningProgress(id: $id) { state steps { state } } }`,
        variables: { id },
      });
      for await (const msg of sub) {
        const p = msg.data!.provisioningProgress;
        states.push(`${p.state}:${p.steps.filter((s) => s.state === 'DONE').length}`);
        held.release();
      }
    } finally {
      // Let go in any case: a held step would keep the gateway from closing.
      held.release();
      await client.dispose();
    }
    expect(states.at(-1)).toBe('SUCCEEDED:7');
    // done-counts never go backwards
    const counts = states.map((s) => Number(s.split(':')[1]));
    expect([...counts].sort((a, b) => a - b)).toEqual(counts);
    expect(states.length).toBeGreaterThan(1);
  });
  it('a subscriber to an already finished provisioning whose last event a crash left behind its row gets its final state and completes', async () => {
    const gw = await gateway();
    const res = await gw.graphql(PROVISION_KAFKA, { input: kafkaInput });
    const id = res.data!.provisionKafkaCluster.provisioning.id;
    expect((await settle(gw, id)).state).toBe('SUCCEEDED');
    // A crash after the row's last write and before its event: the log's latest state of the provisioning is older.
    const { db } = gw.gateway.services.store;
    const last = await db
      .selectFrom('events')
      .select('seq')
      .where('kind', '=', 'provisioning')
      .where('key', '=', id)
      .orderBy('seq', 'desc')
      .executeTakeFirstOrThrow();
    await db.deleteFrom('events').where('seq', '=', last.seq).execute();

    const client = wsClient(gw);
    const states: string[] = [];
    try {
      const sub = client.iterate<{ provisioningProgress: { state: string } }>({
        query: `subscription($id: ID!) { provisioningProgress(id: $id) { state } }`,
        variables: { id },
      });
      // The stream completes on its own (no timer here: a subscriber left waiting fails by the test's timeout).
      for await (const msg of sub) states.push(msg.data!.provisioningProgress.state);
    } finally {
      await client.dispose();
    }
    expect(states).toEqual(['SUCCEEDED']);
  });
});
