// A FAILED provisioning is resumed by a claim that is one conditional UPDATE writing its resumed state. On two replicas
// sharing one PostgreSQL, two calls with its key at once resume it once: the test holds the row locked (SELECT … FOR
// UPDATE in its own transaction) until PostgreSQL shows both calls waiting at their claims, so the race is certain.
// Every write of the row is recorded by a trigger the test adds to the database; upstream requests are held at the
// cloud sandbox both replicas share: nothing waits for a duration.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { SANDBOX_SERVICE_ACCOUNT_TOKEN, startCloudSandbox, type CloudSandbox } from '../../src/sandbox/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { waitFor } from '../helpers/wait.js';

const PROVISION = `mutation($input: ProvisionKafkaClusterInput!, $key: UUID) {
  provisionKafkaCluster(input: $input, idempotencyKey: $key) { provisioning { id state steps { name state } } replayed }
}`;
const input = {
  project: { name: 'resumed on replicas' },
  network: { title: 'net' },
  subnet: { title: 'sub', cidr: '10.66.0.0/24' },
  cluster: { title: 'k', instanceType: 'C2_MEDIUM' },
  topics: [{ name: 'orders' }],
};

const KEY = 'provisioning-app-key-0123456789';

interface Version {
  state: string;
  steps: Array<{ name: string; state: string }>;
  revision: number;
}

let postgres: TestPostgres;
let cloud: CloudSandbox;
let db: pg.Client;
let url: string;
let a: TestGateway;
let b: TestGateway;

beforeAll(async () => {
  postgres = await startPostgres();
  cloud = await startCloudSandbox();
  url = await postgres.createDatabase('resume_replicas');
  const env = {
    DATABASE_URL: url,
    TOKEN_ENCRYPTION_KEY: 'cd'.repeat(32),
    CLOUD_API_URL: cloud.url,
    CLOUD_API_TOKEN: SANDBOX_SERVICE_ACCOUNT_TOKEN,
    SANDBOX_UPSTREAMS: 'identification,verification,rfm,mobile-id',
    UPSTREAM_MAX_RETRIES: '0',
    UPSTREAM_CIRCUIT_BREAKER: 'off',
    GATEWAY_API_KEYS: `app:${KEY}`,
  };
  a = await startTestGateway(env);
  b = await startTestGateway(env);
  db = new pg.Client({ connectionString: url });
  await db.connect();
  // Each write of a provisioning's state, steps, error or revision (not a heartbeat's, which sets updated_at only).
  await db.query(`
    CREATE TABLE test_provisioning_versions (seq bigserial PRIMARY KEY, id text, state text, steps text,
      revision bigint);
    CREATE FUNCTION test_provisioning_version() RETURNS trigger AS $$
    BEGIN
      INSERT INTO test_provisioning_versions (id, state, steps, revision)
      VALUES (NEW.id, NEW.state, NEW.steps::text, NEW.revision);
      RETURN NEW;
    END $$ LANGUAGE plpgsql;
    CREATE TRIGGER test_provisioning_versions AFTER UPDATE OF state, steps, error, revision ON provisionings
      FOR EACH ROW EXECUTE FUNCTION test_provisioning_version();
  `);
}, 180_000);
afterAll(async () => {
  await db?.end();
  await a?.close();
  await b?.close();
  await cloud?.close();
  await postgres?.stop();
});

async function versions(id: string, fromSeq: number): Promise<Version[]> {
  const { rows } = await db.query<{ state: string; steps: string; revision: string }>(
    'SELECT state, steps, revision FROM test_provisioning_versions WHERE id = $1 AND seq > $2 ORDER BY seq',
    [id, fromSeq],
  );
  return rows.map((r) => ({ state: r.state, steps: JSON.parse(r.steps) as Version['steps'], revision: +r.revision }));
}
const lastSeq = async () =>
  Number(
    (await db.query<{ seq: string }>('SELECT COALESCE(MAX(seq), 0) AS seq FROM test_provisioning_versions')).rows[0]!
      .seq,
  );

