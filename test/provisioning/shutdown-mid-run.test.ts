// A gateway shut down (gateway.close(), what SIGTERM runs) while a composite provisioning's step is at the upstream:
// the step under way finishes and is stored, no further step is sent, and the store closes after it. A gateway started
// again on the same DATA_DIR resumes the provisioning on the next call with its key, once IDEMPOTENCY_TAKEOVER has
// passed (as after a crash): every resource is created once. The cloud simulator outlives both gateways.
import { randomBytes, randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';

import { SANDBOX_SERVICE_ACCOUNT_TOKEN, startCloudSandbox, type CloudSandbox } from '../../src/sandbox/cloud.js';
import { M } from '../helpers/cloud.js';
import { startTestGateway, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import { waitFor, waitForAbandonedProvisioning } from '../helpers/wait.js';

const PROVISION = `mutation($input: ProvisionKafkaClusterInput!, $key: UUID) {
  provisionKafkaCluster(input: $input, idempotencyKey: $key) { provisioning { id state steps { name state } } replayed }
}`;
const STATE = `query($id: ID!) { provisioning(id: $id) { state steps { name state resourceId } } }`;
const TAKEOVER_MS = 1_000;

describe('a provisioning running when the gateway shuts down', () => {
  let cloud: CloudSandbox;
  const gws: TestGateway[] = [];
  afterEach(async () => {
    await Promise.all(gws.splice(0).map((g) => g.close()));
    await cloud?.close();
  });

  it('stops after the step under way, and the next call with its key resumes it on the next start', async () => {
    cloud = await startCloudSandbox();
    const env = {
      DATA_DIR: tempDataDir(),
      TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
      CLOUD_API_URL: cloud.url,
      CLOUD_API_TOKEN: SANDBOX_SERVICE_ACCOUNT_TOKEN,
      SANDBOX_UPSTREAMS: 'identification,verification,rfm,mobile-id',
      IDEMPOTENCY_TAKEOVER: `${TAKEOVER_MS}ms`,
      GATEWAY_API_KEYS: 'k1',
    };
    const a = await startTestGateway(env);
    // A creation first: the cloud token is fetched, so the only request the hold below meets is the project step's.
    const warm = await a.graphql(M.project, { input: { name: 'warm-up' } }, { key: 'k1' });
    expect(warm.errors).toBeUndefined();
    const before = cloud.resources().length;

    const held = cloud.faults.hold();
    const key = randomUUID();
    const input = {
      project: { name: `s-${key}` },
      network: { title: 'net' },
      subnet: { title: 'sub', cidr: '10.82.0.0/24' },
      cluster: { title: 'k', instanceType: 'C2_MEDIUM' },
      topics: [{ name: 't' }],
    };
    const started = await a.graphql(PROVISION, { input, key }, { key: 'k1' });
    expect(started.errors).toBeUndefined();
    const id = started.data!.provisionKafkaCluster.provisioning.id as string;
    await waitFor(() => held.arrived() === 1, 20_000, 'the project step at the upstream');

    const closed = a.close();
    await waitFor(() => !a.gateway.server.listening, 20_000, 'the drain begun');
    held.release();
    await closed;
    // The project step, under way at the shutdown, was created; nothing was sent after it.
    expect(cloud.projects().filter((p) => p.name === input.project.name)).toHaveLength(1);
    expect(cloud.resources().length - before).toBe(0);

    const b = await startTestGateway(env);
    gws.push(b);
    const stopped = await b.graphql(STATE, { id }, { key: 'k1' });
    expect(stopped.data!.provisioning.state).toBe('RUNNING');
    expect(stopped.data!.provisioning.steps.map((s: { state: string }) => s.state)).toEqual([
      'DONE',
      'PENDING',
      'PENDING',
      'PENDING',
      'PENDING',
      'PENDING',
    ]);
    await waitForAbandonedProvisioning(b, id, TAKEOVER_MS);
    const resumed = await b.graphql(PROVISION, { input, key }, { key: 'k1' });
    expect(resumed.errors).toBeUndefined();
    expect(resumed.data!.provisionKafkaCluster.replayed).toBe(false);
    await b.gateway.services.provisioning.idle();
    const done = await b.graphql(STATE, { id }, { key: 'k1' });
    expect(done.data!.provisioning.state).toBe('SUCCEEDED');
    expect(cloud.projects().filter((p) => p.name === input.project.name)).toHaveLength(1);
    expect(cloud.resources().length - before).toBe(4);
  }, 90_000);
});
