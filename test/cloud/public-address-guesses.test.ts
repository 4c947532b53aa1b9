import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';

import { M } from '../helpers/cloud.js';
import { gatewaysPerTest } from '../helpers/gateway.js';

// Spec, Kafka cluster: white_host is a "public IPv4 address". The IP creation answer is not shown, so the gateway
// guesses the field its address is in (docs/decisions/015): a guess that holds a private address (the subnet's side of
// the NAT) holds no public one, and the next guess is read, as a guess of the created id that holds none is skipped.

const gateway = gatewaysPerTest();
const STATUS = `query($id: ID!) {
  provisioning(id: $id) {
    state error { code message }
    publicAddress { address source responseField }
  }
}`;

describe('the public address read from an IP address creation answer', () => {
  it('skips a field that holds a private address and reads the public one beside it', async () => {
    const gw = await gateway();
    const sandbox = gw.gateway.sandbox.cloud!;
    // The IP answer names the private address first (`address`), and the public one under `publicIp`.
    const privateFirst = {
      alter: (body: unknown) => {
        const b = body as Record<string, unknown>;
        return typeof b.address === 'string' ? { ...b, address: '10.61.0.9', publicIp: b.address } : b;
      },
    };
    sandbox.faults.enqueueFor('/ocs/v1/services', privateFirst, privateFirst, privateFirst);
    const res = await gw.graphql(M.provisionKafka, {
      input: {
        project: { name: 'nat' },
        network: { title: 'net' },
        subnet: { title: 'sub', cidr: '10.61.0.0/24' },
        ipAddress: { title: 'public' },
        cluster: { title: 'kafka', instanceType: 'C2_MEDIUM' },
      },
      key: randomUUID(),
    });
    expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
    await gw.gateway.services.provisioning.idle();
    const status = await gw.graphql(STATUS, { id: res.data!.provisionKafkaCluster.provisioning.id });
    expect(status.data!.provisioning, JSON.stringify(status.data)).toMatchObject({
      state: 'SUCCEEDED',
      publicAddress: { source: 'IP_ADDRESS_RESPONSE', responseField: 'publicIp' },
    });
    const address = status.data!.provisioning.publicAddress.address as string;
    expect(address).not.toBe('10.61.0.9');
    const cluster = sandbox.resources('kafka-cluster')[0]!.spec['vendor.extensions.kafka'] as { white_host?: string };
    expect(cluster.white_host).toBe(address);
  });
});