describe('a FAILED provisioning resumed on two PostgreSQL replicas at once', () => {
  it('is resumed once: one claim, each step written once, the other call answered the resumed state', async () => {
    const key = randomUUID();
    // The topic's step (after the project, the network, the subnet and the cluster) is refused once.
    const made = cloud.resources().length;
    cloud.faults.enqueueFor(
      (p, method) => method === 'POST' && p === '/ocs/v1/services' && cloud.resources().length === made + 3,
      '503',
    );
    const first = await a.graphql(PROVISION, { input, key }, { key: KEY });
    expect(first.errors).toBeUndefined();
    const id = first.data!.provisionKafkaCluster.provisioning.id as string;
    await a.gateway.services.provisioning.idle();
    const failed = (await versions(id, 0)).at(-1)!;
    expect(failed.state).toBe('FAILED');
    expect(failed.steps.filter((s) => s.state === 'FAILED').map((s) => s.name)).toEqual(['topic:orders']);
    const from = await lastSeq();
    const creations = () => cloud.requests.filter((r) => r.method === 'POST' && !r.path.startsWith('/iam')).length;
    const creationsBefore = creations();

    const upstream = cloud.faults.hold();
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    await holder.query('BEGIN');
    await holder.query('SELECT id FROM provisionings WHERE id = $1 FOR UPDATE', [id]);
    const waiting = async () =>
      Number(
        (
          await holder.query<{ n: string }>(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
          )
        ).rows[0]!.n,
      );
    const calls = [
      a.graphql(PROVISION, { input, key }, { key: KEY }),
      b.graphql(PROVISION, { input, key }, { key: KEY }),
    ];
    await waitFor(async () => (await waiting()) === 2, 20_000, 'both resumes waiting at their claims');
    await holder.query('COMMIT');
    await holder.end();
    // Both calls answer while the resumed run's cluster request is held upstream: one resumed it, the other answers
    // the provisioning as that resume left it, RUNNING with no step FAILED any more.
    const both = await Promise.all(calls);
    await waitFor(() => upstream.arrived() === 1, 20_000, "the resume's request upstream");
    for (const r of both) expect(r.errors).toBeUndefined();
    expect(both.map((r) => r.data!.provisionKafkaCluster.replayed).sort()).toEqual([false, true]);
    const loser = both.find((r) => r.data!.provisionKafkaCluster.replayed)!;
    const shown = loser.data!.provisionKafkaCluster.provisioning as {
      id: string;
      state: string;
      steps: Version['steps'];
    };
    expect(shown.id).toBe(id);
    expect(shown.state).toBe('RUNNING');
    expect(shown.steps.filter((s) => s.state === 'FAILED')).toEqual([]);
    upstream.release();
    await a.gateway.services.provisioning.idle();
    await b.gateway.services.provisioning.idle();

    const written = await versions(id, from);
    expect(written.at(-1)!.state).toBe('SUCCEEDED');
    // One request upstream: the topic's, sent once.
    expect(creations()).toBe(creationsBefore + 1);
    // One claim and one run: each write a new revision, in order, and each step made DONE once.
    expect(written.map((v) => v.revision)).toEqual(written.map((_, i) => failed.revision + 1 + i));
    const doneAt = new Map<string, number>();
    let previous = failed;
    for (const v of written) {
      for (const s of v.steps) {
        const before = previous.steps.find((p) => p.name === s.name)!;
        if (s.state === 'DONE' && before.state !== 'DONE') doneAt.set(s.name, (doneAt.get(s.name) ?? 0) + 1);
      }
      previous = v;
    }
    expect(
      [...doneAt.values()].every((n) => n === 1),
      JSON.stringify([...doneAt]),
    ).toBe(true);
    expect(doneAt.get('topic:orders')).toBe(1);
  }, 120_000);
});
