import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { createChain, M } from '../helpers/cloud.js';
import { startTestGateway } from '../helpers/gateway.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { storeSnapshot } from '../helpers/store.js';

describe('the store on a real PostgreSQL (DATABASE_URL)', () => {
  let pg: TestPostgres;
  let url: string;
  beforeAll(async () => {
    pg = await startPostgres();
    url = await pg.createDatabase('gateway');
  }, 120_000);
  afterAll(() => pg?.stop());

  it('migrates, records the whole chain and answers the project tree from PostgreSQL', async () => {
    const gw = await startTestGateway({ DATABASE_URL: url });
    try {
      expect(gw.gateway.services.store.dialect).toBe('postgres');
      const chain = await createChain(gw);
      const res = await gw.graphql(
        `query($id: ID!) { project(id: $id) { networks { subnets { cidr } } kafkaClusters { topics { name } users { name } } virtualMachines { id } } }`,
        {
          id: chain.projectId,
        },
      );
      expect(res.errors).toBeUndefined();
      expect(res.data!.project).toEqual({
        networks: [{ subnets: [{ cidr: '10.10.0.0/24' }] }],
        kafkaClusters: [{ topics: [{ name: 'events' }], users: [{ name: 'app' }] }],
        virtualMachines: [{ id: chain.vmId }],
      });
      const ready = await fetch(`${gw.url}/readyz`);
      expect(await ready.json()).toMatchObject({ status: 'ready', store: 'postgres' });
    } finally {
      await gw.close();
    }
  });

  it('replays an idempotent mutation from PostgreSQL after a restart, and refuses a reused key', async () => {
    const key = randomUUID();
    // Two processes on one database share the gateway secret (docs/scaling.md): it keys the stored
    // request fingerprints, so without it a retry on the other process would read as another request.
    const secret = { DATABASE_URL: url, TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('hex') };
    const a = await startTestGateway(secret);
    const first = await a.graphql(M.project, { input: { name: 'pg-durable' }, key });
    await a.close();
    const b = await startTestGateway(secret);
    try {
      const again = await b.graphql(M.project, { input: { name: 'pg-durable' }, key });
      expect(again.data!.createProject).toEqual({ ...first.data!.createProject, replayed: true });
      expect(b.gateway.sandbox.cloud!.requests).toHaveLength(0);
      const reused = await b.graphql(M.project, { input: { name: 'other' }, key });
      expect(reused.errors![0]!.extensions!.code).toBe('IDEMPOTENCY_KEY_REUSED');
    } finally {
      await b.close();
    }
  });

  it('makes one upstream call for concurrent requests with one key', async () => {
    const gw = await startTestGateway({ DATABASE_URL: url });
    try {
      gw.gateway.sandbox.cloud!.faults.latencyMs = 200;
      const key = randomUUID();
      const results = await Promise.all(
        Array.from({ length: 4 }, () => gw.graphql(M.project, { input: { name: 'pg-race' }, key })),
      );
      expect(results.every((r) => !r.errors)).toBe(true);
      expect(results.filter((r) => !r.data!.createProject.replayed)).toHaveLength(1);
      expect(gw.gateway.sandbox.cloud!.requests).toHaveLength(1);
    } finally {
      await gw.close();
    }
  });

  it('leaves no row for a refused request: bad input of a creation, a provisioning, an identity check, a reused key', async () => {
    const gw = await startTestGateway({ DATABASE_URL: url });
    try {
      const projectId = (await gw.graphql(M.project, { input: { name: 'pg-refusals' } })).data!.createProject.project
        .id as string;
      const key = randomUUID();
      expect((await gw.graphql(M.project, { input: { name: 'pg-keyed' }, key })).errors).toBeUndefined();
      const sentBefore = [gw.gateway.sandbox.cloud!, gw.gateway.sandbox.identification!].map((s) => s.requests.length);
      const before = await storeSnapshot(gw);
      const refused = [
        await gw.graphql(M.subnet, {
          input: { projectId, networkId: randomUUID(), title: 's', cidr: '10.0.0.300/24' },
        }),
        await gw.graphql(
          `mutation($input: ProvisionKafkaClusterInput!) { provisionKafkaCluster(input: $input) { provisioning { id } } }`,
          {
            input: {
              project: { name: 'p' },
              network: { title: 'n' },
              subnet: { title: 's', cidr: '10.1.0.0/33' },
              cluster: { title: 'k', instanceType: 'C2_MEDIUM' },
            },
          },
        ),
        await gw.graphql(
          `mutation { createIdentification(input: { workflowId: "wf", linkLifetimeInMinutes: 0 }) { identification { id } } }`,
        ),
        await gw.graphql(M.project, { input: { name: 'pg-keyed-other' }, key }),
      ];
      expect(refused.map((r) => r.errors?.[0]?.extensions?.code)).toEqual([
        'BAD_USER_INPUT',
        'BAD_USER_INPUT',
        'BAD_USER_INPUT',
        'IDEMPOTENCY_KEY_REUSED',
      ]);
      expect(refused.slice(0, 3).map((r) => r.errors?.[0]?.extensions?.field)).toEqual([
        'input.cidr',
        'input.subnet.cidr',
        'input.linkLifetimeInMinutes',
      ]);
      expect(await storeSnapshot(gw)).toEqual(before);
      const sentAfter = [gw.gateway.sandbox.cloud!, gw.gateway.sandbox.identification!].map((s) => s.requests.length);
      expect(sentAfter).toEqual(sentBefore);
    } finally {
      await gw.close();
    }
  });
});
