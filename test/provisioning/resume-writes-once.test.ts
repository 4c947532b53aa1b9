// A resumed provisioning (docs/graphql-api.md, Idempotency and retries) is claimed in one write that is the resumed
// state itself: RUNNING with the steps that did not finish PENDING again and no error, so no reader ever finds a
// RUNNING provisioning that still shows the old FAILED step and error. And the resumed run writes only what changes:
// a step SKIPPED by the first run (no public IP) is not written again.
// Every version of the row is recorded by an SQLite trigger the test adds to the gateway's database file, so the
// state between two writes is seen without any timing.
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const PROVISION = `mutation($input: ProvisionKafkaClusterInput!, $key: UUID) {
  provisionKafkaCluster(input: $input, idempotencyKey: $key) { provisioning { id state } replayed }
}`;
const input = {
  project: { name: 'resumed' },
  network: { title: 'net' },
  subnet: { title: 'sub', cidr: '10.64.0.0/24' },
  cluster: { title: 'k', instanceType: 'C2_MEDIUM' },
  topics: [{ name: 'orders' }],
};

interface Version {
  state: string;
  steps: Array<{ name: string; state: string; error: unknown }>;
  error: unknown;
  revision: number;
}

let gw: TestGateway;
let db: Database.Database;
beforeAll(async () => {
  gw = await startTestGateway({ UPSTREAM_MAX_RETRIES: '0', UPSTREAM_CIRCUIT_BREAKER: 'off' });
  db = new Database(path.join(gw.dataDir, 'gateway.sqlite'));
  db.pragma('busy_timeout = 10000');
  // Each write of a provisioning's state, steps, error or revision (not a heartbeat's, which touches updated_at only).
  db.exec(`
    CREATE TABLE test_provisioning_versions (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT, state TEXT, steps TEXT,
      error TEXT, revision INTEGER);
    CREATE TRIGGER test_provisioning_versions AFTER UPDATE OF state, steps, error, revision ON provisionings
    BEGIN
      INSERT INTO test_provisioning_versions (id, state, steps, error, revision)
      VALUES (NEW.id, NEW.state, NEW.steps, NEW.error, NEW.revision);
    END;
  `);
});
afterAll(async () => {
  db?.close();
  await gw?.close();
});

function versions(id: string, fromSeq: number): Version[] {
  const rows = db
    .prepare(
      'SELECT state, steps, error, revision FROM test_provisioning_versions WHERE id = ? AND seq > ? ORDER BY seq',
    )
    .all(id, fromSeq) as Array<{ state: string; steps: string; error: string | null; revision: number }>;
  return rows.map((r) => ({
    state: r.state,
    steps: JSON.parse(r.steps) as Version['steps'],
    error: r.error === null ? null : (JSON.parse(r.error) as unknown),
    revision: Number(r.revision),
  }));
}
const lastSeq = () =>
  Number(
    (db.prepare('SELECT COALESCE(MAX(seq), 0) AS seq FROM test_provisioning_versions').get() as { seq: number }).seq,
  );

describe('a resumed provisioning', () => {
  it('is claimed in one write of its resumed state, and writes no step again that it does not change', async () => {
    const sandbox = gw.gateway.sandbox.cloud!;
    const key = randomUUID();
    // The cluster step (after the project, the network and the subnet) is refused once.
    const made = sandbox.resources().length;
    sandbox.faults.enqueueFor(
      (p, method) => method === 'POST' && p === '/ocs/v1/services' && sandbox.resources().length === made + 2,
      '503',
    );
    const first = await gw.graphql(PROVISION, { input, key });
    expect(first.errors).toBeUndefined();
    const id = first.data!.provisionKafkaCluster.provisioning.id as string;
    await gw.gateway.services.provisioning.idle();
    const failed = versions(id, 0).at(-1)!;
    expect(failed.state).toBe('FAILED');
    expect(failed.steps.find((s) => s.name === 'kafkaCluster')!.state).toBe('FAILED');
    expect(failed.steps.find((s) => s.name === 'ipAddress')!.state).toBe('SKIPPED');

    const from = lastSeq();
    const resumed = await gw.graphql(PROVISION, { input, key });
    expect(resumed.data!.provisionKafkaCluster).toMatchObject({ replayed: false });
    await gw.gateway.services.provisioning.idle();
    const written = versions(id, from);
    expect(written.at(-1)!.state).toBe('SUCCEEDED');

    // Every RUNNING version a reader could have read shows no failure: the claim wrote the resumed state at once.
    for (const v of written.filter((w) => w.state === 'RUNNING')) {
      expect(v.error, JSON.stringify(v)).toBeNull();
      expect(
        v.steps.filter((s) => s.state === 'FAILED'),
        JSON.stringify(v),
      ).toEqual([]);
    }
    // One write per revision, each a new one, each changing something besides it.
    expect(written.map((v) => v.revision)).toEqual(written.map((_, i) => failed.revision + 1 + i));
    const [before, ...after] = [failed, ...written];
    let previous = before!;
    for (const v of after) {
      const { revision: _a, ...now } = v;
      const { revision: _b, ...then } = previous;
      expect(now, `revision ${v.revision} writes nothing new`).not.toEqual(then);
      previous = v;
    }
  });
});
