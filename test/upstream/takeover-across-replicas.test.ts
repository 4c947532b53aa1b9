import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import {
  PROJECTS_PATH,
  SANDBOX_SERVICE_ACCOUNT_TOKEN,
  startCloudSandbox,
  type CloudSandbox,
} from '../../src/sandbox/cloud.js';
import { M } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { gatewayProcesses } from '../helpers/process.js';
import { waitFor, waitForAbandonedProvisioning } from '../helpers/wait.js';

/**
 * Takeover across replicas (docs/decisions/012): two gateways on one PostgreSQL. The key of a
 * call whose replica crashed is taken over by a call with the same key on the other replica once its lease
 * (IDEMPOTENCY_TAKEOVER, 10 s by default) runs out; a call that is alive but slow renews its lease and is
 * never taken over. The upstream is a cloud simulator shared by both replicas, as a real one would be.
 */
const API_KEY = 'replica-app';
const SCOPE = `key:${createHash('sha256').update(API_KEY).digest('hex').slice(0, 16)}`;
const startProcess = gatewayProcesses();

describe('idempotency keys across replicas on PostgreSQL', () => {
  let pg: TestPostgres;
  let cloud: CloudSandbox;
  const gateways: TestGateway[] = [];
  let env: Record<string, string>;

  beforeAll(async () => {
    pg = await startPostgres();
  }, 120_000);
  afterAll(async () => {
    await pg?.stop();
  });
  afterEach(async () => {
    await Promise.all(gateways.splice(0).map((g) => g.close()));
    await cloud?.close();
  });

  async function setUp(name: string, extra: Record<string, string> = {}) {
    cloud = await startCloudSandbox();
    env = {
      DATABASE_URL: await pg.createDatabase(name),
      TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
      GATEWAY_API_KEYS: API_KEY,
      CLOUD_API_URL: cloud.url,
      CLOUD_API_TOKEN: SANDBOX_SERVICE_ACCOUNT_TOKEN,
      SANDBOX_UPSTREAMS: 'identification,verification,rfm,mobile-id',
      ...extra,
    };
  }
  async function replica(extra: Record<string, string> = {}) {
    const g = await startTestGateway({ ...env, ...extra });
    gateways.push(g);
    return g;
  }
  const pendingRecord = (g: TestGateway, key: string) =>
    g.gateway.services.store.db
      .selectFrom('idempotency_records')
      .select(['state'])
      .where('scope', '=', SCOPE)
      .where('key', '=', key)
      .executeTakeFirst()
      .then((r) => r?.state === 'pending');
  const leaseUntil = (g: TestGateway, key: string) =>
    g.gateway.services.store.db
      .selectFrom('idempotency_records')
      .select(['lease_until'])
      .where('scope', '=', SCOPE)
      .where('key', '=', key)
      .executeTakeFirstOrThrow()
      .then((r) => Number(r.lease_until));
  const projectCalls = () => cloud.requests.filter((r) => r.path === PROJECTS_PATH);

  it.each([
    ['the default IDEMPOTENCY_TAKEOVER (10s)', {}, '20s'],
    ['IDEMPOTENCY_TAKEOVER=2s', { IDEMPOTENCY_TAKEOVER: '2s' }, '8s'],
  ] as const)(
    'with %s, the key of a call whose replica was killed is taken over by the other replica, and one resource is created',
    async (_label, takeover, wait) => {
      await setUp(`takeover_${Object.keys(takeover).length}`, takeover);
      const b = await replica({ IDEMPOTENCY_WAIT: wait });
      const a = await startProcess({ ...env, UPSTREAM_TIMEOUT: '120s' });
      // A's request reaches the upstream and hangs there, unanswered, until A is killed.
      cloud.faults.enqueueFor(PROJECTS_PATH, 'timeout');
      const key = randomUUID();
      const input = { name: `takeover-${key}` };
      const lost = request(`${a.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
        body: JSON.stringify({ query: M.project, variables: { input, key } }),
      }).catch(() => null);
      await waitFor(() => projectCalls().length === 1, 20_000, "replica A's upstream request");
      await waitFor(() => pendingRecord(b, key), 20_000, "replica A's pending record");

      a.child.kill('SIGKILL');
      await once(a.child, 'exit');
      const killedAt = performance.now();
      await lost;
      // One call on B, waiting at most IDEMPOTENCY_WAIT: it gets the key once A's lease runs out.
      const res = await b.graphql(M.project, { input, key }, { key: API_KEY });
      const tookMs = Math.round(performance.now() - killedAt);
      console.info(`takeover across replicas with ${_label}: the other replica answered ${tookMs} ms after the kill`);

      expect(res.errors).toBeUndefined();
      const payload = res.data!.createProject;
      expect(payload).toMatchObject({ idempotencyKey: key, replayed: false, project: { name: input.name } });
      const sent = projectCalls();
      expect(sent).toHaveLength(2);
      expect(sent.map((r) => r.headers['idempotency-key'])).toEqual([
        payload.upstreamIdempotencyKey,
        payload.upstreamIdempotencyKey,
      ]);
      expect(cloud.projects().filter((p) => p.name === input.name)).toHaveLength(1);
    },
    90_000,
  );

  it('a call that is alive but slower than IDEMPOTENCY_TAKEOVER is never taken over: the other replica waits and replays it', async () => {
    const LEASE_MS = 3_000;
    await setUp('alive_slow', { IDEMPOTENCY_TAKEOVER: `${LEASE_MS}ms` });
    const a = await replica({ UPSTREAM_TIMEOUT: '60s' });
    const b = await replica({ IDEMPOTENCY_WAIT: '60s' });
    // A's request stays upstream, unanswered, until the test has seen A renew its lease past the one it claimed with:
    // a state, not a duration. Without renewal, B would take the key over once that first lease ran out.
    const held = cloud.faults.hold();
    const key = randomUUID();
    const input = { name: `slow-${key}` };
    const first = a.graphql(M.project, { input, key }, { key: API_KEY });
    await waitFor(() => held.arrived() === 1, 20_000, "replica A's upstream request");
    const claimedUntil = await leaseUntil(b, key);
    const second = b.graphql(M.project, { input, key }, { key: API_KEY });
    await waitFor(
      async () => (await leaseUntil(b, key)) >= claimedUntil + LEASE_MS,
      30_000,
      "A's lease renewed past the time its first lease ran out",
    );
    held.release();
    const [fromA, fromB] = await Promise.all([first, second]);

    expect(fromA.errors).toBeUndefined();
    expect(fromB.errors).toBeUndefined();
    expect(fromA.data!.createProject.replayed).toBe(false);
    expect(fromB.data!.createProject).toEqual({ ...fromA.data!.createProject, replayed: true });
    expect(projectCalls()).toHaveLength(1);
    expect(cloud.projects().filter((p) => p.name === input.name)).toHaveLength(1);
  }, 60_000);

  it('a provisioning whose replica was killed mid-step is resumed with its key on the other replica, and each resource is created once', async () => {
    const TAKEOVER_MS = 2_000;
    await setUp('provisioning_takeover', { IDEMPOTENCY_TAKEOVER: `${TAKEOVER_MS}ms` });
    const b = await replica({ IDEMPOTENCY_WAIT: '8s' });
    const a = await startProcess({ ...env, UPSTREAM_TIMEOUT: '120s' });
    cloud.faults.enqueueFor(PROJECTS_PATH, 'timeout');
    const key = randomUUID();
    const input = {
      project: { name: `resumed-${key}` },
      network: { title: 'net' },
      subnet: { title: 'sub', cidr: '10.80.0.0/24' },
      cluster: { title: 'k', instanceType: 'C2_MEDIUM' },
    };
    const PROVISION = `mutation($input: ProvisionKafkaClusterInput!, $key: UUID) {
      provisionKafkaCluster(input: $input, idempotencyKey: $key) { provisioning { id state steps { name state } } replayed }
    }`;
    const started = await request(`${a.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
      body: JSON.stringify({ query: PROVISION, variables: { input, key } }),
    }).then((r) => r.body.json() as Promise<any>);
    expect(started.data.provisionKafkaCluster.provisioning.state).toBe('RUNNING');
    const id = started.data.provisionKafkaCluster.provisioning.id;
    await waitFor(() => projectCalls().length === 1, 20_000, "replica A's project request");

    a.child.kill('SIGKILL');
    await once(a.child, 'exit');
    const killedAt = performance.now();
    // A's run touched its row every third of IDEMPOTENCY_TAKEOVER until the kill: once the row is older than that (a
    // state of the row, waited for), the app's next call with the key, on the other replica, resumes the provisioning
    // and says so.
    await waitForAbandonedProvisioning(b, id, TAKEOVER_MS);
    const res = await b.graphql(PROVISION, { input, key }, { key: API_KEY });
    expect(res.errors).toBeUndefined();
    const resumed = res.data!.provisionKafkaCluster;
    expect(resumed.replayed, JSON.stringify(resumed)).toBe(false);
    console.info(
      `provisioning takeover with IDEMPOTENCY_TAKEOVER=2s: resumed on the other replica ${Math.round(performance.now() - killedAt)} ms after the kill`,
    );
    expect(resumed.provisioning.id).toBe(id);
    expect(resumed.provisioning.state).toBe('RUNNING');
    expect(resumed.provisioning.steps.find((s: { name: string }) => s.name === 'project').state).toBe('PENDING');
    await b.gateway.services.provisioning.idle();
    const done = await b.graphql(
      `query($id: ID!) { provisioning(id: $id) { state steps { name state } } }`,
      { id: resumed.provisioning.id },
      { key: API_KEY },
    );
    expect(done.data!.provisioning.state).toBe('SUCCEEDED');
    expect(cloud.projects().filter((p) => p.name === input.project.name)).toHaveLength(1);
    const keys = projectCalls().map((r) => r.headers['idempotency-key']);
    expect(keys).toHaveLength(2);
    expect(new Set(keys).size).toBe(1);
    expect(
      cloud
        .resources('network')
        .filter(
          (r) => r.title === 'net' && r.projectId === cloud.projects().find((p) => p.name === input.project.name)!.id,
        ),
    ).toHaveLength(1);
  }, 90_000);
});
