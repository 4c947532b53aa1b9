import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';

import { createChain, type Chain } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { storeSnapshot } from '../helpers/store.js';

const PROVISION_KAFKA = `mutation($input: ProvisionKafkaClusterInput!, $key: UUID) {
  provisionKafkaCluster(input: $input, idempotencyKey: $key) { provisioning { id state } }
}`;

/**
 * Names are trimmed before they are sent, so "orders" and "orders " are one topic upstream: listed twice, they are
 * refused before anything is created. They used to pass, the cluster and the first topic were created, and the second
 * topic failed with the upstream's 409 on every resume.
 */
describe('provisionKafkaCluster: topics and users listed twice are compared as sent (trimmed)', () => {
  let gw: TestGateway;
  let chain: Chain;
  beforeAll(async () => {
    gw = await startTestGateway();
    chain = await createChain(gw);
  });
  afterAll(() => gw.close());
  beforeEach(() => gw.gateway.sandbox.cloud!.clearRequests());

  async function refusedWhole(extra: Record<string, unknown>, field: string, message: string) {
    const before = await storeSnapshot(gw);
    const input = {
      projectId: chain.projectId,
      networkId: chain.networkId,
      subnetId: chain.subnetId,
      cluster: { title: 'kafka-ws', instanceType: 'C2_MEDIUM' },
      ...extra,
    };
    const res = await gw.graphql(PROVISION_KAFKA, { input, key: randomUUID() });
    await gw.gateway.services.provisioning.idle();
    expect(res.data, JSON.stringify(res.data)).toBeNull();
    expect(res.errors).toHaveLength(1);
    expect(res.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field });
    expect(res.errors![0]!.message).toBe(`${field}: ${message}`);
    expect(gw.gateway.sandbox.cloud!.requests).toHaveLength(0);
    expect(await storeSnapshot(gw)).toEqual(before);
  }

  it('two topics whose names differ only by surrounding whitespace', async () => {
    await refusedWhole(
      { topics: [{ name: 'orders' }, { name: 'orders ' }] },
      'input.topics',
      'topic orders is listed twice',
    );
    await refusedWhole(
      { topics: [{ name: '\tpayments' }, { name: 'payments\n' }] },
      'input.topics',
      'topic payments is listed twice',
    );
  });

  it('two users whose names differ only by surrounding whitespace', async () => {
    await refusedWhole(
      {
        users: [
          { name: ' svc', password: 'Pr0vision-secret' },
          { name: 'svc', password: 'Other-secret-1' },
        ],
      },
      'input.users',
      'user svc is listed twice',
    );
  });
});
