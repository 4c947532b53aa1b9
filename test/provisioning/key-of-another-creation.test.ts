// One idempotency key names one creation of an app: a key a plain creation used is refused to a composite
// provisioning, and the converse, with IDEMPOTENCY_KEY_REUSED and nothing sent upstream, whichever came first.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';

import { M, upstreamCreations } from '../helpers/cloud.js';
import { gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';

const gateway = gatewaysPerTest();

const PROVISION_KAFKA = `mutation($input: ProvisionKafkaClusterInput!, $key: UUID) {
  provisionKafkaCluster(input: $input, idempotencyKey: $key) { provisioning { id state } idempotencyKey replayed }
}`;

const kafkaInput = {
  project: { name: 'composite' },
  network: { title: 'net' },
  subnet: { title: 'sub', cidr: '10.50.0.0/24' },
  cluster: { title: 'kafka', instanceType: 'C2_MEDIUM' },
};

const creations = (gw: TestGateway) => upstreamCreations(gw).length;

describe('a key used by a plain creation and by a composite provisioning', () => {
  it('a provisioning with the key of a createProject is IDEMPOTENCY_KEY_REUSED and creates nothing', async () => {
    const gw = await gateway();
    const key = randomUUID();
    const project = await gw.graphql(M.project, { input: { name: 'composite' }, key });
    expect(project.errors).toBeUndefined();
    const before = creations(gw);
    const provisioning = await gw.graphql(PROVISION_KAFKA, { input: kafkaInput, key });
    await gw.gateway.services.provisioning.idle();
    expect(provisioning.errors?.[0]?.extensions?.code).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(creations(gw)).toBe(before);
    // The first creation still replays.
    expect((await gw.graphql(M.project, { input: { name: 'composite' }, key })).data!.createProject.replayed).toBe(
      true,
    );
  });

  it('a createProject with the key of a provisioning is IDEMPOTENCY_KEY_REUSED and creates nothing', async () => {
    const gw = await gateway();
    const key = randomUUID();
    const provisioning = await gw.graphql(PROVISION_KAFKA, { input: kafkaInput, key });
    expect(provisioning.errors).toBeUndefined();
    await gw.gateway.services.provisioning.idle();
    const before = creations(gw);
    const project = await gw.graphql(M.project, { input: { name: 'composite' }, key });
    expect(project.errors?.[0]?.extensions?.code).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(creations(gw)).toBe(before);
    // The provisioning still replays.
    const again = await gw.graphql(PROVISION_KAFKA, { input: kafkaInput, key });
    expect(again.errors).toBeUndefined();
    expect(again.data!.provisionKafkaCluster.replayed).toBe(true);
  });
});
