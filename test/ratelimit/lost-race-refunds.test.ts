// A composite provisioning is charged its creation points before it claims its key. When a concurrent call with the
// same key claims it first (the insert of a new provisioning, or the claim of a resume), this call runs nothing and
// answers with the other call's provisioning, a replay: it gives its points back, since a replay costs nothing.
// The race is staged on PostgreSQL, two calls at once with one key (an app that retried on a second connection): the
// test holds a lock on the provisionings table, so that both calls read the key and spend their points, waits until
// both writes wait on the lock, and releases it.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { CREATE_PROJECT, post } from '../helpers/ratelimit.js';

const INSERTER = 'race-insert-key-0123456789';
const RESUMER = 'race-resume-key-0123456789';

const PROVISION = `mutation($input: ProvisionKafkaClusterInput!, $key: UUID) {
  provisionKafkaCluster(input: $input, idempotencyKey: $key) { provisioning { id state } replayed } }`;

/** 4 upstream creations: the project, the network, the subnet and the cluster. */
const CREATIONS = 4;
/**
 * Each app's budget of creations: enough for both calls of a race to spend their points before either claims the key,
 * too small for the creation the test makes after the race unless the losing call gave its points back.
 */
const BUDGET = 10;
const input = (name: string) => ({
  project: { name },
  network: { title: 'net' },
  subnet: { title: 'sub', cidr: '10.66.0.0/24' },
  cluster: { title: 'k', instanceType: 'C2_MEDIUM' },
});

describe('a provisioning call that loses its key to a concurrent call', () => {
  let postgres: TestPostgres;
  let url: string;
  let gw: TestGateway;
  beforeAll(async () => {
    postgres = await startPostgres();
    url = await postgres.createDatabase('lost_race_refunds');
    gw = await startTestGateway({
      DATABASE_URL: url,
      GATEWAY_API_KEYS: `inserter:${INSERTER},resumer:${RESUMER}`,
      RATE_LIMIT_CREATIONS: `${BUDGET}/1h`,
      UPSTREAM_MAX_RETRIES: '0',
    });
  }, 120_000);
  afterAll(async () => {
    await gw?.close();
    await postgres?.stop();
  });

  /** Holds every write to the provisionings table (reads go on) until the function returned is called. */
  async function holdProvisioningWrites(): Promise<() => Promise<void>> {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query('begin');
    await client.query('lock table provisionings in exclusive mode');
    return async () => {
      await client.query('commit');
      await client.end();
    };
  }

  /** The gateway's statements waiting on that lock. */
  async function waitingWrites(): Promise<number> {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const { rows } = await client.query<{ n: number }>(
        `select count(*)::int as n from pg_stat_activity
         where datname = current_database() and wait_event_type = 'Lock' and query ilike '%"provisionings"%'`,
      );
      return rows[0]!.n;
    } finally {
      await client.end();
    }
  }

  /** `outcome` points of the app's creations bucket. */
  async function points(app: string, outcome: 'allowed' | 'refunded'): Promise<number> {
    const text = await (await request(`${gw.url}/metrics`)).body.text();
    const line = new RegExp(
      `gateway_rate_limit_points_total\\{app="${app}",bucket="creations",outcome="${outcome}"\\} (\\d+)`,
    ).exec(text);
    return line ? Number(line[1]) : 0;
  }

  /** The same provisioning sent twice at once, with the table held until both calls wait to write it. */
  async function race(key: string, body: Record<string, unknown>, apiKey: string) {
    const release = await holdProvisioningWrites();
    const calls = [1, 2].map(() => gw.graphql(PROVISION, { input: body, key }, { key: apiKey }));
    try {
      await expect.poll(waitingWrites, { timeout: 30_000 }).toBe(2);
    } finally {
      await release();
    }
    const answers = await Promise.all(calls);
    for (const answer of answers) expect(answer.errors).toBeUndefined();
    await gw.gateway.services.provisioning.idle();
    return answers.map((answer) => answer.data!.provisionKafkaCluster);
  }

  it('a new provisioning: the call whose insert lost replays the winner and gives its points back', async () => {
    const key = randomUUID();
    const [first, second] = await race(key, input(`insert-${key}`), INSERTER);
    expect(first.provisioning.id).toBe(second.provisioning.id);
    expect([first.replayed, second.replayed].sort()).toEqual([false, true]);
    expect(await points('inserter', 'allowed')).toBe(2 * CREATIONS);
    expect(await points('inserter', 'refunded')).toBe(CREATIONS);
    // The replay cost nothing: 4 of the app's 10 points are spent, and it can still make a provisioning as large.
    const next = await gw.graphql(PROVISION, { input: input(`next-${key}`), key: randomUUID() }, { key: INSERTER });
    expect(next.errors).toBeUndefined();
    await gw.gateway.services.provisioning.idle();
  }, 60_000);

  it('a resume: the call whose claim lost replays the provisioning and gives its points back', async () => {
    const key = randomUUID();
    const body = input(`resume-${key}`);
    // The network, the first resource after the project, fails once: the provisioning is FAILED after the project.
    const sandbox = gw.gateway.sandbox.cloud!;
    sandbox.faults.enqueueFor((path, method) => method === 'POST' && path === '/ocs/v1/services', '503');
    const failed = await gw.graphql(PROVISION, { input: body, key }, { key: RESUMER });
    expect(failed.errors).toBeUndefined();
    await gw.gateway.services.provisioning.idle();
    const id = failed.data!.provisionKafkaCluster.provisioning.id as string;
    expect(
      (await gw.graphql(`query($id: ID!) { provisioning(id: $id) { state } }`, { id }, { key: RESUMER })).data,
    ).toEqual({ provisioning: { state: 'FAILED' } });
    expect(await points('resumer', 'allowed')).toBe(CREATIONS);

    // Both resumes are charged the 3 steps left (the network, the subnet, the cluster); one claims the provisioning.
    const answers = await race(key, body, RESUMER);
    expect(answers.map((p) => p.replayed).sort()).toEqual([false, true]);
    expect(await points('resumer', 'allowed')).toBe(CREATIONS + 2 * 3);
    expect(await points('resumer', 'refunded')).toBe(3);
    expect(
      (await gw.graphql(`query($id: ID!) { provisioning(id: $id) { state } }`, { id }, { key: RESUMER })).data,
    ).toEqual({ provisioning: { state: 'SUCCEEDED' } });
    // Spent: the provisioning and one resume, 7 of 10 points; what the replay gave back pays for more creations.
    expect((await post(gw, RESUMER, CREATE_PROJECT, { name: `after-${key}` })).status).toBe(200);
  }, 60_000);
});
