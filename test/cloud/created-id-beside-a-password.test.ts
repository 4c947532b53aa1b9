import { describe, expect, it } from 'vitest';

import { createChain, M, ok, SSH_KEY } from '../helpers/cloud.js';
import { gatewaysPerTest } from '../helpers/gateway.js';

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
