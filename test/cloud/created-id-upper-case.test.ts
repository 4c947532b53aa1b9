import { describe, expect, it } from 'vitest';

import { M, ok } from '../helpers/cloud.js';
import { gatewaysPerTest } from '../helpers/gateway.js';

// Spec, Resources: the ids of created resources are UUIDs, reused as projectId, targetId, network_id, subnetwork_id.
// A UUID is the same id in either letter case (RFC 9562), and the gateway takes every UUID an app sends in lower case:
// an upstream that writes its ids in capitals must not leave the ledger holding ids no later input can name.

const gateway = gatewaysPerTest();
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;
/** The answer as an upstream that writes UUIDs in capitals sends it. */
const inCapitals = { alter: (body: unknown) => JSON.parse(JSON.stringify(body).replace(UUID, (u) => u.toUpperCase())) };

describe('a created id the cloud answers in capital letters', () => {
  it('is recorded as the same UUID the app sends back, so later creations find their parents in the ledger', async () => {
    const gw = await gateway();
    const sandbox = gw.gateway.sandbox.cloud!;
    sandbox.faults.enqueueFor('/apis/projects/public/v4/projects', inCapitals);
    const project = (await ok(gw, M.project, { input: { name: 'caps', description: '' } })).project;
    expect(project.id).toBe(sandbox.projects()[0]!.id);
    const projectId = project.id;

    sandbox.faults.enqueueFor('/ocs/v1/services', inCapitals);
    const networkId = (await ok(gw, M.network, { input: { projectId, title: 'net' } })).network.id;
    sandbox.faults.enqueueFor('/ocs/v1/services', inCapitals);
    const subnet = (await ok(gw, M.subnet, { input: { projectId, networkId, title: 'sub', cidr: '10.70.0.0/24' } }))
      .subnet;
    expect([networkId, subnet.id]).toEqual(sandbox.resources().map((r) => r.id));

    // The cluster's network and CIDR come from the ledger's subnet (docs/contract.md): found under the id the app has.
    const cluster = (
      await ok(gw, M.cluster, { input: { projectId, title: 'kafka', instanceType: 'C2_MEDIUM', subnetId: subnet.id } })
    ).kafkaCluster;
    expect(cluster).toMatchObject({ networkId, subnetCidr: '10.70.0.0/24' });
    const listed = await gw.graphql('{ projects { id networks { id subnets { id } } } }', {});
    expect(listed.errors).toBeUndefined();
    expect(listed.data!.projects).toEqual([
      { id: projectId, networks: [{ id: networkId, subnets: [{ id: subnet.id }] }] },
    ]);
  });
});
