// Rate limits count what is really created: a composite provisioning is charged one creation point per upstream
// creation its plan will make, refused whole before its first step when the bucket cannot cover it, and a resume
// is charged only for what is still to create.
import { randomUUID } from 'node:crypto';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';

import { gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';

const start = gatewaysPerTest();
const KEY = 'composite-charge-app-key-1234';

const PROVISION = `mutation($input: ProvisionKafkaClusterInput!, $key: UUID) {
  provisionKafkaCluster(input: $input, idempotencyKey: $key) { provisioning { id state } replayed }
}`;
const STATE = `query($id: ID!) { provisioning(id: $id) { state steps { name state } } }`;

/** 5 placement and cluster steps, `topics` topics and 2 users: that many upstream creations. */
const input = (topics: number) => ({
  project: { name: 'charged' },
  network: { title: 'net' },
  subnet: { title: 'sub', cidr: '10.60.0.0/24' },
  ipAddress: { title: 'public' },
  cluster: { title: 'kafka', instanceType: 'C2_MEDIUM' },
  topics: Array.from({ length: topics }, (_, i) => ({ name: `t${i}`, partitions: 1, replicationFactor: 1 })),
  users: [
    { name: 'svc-a', password: 'Charged-secret-1' },
    { name: 'svc-b', password: 'Charged-secret-2' },
  ],
});

/** Upstream creations the cloud sandbox received (every POST: projects and resources). */
const creationsUpstream = (gw: TestGateway) =>
  gw.gateway.sandbox.cloud!.requests.filter((r) => r.method === 'POST' && !r.path.includes('/tokens')).length;

async function pointsAllowed(gw: TestGateway): Promise<number> {
  const text = await (await request(`${gw.url}/metrics`)).body.text();
  const m = /gateway_rate_limit_points_total\{app="[^"]+",bucket="creations",outcome="allowed"\} (\d+)/.exec(text);
  return m ? Number(m[1]) : 0;
}

async function settled(
  gw: TestGateway,
  id: string,
): Promise<{ state: string; steps: Array<{ name: string; state: string }> }> {
  await gw.gateway.services.provisioning.idle();
  return (await gw.graphql(STATE, { id }, { key: KEY })).data!.provisioning;
}

describe('rate limits of composite provisionings', () => {
  it('charges one creation point per upstream creation the provisioning makes (60 topics: 67 points, 67 creations)', async () => {
    const gw = await start({ GATEWAY_API_KEYS: KEY, RATE_LIMIT_CREATIONS: '100/1h', PROVISIONING_MAX_TOPICS: '100' });
    const res = await gw.graphql(PROVISION, { input: input(60), key: randomUUID() }, { key: KEY });
    expect(res.errors).toBeUndefined();
    expect((await settled(gw, res.data!.provisionKafkaCluster.provisioning.id)).state).toBe('SUCCEEDED');
    expect(creationsUpstream(gw)).toBe(67);
    expect(await pointsAllowed(gw)).toBe(67);
  });

  it('refuses a provisioning whole with RATE_LIMITED before its first step when the bucket cannot cover it', async () => {
    const gw = await start({ GATEWAY_API_KEYS: KEY, RATE_LIMIT_CREATIONS: '10/1h' });
    const res = await gw.graphql(PROVISION, { input: input(4), key: randomUUID() }, { key: KEY });
    expect(res.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'creations' });
    expect(res.errors![0]!.extensions!.retryAfter).toBeGreaterThanOrEqual(1);
    expect(creationsUpstream(gw)).toBe(0);
    expect(await gw.gateway.services.store.db.selectFrom('provisionings').select('id').execute()).toEqual([]);
  });

  it('a resume after a failure is charged only for the steps still to create', async () => {
    const gw = await start({ GATEWAY_API_KEYS: KEY, RATE_LIMIT_CREATIONS: '100/1h', UPSTREAM_MAX_RETRIES: '0' });
    const sandbox = gw.gateway.sandbox.cloud!;
    // The cluster step (after project, network, subnet and IP address) fails once.
    sandbox.faults.enqueueFor(
      (path, method) => method === 'POST' && path === '/ocs/v1/services' && sandbox.resources().length === 3,
      '503',
    );
    const key = randomUUID();
    const first = await gw.graphql(PROVISION, { input: input(3), key }, { key: KEY });
    const id = first.data!.provisionKafkaCluster.provisioning.id as string;
    expect((await settled(gw, id)).state).toBe('FAILED');
    // Charged for all 10 creations up front (5 + 3 topics + 2 users), though only 4 were made.
    expect(await pointsAllowed(gw)).toBe(10);

    const again = await gw.graphql(PROVISION, { input: input(3), key }, { key: KEY });
    expect(again.data!.provisionKafkaCluster.replayed).toBe(false);
    expect((await settled(gw, id)).state).toBe('SUCCEEDED');
    // The resume: the cluster, 3 topics and 2 users.
    expect(await pointsAllowed(gw)).toBe(16);

    // A replay of the finished provisioning is charged nothing.
    expect(
      (await gw.graphql(PROVISION, { input: input(3), key }, { key: KEY })).data!.provisionKafkaCluster.replayed,
    ).toBe(true);
    expect(await pointsAllowed(gw)).toBe(16);
  });

  it('a resume whose topic and user names are written with other spaces around them is charged only for the rest', async () => {
    const gw = await start({ GATEWAY_API_KEYS: KEY, RATE_LIMIT_CREATIONS: '100/1h', UPSTREAM_MAX_RETRIES: '0' });
    const sandbox = gw.gateway.sandbox.cloud!;
    // The last user (after the 4 placement steps, the cluster, 3 topics and the first user) fails once.
    sandbox.faults.enqueueFor(
      (path, method) => method === 'POST' && path === '/ocs/v1/services' && sandbox.resources().length === 8,
      '503',
    );
    const spaced = input(3);
    spaced.topics = spaced.topics.map((t) => ({ ...t, name: ` ${t.name} ` }));
    spaced.users = spaced.users.map((u) => ({ ...u, name: `${u.name} ` }));
    const key = randomUUID();
    const first = await gw.graphql(PROVISION, { input: spaced, key }, { key: KEY });
    const id = first.data!.provisionKafkaCluster.provisioning.id as string;
    expect((await settled(gw, id)).state).toBe('FAILED');
    expect(await pointsAllowed(gw)).toBe(10);

    // The same request, its names as sent upstream (trimmed): the same provisioning, resumed.
    const again = await gw.graphql(PROVISION, { input: input(3), key }, { key: KEY });
    expect(again.data!.provisionKafkaCluster.replayed).toBe(false);
    expect((await settled(gw, id)).state).toBe('SUCCEEDED');
    // The resume: the last user alone.
    expect(await pointsAllowed(gw)).toBe(11);
    expect(creationsUpstream(gw)).toBe(11);
  });
});
