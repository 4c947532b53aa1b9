import { afterAll, beforeAll, beforeEach, describe, it } from 'vitest';

import { createChain, M, refusedBeforeTheWire, type Chain } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

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

  const refusedWhole = (extra: Record<string, unknown>, field: string, message: string) =>
    refusedBeforeTheWire(
      gw,
      M.provisionKafka,
      {
        projectId: chain.projectId,
        networkId: chain.networkId,
        subnetId: chain.subnetId,
        cluster: { title: 'kafka-ws', instanceType: 'C2_MEDIUM' },
        ...extra,
      },
      field,
      message,
    );

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
