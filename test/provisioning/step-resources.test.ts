import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { appsFile, startTestGateway, type TestGateway } from '../helpers/gateway.js';

const IDENTIFY = `mutation { createIdentification(input: { workflowId: "wf-steps" }) { identification { id } } }`;
const PROVISION = `mutation($input: ProvisionKafkaClusterInput!) {
  provisionKafkaCluster(input: $input) { provisioning { id } }
}`;
const READ = `query($p: ID!, $i: ID!) {
  provisioning(id: $p) { project { id } steps { name state resourceId resource { __typename id } } }
  node(id: $i) { id }
}`;

// A step's resource is the cloud resource the step created or reused. An id given to reuse that names something else
// the app created (an identification) is not shown through the step: it would read, with `cloud:read`, what `node`
// answers as unknown without `identity:read`.
describe('a provisioning step shows only a cloud resource', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({
      GATEWAY_APPS_FILE: appsFile('step-resources-', [
        { name: 'builder', scopes: ['cloud:read', 'cloud:write', 'identity:write'], key: 'builder-key' },
      ]),
    });
  });
  afterAll(() => t.close());

  it('answers a reused id that names an identification as no resource, as node does', async () => {
    const made = await t.graphql(IDENTIFY, {}, { key: 'builder-key' });
    expect(made.errors).toBeUndefined();
    const identification = made.data!.createIdentification.identification.id as string;
    const started = await t.graphql(
      PROVISION,
      {
        input: {
          projectId: identification,
          network: { title: 'net' },
          subnet: { title: 'sub', cidr: '10.77.0.0/24' },
          cluster: { title: 'k', instanceType: 'C2_MEDIUM' },
        },
      },
      { key: 'builder-key' },
    );
    expect(started.errors).toBeUndefined();
    await t.gateway.services.provisioning.idle();
    const res = await t.graphql(
      READ,
      { p: started.data!.provisionKafkaCluster.provisioning.id, i: identification },
      { key: 'builder-key' },
    );
    expect(res.errors).toBeUndefined();
    expect(res.data!.node).toBeNull();
    expect(res.data!.provisioning.project).toBeNull();
    const step = res.data!.provisioning.steps.find((s: { name: string }) => s.name === 'project');
    expect(step).toMatchObject({ state: 'REUSED', resourceId: identification, resource: null });
  });
});
