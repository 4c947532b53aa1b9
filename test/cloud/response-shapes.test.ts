import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';

import {
  CLOUD_SHAPE_MODES,
  cloudShapeByName,
  randomCloudShape,
  type CloudShapeMode,
} from '../../src/sandbox/cloud-shapes.js';
import { createChain, M, ok, SSH_KEY } from '../helpers/cloud.js';
import { gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';

// The spec shows neither the token field nor the creation responses: the cloud sandbox answers in one
// shape per mode, and every cloud flow runs over every mode (docs/decisions/017-sandbox-response-shapes.md).

const gateway = gatewaysPerTest();
const credentials = { login: 'svc-shapes', password: 'shape-cred-secret' };

const PROVISION_KAFKA = `mutation($input: ProvisionKafkaClusterInput!, $key: UUID) {
  provisionKafkaCluster(input: $input, idempotencyKey: $key) { provisioning { id state } }
}`;
const PROVISION_VM = `mutation($input: ProvisionVirtualMachineInput!) { provisionVirtualMachine(input: $input) { provisioning { id } } }`;
const STATUS = `query($id: ID!) {
  provisioning(id: $id) {
    state error { code message }
    steps { name state resourceId error { code message } }
    kafkaCluster { id publicIp }
    publicAddress { address source responseField ipAddressId }
  }
}`;

const kafkaInput = (cluster: Record<string, unknown> = {}) => ({
  project: { name: 'shapes' },
  network: { title: 'net' },
  subnet: { title: 'sub', cidr: '10.60.0.0/24' },
  ipAddress: { title: 'public' },
  cluster: { title: 'kafka', instanceType: 'C2_MEDIUM', ...cluster },
});

async function provision(gw: TestGateway, input: Record<string, unknown>) {
  const res = await gw.graphql(PROVISION_KAFKA, { input, key: randomUUID() });
  expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
  await gw.gateway.services.provisioning.idle();
  const status = await gw.graphql(STATUS, { id: res.data!.provisionKafkaCluster.provisioning.id });
  expect(status.errors, JSON.stringify(status.errors)).toBeUndefined();
  return status.data!.provisioning;
}

function whiteHosts(gw: TestGateway): unknown[] {
  return gw.gateway.sandbox
    .cloud!.resources('kafka-cluster')
    .map((r) => (r.spec['vendor.extensions.kafka'] as { white_host?: string }).white_host);
}

/**
 * The flows every shape must pass: token, the full resource chain, and a provisioning with a public address. `env`
 * adds variables (the *_PATH ones), and `addressField` is where the address is read when a path names it.
 */
async function runCloudFlows(
  mode: CloudShapeMode,
  env: Record<string, string> = {},
  addressField?: string,
): Promise<void> {
  const gw = await gateway({
    SANDBOX_CLOUD_SHAPE: mode.name,
    CLOUD_API_CREDENTIALS: JSON.stringify(credentials),
    ...env,
  });
  const sandbox = gw.gateway.sandbox.cloud!;
  expect(sandbox.responseShape).toEqual(mode.shape);

  // The token is read from the mode's field: every creation carries the token the sandbox issued.
  const chain = await createChain(gw);
  expect(sandbox.issuedTokens).toHaveLength(1);
  const creations = sandbox.requests.filter((r) => r.path !== '/iam/v2/tokens');
  for (const r of creations) expect(r.headers.authorization).toBe(`Bearer ${sandbox.issuedTokens[0]!.token}`);

  // Every id the gateway returned is the one the sandbox created, wherever the answer put it.
  expect(sandbox.projects().map((p) => p.id)).toEqual([chain.projectId]);
  const created = new Set(sandbox.resources().map((r) => r.id));
  for (const id of [
    chain.networkId,
    chain.subnetId,
    chain.ipId,
    chain.clusterId,
    chain.topicId,
    chain.userId,
    chain.vmId,
  ])
    expect(created).toContain(id);

  // The IP's address is read from the mode's field, or is null when the answer has none.
  const ip = await ok(gw, M.ip, { input: { projectId: chain.projectId, networkId: chain.networkId, title: 'ip-2' } });
  const sandboxIp = sandbox.resources('ip').find((r) => r.id === ip.ipAddress.id)!;
  expect(ip.ipAddress.address).toBe(mode.shape.address === 'absent' ? null : sandboxIp.address);

  const clustersBefore = sandbox.resources('kafka-cluster').length;
  const p = await provision(gw, kafkaInput());
  const ipStep = p.steps.find((s: { name: string }) => s.name === 'ipAddress');
  const ipAddress = sandbox.resources('ip').find((r) => r.id === ipStep.resourceId)!;
  if (mode.shape.address === 'absent') {
    // Never silence: the cluster step fails, naming what is missing, and no cluster is created.
    expect(p.state).toBe('FAILED');
    const step = p.steps.find((s: { name: string }) => s.name === 'kafkaCluster');
    expect(step.state).toBe('FAILED');
    expect(step.error.code).toBe('BAD_USER_INPUT');
    expect(step.error.message).toMatch(/public IPv4 address for white_host is missing/);
    expect(step.error.message).toContain(ipAddress.id);
    expect(step.error.message).toContain('input.cluster.publicIp');
    expect(sandbox.resources('kafka-cluster')).toHaveLength(clustersBefore);
    expect(p.publicAddress).toBeNull();
  } else {
    expect(p.state).toBe('SUCCEEDED');
    expect(p.kafkaCluster.publicIp).toBe(ipAddress.address);
    expect(whiteHosts(gw).at(-1)).toBe(ipAddress.address);
    const field = addressField ?? (mode.shape.id === 'data.id' ? `data.${mode.shape.address}` : mode.shape.address);
    expect(p.publicAddress).toEqual({
      address: ipAddress.address,
      source: 'IP_ADDRESS_RESPONSE',
      responseField: field,
      ipAddressId: ipAddress.id,
    });
  }

  // A VM provisioning links the created ids (natIpId is the IP's id, not its address): it succeeds in every shape.
  const vm = await gw.graphql(PROVISION_VM, {
    input: {
      project: { name: 'vm-shapes' },
      network: { title: 'n' },
      subnet: { title: 's', cidr: '10.61.0.0/24' },
      ipAddress: { title: 'ip' },
      virtualMachine: {
        title: 'vm',
        instanceType: 'C2_MEDIUM',
        bootDisk: { sizeGb: 20, image: 'UBUNTU_22_04' },
        users: [{ name: 'ops', sshKeys: [SSH_KEY] }],
      },
    },
  });
  expect(vm.errors, JSON.stringify(vm.errors)).toBeUndefined();
  await gw.gateway.services.provisioning.idle();
  const vmStatus = (await gw.graphql(STATUS, { id: vm.data!.provisionVirtualMachine.provisioning.id })).data!
    .provisioning;
  expect(vmStatus.state).toBe('SUCCEEDED');
  const vmId = vmStatus.steps.find((s: { name: string }) => s.name === 'virtualMachine').resourceId;
  const createdVm = sandbox.resources('virtual-machine').find((r) => r.id === vmId)!;
  const ipOfVm = vmStatus.steps.find((s: { name: string }) => s.name === 'ipAddress').resourceId;
  expect((createdVm.spec.networkInterfaces as Array<{ natIpId: string }>)[0]!.natIpId).toBe(ipOfVm);
}

describe('the cloud flows in every response shape of the sandbox', () => {
  it.each(CLOUD_SHAPE_MODES.map((m) => [m.name, m] as const))(
    '%s: ids, token and public address are read, or the provisioning fails saying what is missing',
    async (_name, mode) => {
      await runCloudFlows(mode);
    },
  );

  // Shapes beyond the gateway's guesses (a name it does not guess, nesting, arrays): every flow passes once the
  // *_PATH variables name them (docs/decisions/042); without them see test/cloud/unreadable-created-id.test.ts.
  it.each([
    [
      'uuid+iamToken+addresses.0.ip',
      { CLOUD_CREATED_ID_PATH: 'uuid', CLOUD_TOKEN_PATH: 'iamToken', CLOUD_IP_ADDRESS_PATH: 'addresses.0.ip' },
    ],
    [
      'resource.uuid+auth.iamToken+externalAddress',
      {
        CLOUD_CREATED_ID_PATH: 'resource.uuid',
        CLOUD_TOKEN_PATH: 'auth.iamToken',
        CLOUD_IP_ADDRESS_PATH: 'externalAddress',
      },
    ],
    [
      'items.0.id+iamToken+addresses.0.ip',
      {
        CLOUD_CREATED_ID_PATH: 'items.0.id',
        CLOUD_TOKEN_PATH: 'iamToken',
        CLOUD_IP_ADDRESS_PATH: 'items.0.addresses.0.ip',
      },
    ],
  ])(
    '%s: with the *_PATH variables, ids, token and public address are read at the configured paths',
    async (name, env) => {
      await runCloudFlows(cloudShapeByName(name)!, env, env.CLOUD_IP_ADDRESS_PATH);
    },
  );

  it('covers every id placement, token field and address field between the modes', () => {
    expect(new Set(CLOUD_SHAPE_MODES.map((m) => m.shape.id))).toEqual(
      new Set(['id', 'serviceId', 'data.id', 'metadata.id']),
    );
    expect(new Set(CLOUD_SHAPE_MODES.map((m) => m.shape.token))).toEqual(
      new Set(['access_token', 'accessToken', 'token']),
    );
    expect(new Set(CLOUD_SHAPE_MODES.map((m) => m.shape.address))).toEqual(
      new Set(['address', 'ipAddress', 'ip_address', 'ip', 'publicIp', 'absent']),
    );
  });

  it('passes in a random shape too, whose seed is printed so that a failure can be repeated', async () => {
    const seed = Math.floor(Math.random() * 0x100000000);
    const mode = randomCloudShape(seed);
    console.log(
      `cloud sandbox random shape ${mode.name} (SANDBOX_CLOUD_SHAPE=random SANDBOX_CLOUD_SHAPE_SEED=${seed})`,
    );
    await runCloudFlows(mode);
  });

  it('prints the shape and seed of SANDBOX_CLOUD_SHAPE=random at start-up, and the same seed gives the same shape', async () => {
    const gw = await gateway({ SANDBOX_CLOUD_SHAPE: 'random', SANDBOX_CLOUD_SHAPE_SEED: '12345' });
    const expected = randomCloudShape(12345);
    expect(gw.gateway.sandbox.cloud!.responseShape).toEqual(expected.shape);
    expect(gw.logs()).toContain(`SANDBOX_CLOUD_SHAPE_SEED=12345`);
    expect(gw.logs()).toContain(expected.name);
    const unseeded = await gateway({ SANDBOX_CLOUD_SHAPE: 'random' });
    expect(gw.logs()).toMatch(/random shape/);
    expect(unseeded.logs()).toMatch(/SANDBOX_CLOUD_SHAPE_SEED=\d+ repeats it/);
  });
});

describe('the public address of a provisioned Kafka cluster', () => {
  const absent = CLOUD_SHAPE_MODES.find((m) => m.shape.address === 'absent')!;

  it('uses the address the caller gives, and records that the caller gave it', async () => {
    const gw = await gateway({ SANDBOX_CLOUD_SHAPE: absent.name });
    const p = await provision(gw, kafkaInput({ publicIp: '198.51.100.77' }));
    expect(p.state).toBe('SUCCEEDED');
    expect(p.kafkaCluster.publicIp).toBe('198.51.100.77');
    expect(whiteHosts(gw)).toEqual(['198.51.100.77']);
    const ipId = p.steps.find((s: { name: string }) => s.name === 'ipAddress').resourceId;
    expect(p.publicAddress).toEqual({
      address: '198.51.100.77',
      source: 'CALLER',
      responseField: null,
      ipAddressId: ipId,
    });
  });

  it('refuses a reused IP address whose address the gateway does not know, before creating anything', async () => {
    const gw = await gateway();
    const res = await gw.graphql(PROVISION_KAFKA, {
      input: { ...kafkaInput(), ipAddress: undefined, ipAddressId: randomUUID() },
    });
    expect(res.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'input.cluster.publicIp' });
    expect(res.errors![0]!.message).toMatch(/white_host is missing: IP address .* is not in the gateway's ledger/);
    expect(gw.gateway.sandbox.cloud!.requests).toHaveLength(0);
  });

  it('creates a private cluster, without white_host and without a public address, when no IP address is asked for', async () => {
    const gw = await gateway({ SANDBOX_CLOUD_SHAPE: absent.name });
    const p = await provision(gw, { ...kafkaInput(), ipAddress: undefined });
    expect(p.state).toBe('SUCCEEDED');
    expect(p.steps.find((s: { name: string }) => s.name === 'ipAddress').state).toBe('SKIPPED');
    expect(whiteHosts(gw)).toEqual([undefined]);
    expect(p.publicAddress).toBeNull();
  });
});
