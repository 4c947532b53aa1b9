// Points given back on one replica (a provisioning call that lost its key to a concurrent call) are free on every
// replica: a replica that refused the app from memory once the window's last point was spent asks the shared count
// again, instead of refusing until the window ends. Two gateways on one PostgreSQL; the race is staged as in
// lost-race-refunds.test.ts, with a lock on the provisionings table held until both calls wait to write it.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { APP_A, CREATE_PROJECT, post } from '../helpers/ratelimit.js';

const PROVISION = `mutation($input: ProvisionKafkaClusterInput!, $key: UUID) {
  provisionKafkaCluster(input: $input, idempotencyKey: $key) { provisioning { id } replayed } }`;

/** 4 upstream creations each (project, network, subnet, cluster): two racing calls spend 8, one project makes 9. */
const BUDGET = 9;
const input = (name: string) => ({
  project: { name },
  network: { title: 'net' },
  subnet: { title: 'sub', cidr: '10.67.0.0/24' },
  cluster: { title: 'k', instanceType: 'C2_MEDIUM' },
});

describe('a refund on one replica frees the points on the others', () => {
  let postgres: TestPostgres;
  let url: string;
  let a: TestGateway;
  let b: TestGateway;
  beforeAll(async () => {
    postgres = await startPostgres();
    url = await postgres.createDatabase('refund_across_replicas');
    const env = {
      DATABASE_URL: url,
      GATEWAY_API_KEYS: `app-a:${APP_A}`,
      RATE_LIMIT_CREATIONS: `${BUDGET}/1h`,
      UPSTREAM_MAX_RETRIES: '0',
    };
    a = await startTestGateway(env);
    b = await startTestGateway(env);
  }, 120_000);
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await postgres?.stop();
  });

  async function query<T extends Record<string, unknown>>(text: string): Promise<T[]> {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      return (await client.query<T>(text)).rows;
    } finally {
      await client.end();
    }
  }

  it('the replica that spent the last point lets the app in again once another replica gave points back', async () => {
    const lock = new pg.Client({ connectionString: url });
    await lock.connect();
    await lock.query('begin');
    await lock.query('lock table provisionings in exclusive mode');
    const key = randomUUID();
    const body = input(`race-${key}`);
    const calls = [1, 2].map(() => a.graphql(PROVISION, { input: body, key }, { key: APP_A }));
    try {
      await expect
        .poll(
          async () =>
            (
              await query<{ n: number }>(
                `select count(*)::int as n from pg_stat_activity where datname = current_database()
                 and wait_event_type = 'Lock' and query ilike '%"provisionings"%'`,
              )
            )[0]!.n,
          { timeout: 30_000 },
        )
        .toBe(2);
      // Both calls spent 4 points; this creation on replica B spends the window's last one.
      expect((await post(b, APP_A, CREATE_PROJECT, { name: `last-${key}` })).status).toBe(200);
      expect((await post(b, APP_A, CREATE_PROJECT, { name: `over-${key}` })).status).toBe(429);
    } finally {
      await lock.query('commit');
      await lock.end();
    }
    const answers = await Promise.all(calls);
    for (const answer of answers) expect(answer.errors).toBeUndefined();
    expect(answers.map((x) => x.data!.provisionKafkaCluster.replayed).sort()).toEqual([false, true]);
    await a.gateway.services.provisioning.idle();
    // The losing call gave its 4 points back on replica A: 5 of 9 are spent, in the shared count.
    const [row] = await query<{ points: number }>(`select points from rate_limits where key like 'creations:%'`);
    expect(row!.points).toBe(5);
    // Replica B, which refused the app from memory, lets it spend them.
    const next = await post(b, APP_A, CREATE_PROJECT, { name: `after-${key}` });
    expect(next.body.errors).toBeUndefined();
    expect(next.status).toBe(200);
    await b.gateway.services.provisioning.idle();
  }, 60_000);
});
