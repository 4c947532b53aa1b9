import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';

import { scrubResponse } from '../../src/cloud/wire.js';
import { cloudShapeByName } from '../../src/sandbox/cloud-shapes.js';
import { SANDBOX_SERVICE_ACCOUNT_TOKEN, startCloudSandbox, type CloudSandbox } from '../../src/sandbox/cloud.js';
import { createChain, M, ok, SSH_KEY, type Chain } from '../helpers/cloud.js';
import { gatewaysPerTest, tempDataDir } from '../helpers/gateway.js';

// Spec, Resources: "Identifiers of created resources ... are taken from the creation responses and reused". A password
// the request sent is masked where the kept answer quotes it, but the id is the upstream's, read as it answered it: a
// password that the id happens to contain (any text is a password: "-" is in every UUID) must not change the id read.

const gateway = gatewaysPerTest();

describe('the created id of a creation that sent a password', () => {
  it('is the id the cloud answered for a Kafka user, even when the id contains the password', async () => {
    const gw = await gateway();
    const sandbox = gw.gateway.sandbox.cloud!;
    const chain = await createChain(gw);
    const user = (
      await ok(gw, M.user, {
        input: { projectId: chain.projectId, clusterId: chain.clusterId, name: 'dash', password: '-' },
      })
    ).kafkaUser;
    const created = sandbox
      .resources('kafka-user')
      .find((r) => (r.spec['vendor.extensions.user'] as any).name === 'dash');
    expect(user.id).toBe(created!.id);
    const read = await gw.graphql(`query($id: ID!) { node(id: $id) { id } }`, { id: created!.id });
    expect(read.errors).toBeUndefined();
  });

  it('is the id the cloud answered for a virtual machine whose user password the id contains', async () => {
    const gw = await gateway();
    const sandbox = gw.gateway.sandbox.cloud!;
    const chain = await createChain(gw);
    const vm = (
      await ok(gw, M.vm, {
        input: {
          projectId: chain.projectId,
          title: 'vm-4',
          instanceType: 'C2_MEDIUM',
          bootDisk: { sizeGb: 20, image: 'UBUNTU_22_04' },
          // The version digit of every UUIDv4 (RFC 9562), as the sandbox's ids are.
          users: [{ name: 'ops', password: '4', sshKeys: [SSH_KEY] }],
          networkInterfaces: [{ networkId: chain.networkId, subnetId: chain.subnetId, ipAddressId: chain.ipId }],
        },
      })
    ).virtualMachine;
    const created = sandbox.resources('virtual-machine').find((r) => r.title === 'vm-4');
    expect(vm.id).toBe(created!.id);
  });
});

// The id of a kept answer is read again once the operator names its field (CLOUD_CREATED_ID_PATH, after a restart):
// from the answer as it was kept, passwords masked. It must still be the id the upstream answered.
describe('the created id read again from a kept answer, once CLOUD_CREATED_ID_PATH names its field', () => {
  const sandboxes: CloudSandbox[] = [];
  afterEach(async () => {
    await Promise.all(sandboxes.splice(0).map((s) => s.close()));
  });
  const API_KEY = 'reread-beside-a-password-app';
  /** A gateway on `sandbox` as its real cloud API (the other upstreams simulated in-process), data in `dataDir`. */
  const gatewayOn = (sandbox: CloudSandbox, dataDir: string, env: Record<string, string> = {}) =>
    gateway({
      DATA_DIR: dataDir,
      CLOUD_API_URL: sandbox.url,
      CLOUD_API_TOKEN: SANDBOX_SERVICE_ACCOUNT_TOKEN,
      SANDBOX_UPSTREAMS: 'identification,verification,rfm,mobile-id',
      GATEWAY_API_KEYS: API_KEY,
      ...env,
    });

  it('is kept whole in the masked answer, but a password quoted in a text, or a UUID that is a password, is masked', () => {
    const id = '768e95b2-3a1f-4473-947f-A5C2E3F21671';
    const uuidPassword = '0f8c2a4e-6b1d-4c3e-9a7f-5d2b8e1c0a93';
    const answer = {
      uuid: id,
      note: 'user ops-4 made with password 4-4',
      echoed: [uuidPassword.toUpperCase(), `pw ${uuidPassword}`],
    };
    expect(
      scrubResponse(answer, { users: [{ password: '4-4' }, { password: '-' }, { password: uuidPassword }] }),
    ).toEqual({
      uuid: id,
      note: 'user ops***4 made with password ***',
      echoed: ['***', 'pw ***'],
    });
  });

  it.each([
    {
      password: '-',
      kind: 'kafka-user' as const,
      ledgerKind: 'kafka_user',
      mutation: M.user,
      payload: 'kafkaUser',
      input: (chain: Chain) => ({
        projectId: chain.projectId,
        clusterId: chain.clusterId,
        name: 'kept-dash',
        password: '-',
      }),
    },
    {
      // The version digit of every UUIDv4 (RFC 9562), as the sandbox's ids are.
      password: '4',
      kind: 'virtual-machine' as const,
      ledgerKind: 'virtual_machine',
      mutation: M.vm,
      payload: 'virtualMachine',
      input: (chain: Chain) => ({
        projectId: chain.projectId,
        title: 'kept-vm-4',
        instanceType: 'C2_MEDIUM',
        bootDisk: { sizeGb: 20, image: 'UBUNTU_22_04' },
        users: [{ name: 'ops', password: '4', sshKeys: [SSH_KEY] }],
        networkInterfaces: [{ networkId: chain.networkId, subnetId: chain.subnetId, ipAddressId: chain.ipId }],
      }),
    },
  ])('is the upstream id of a $kind sent with the password $password', async (c) => {
    const sandbox = await startCloudSandbox({ responseShape: cloudShapeByName('uuid+access_token+address')!.shape });
    sandboxes.push(sandbox);
    const dataDir = tempDataDir();
    const key = randomUUID();

    // The parents, created while the path is configured.
    const first = await gatewayOn(sandbox, dataDir, { CLOUD_CREATED_ID_PATH: 'uuid' });
    const chain = await createChain(first, API_KEY);
    await first.close();

    // The creation, while the gateway reads the id with its guesses only: kept with the key.
    const guessing = await gatewayOn(sandbox, dataDir);
    const kept = await guessing.graphql(c.mutation, { input: c.input(chain), key }, { key: API_KEY });
    expect(kept.errors?.[0]?.extensions?.code, JSON.stringify(kept.errors)).toBe('UPSTREAM_ANSWER_INCOMPLETE');
    await guessing.close();

    const created = sandbox.resources(c.kind).at(-1)!;
    expect(created.id).toContain(c.password);
    const configured = await gatewayOn(sandbox, dataDir, { CLOUD_CREATED_ID_PATH: 'uuid' });
    const payload = await ok(configured, c.mutation, { input: c.input(chain), key }, API_KEY);
    expect(payload.replayed).toBe(true);
    expect(payload[c.payload].id).toBe(created.id);
    expect((await configured.gateway.services.ledger.get(created.id))?.kind).toBe(c.ledgerKind);
  });
});
