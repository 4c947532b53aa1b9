// A gateway on SQLite killed (SIGKILL) while a provisioning's step is at the upstream, and started again on the same
// DATA_DIR: the provisioning reads RUNNING until the next call with its key resumes it after IDEMPOTENCY_TAKEOVER; the
// step is sent again under its key, every resource is created once, a subscriber that came after the restart sees it
// end, and another input under the key is refused. The cloud simulator outlives both processes, as a real one would.
import { randomBytes, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';

import { PROVISIONING_EVENT_KIND } from '../../src/provisioning/records.js';
import { SANDBOX_SERVICE_ACCOUNT_TOKEN, startCloudSandbox, type CloudSandbox } from '../../src/sandbox/cloud.js';
import { startTestGateway, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import { wsClient } from '../helpers/mobile-id.js';
import { gatewayProcesses } from '../helpers/process.js';
import { waitFor, waitForAbandonedProvisioning, waitForSubscribers } from '../helpers/wait.js';

const startProcess = gatewayProcesses();
const PROVISION = `mutation($input: ProvisionKafkaClusterInput!, $key: UUID) {
  provisionKafkaCluster(input: $input, idempotencyKey: $key) { provisioning { id state steps { name state } } replayed }
}`;
const STATE = `query($id: ID!) { provisioning(id: $id) { state steps { name state resourceId } } }`;
/** IDEMPOTENCY_TAKEOVER: a RUNNING provisioning untouched this long was abandoned; a call with its key resumes it. */
const TAKEOVER_MS = 1_000;

describe('a provisioning whose SQLite gateway was killed mid-step', () => {
  let cloud: CloudSandbox;
  const gws: TestGateway[] = [];
  afterEach(async () => {
    await Promise.all(gws.splice(0).map((g) => g.close()));
    await cloud?.close();
  });
  it('is resumed by its key after the restart: each resource once, the subscriber sees it end', async () => {
    cloud = await startCloudSandbox();
    const dataDir = tempDataDir();
    const env = {
      DATA_DIR: dataDir,
      TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
      CLOUD_API_URL: cloud.url,
      CLOUD_API_TOKEN: SANDBOX_SERVICE_ACCOUNT_TOKEN,
      SANDBOX_UPSTREAMS: 'identification,verification,rfm,mobile-id',
      IDEMPOTENCY_TAKEOVER: `${TAKEOVER_MS}ms`,
      GATEWAY_API_KEYS: 'k1',
    };
    const a = await startProcess({ ...env, UPSTREAM_TIMEOUT: '120s' });
    // the subnet step hangs
    cloud.faults.enqueueFor(
      (p, m) => m === 'POST' && p === '/ocs/v1/services' && cloud.resources().length === 1,
      'timeout',
    );
    const key = randomUUID();
    const input = {
      project: { name: `r-${key}` },
      network: { title: 'net' },
      subnet: { title: 'sub', cidr: '10.81.0.0/24' },
      cluster: { title: 'k', instanceType: 'C2_MEDIUM' },
      topics: [{ name: 't' }],
    };
    const started = await request(`${a.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer k1' },
      body: JSON.stringify({ query: PROVISION, variables: { input, key } }),
    }).then((r) => r.body.json() as Promise<any>);
    const id = started.data.provisionKafkaCluster.provisioning.id;
    await waitFor(
      () => cloud.requests.filter((r) => r.method === 'POST' && !r.path.startsWith('/iam')).length === 3,
      20_000,
      'subnet',
    );
    a.child.kill('SIGKILL');
    await once(a.child, 'exit');
    const b = await startTestGateway(env);
    gws.push(b);
    const early = await b.graphql(STATE, { id }, { key: 'k1' });
    expect(early.data!.provisioning.state).toBe('RUNNING');
    expect(early.data!.provisioning.steps.find((s: { name: string }) => s.name === 'subnet').state).toBe('RUNNING');
    const client = wsClient(b, { key: 'k1' });
    const states: string[] = [];
    const sub = (async () => {
      for await (const msg of client.iterate<any>({
        query: `subscription($id: ID!) { provisioningProgress(id: $id) { state steps { name state } } }`,
        variables: { id },
      }))
        states.push(
          `${msg.data.provisioningProgress.state}:${msg.data.provisioningProgress.steps.map((s: any) => s.state[0]).join('')}`,
        );
    })();
    // Awaited below; a failure before then must not leave its rejection (the gateway closing the socket) unhandled.
    sub.catch(() => undefined);
    // The subscriber listens before the resume: it sees the resumed run's states live, up to the end.
    await waitForSubscribers(b, PROVISIONING_EVENT_KIND, id);
    // A's run touched its row every third of IDEMPOTENCY_TAKEOVER until the kill: once the row is older than that (a
    // state of the row, waited for), the app's next call with the key resumes the provisioning, and says so.
    await waitForAbandonedProvisioning(b, id, TAKEOVER_MS);
    const res = await b.graphql(PROVISION, { input, key }, { key: 'k1' });
    expect(res.errors).toBeUndefined();
    const resumed = res.data!.provisionKafkaCluster;
    expect(resumed.replayed, JSON.stringify(resumed)).toBe(false);
    expect(resumed.provisioning.id).toBe(id);
    expect(resumed.provisioning.state).toBe('RUNNING');
    expect(resumed.provisioning.steps.find((s: { name: string }) => s.name === 'subnet').state).toBe('PENDING');
    await b.gateway.services.provisioning.idle();
    await sub;
    await client.dispose();
    expect(states.at(-1)).toBe('SUCCEEDED:DDDSDD');
    const done = await b.graphql(STATE, { id }, { key: 'k1' });
    expect(done.data!.provisioning.state).toBe('SUCCEEDED');
    expect(cloud.projects().filter((p) => p.name === input.project.name)).toHaveLength(1);
    expect(cloud.resources().length).toBe(4);
    const other = await b.graphql(PROVISION, { input: { ...input, topics: [{ name: 'u' }] }, key }, { key: 'k1' });
    expect(other.errors?.[0]?.extensions?.code).toBe('IDEMPOTENCY_KEY_REUSED');
  }, 90_000);
});
