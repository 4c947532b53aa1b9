// An identification's completion callback can reach the gateway before the creating mutation has stored the
// identification: the platform answered 202, and a fast scenario (or a fast platform) calls back while the gateway is
// still writing its record. That callback names an identification the ledger does not hold yet; answered 404, the
// sender would not retry and the completion would be lost. It is answered 503 with Retry-After while a creation of the
// address's app is in flight, so the sender retries; once the record is stored, the retry is kept and delivered.
// The window is held open on PostgreSQL: a lock on the ledger's table holds the record's write (reads go on).
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { postCallback } from '../helpers/identity.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';

const CREATE = `mutation($input: CreateIdentificationInput!) {
  createIdentification(input: $input) { identification { id callbackUrl status } } }`;

describe('an identification callback that arrives before its creation is stored', () => {
  let postgres: TestPostgres;
  let url: string;
  let t: TestGateway;
  beforeAll(async () => {
    postgres = await startPostgres();
    url = await postgres.createDatabase('identification_callback_before_record');
    t = await startTestGateway({ DATABASE_URL: url, GATEWAY_API_KEYS: 'app-a:key-a,app-b:key-b' });
  }, 120_000);
  afterAll(async () => {
    await t?.close();
    await postgres?.stop();
  });

  async function waitingOn(table: string): Promise<number> {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const { rows } = await client.query<{ n: number }>(
        `select count(*)::int as n from pg_stat_activity
         where datname = current_database() and wait_event_type = 'Lock' and query ilike $1`,
        [`%"${table}"%`],
      );
      return rows[0]!.n;
    } finally {
      await client.end();
    }
  }

  it('is answered 503 with Retry-After (the sender retries), not 404, and its retry is stored once the record is', async () => {
    const sandbox = t.gateway.sandbox.identification!;
    const workflowId = 'wf-fast-callback';
    // The address of app-a's workflow exists (a first identification), so the callback reaches the receiver.
    const first = await t.graphql(CREATE, { input: { workflowId } }, { key: 'key-a' });
    expect(first.errors).toBeUndefined();
    const address = first.data!.createIdentification.identification.callbackUrl as string;

    const lock = new pg.Client({ connectionString: url });
    await lock.connect();
    await lock.query('begin');
    await lock.query('lock table resources in exclusive mode');
    const created = t.graphql(CREATE, { input: { workflowId } }, { key: 'key-a' });
    let early: Awaited<ReturnType<typeof postCallback>>;
    let id: string;
    try {
      // The platform created it (202) and the gateway waits to write its record.
      await expect.poll(() => waitingOn('resources'), { timeout: 30_000 }).toBe(1);
      const instances = sandbox.identifications();
      expect(instances).toHaveLength(2);
      id = instances[1]!.id;
      early = await postCallback(address, { id, workflowId, status: 'COMPLETED', event: 'IDENTIFICATION_COMPLETED' });
    } finally {
      await lock.query('commit');
      await lock.end();
    }
    expect(early.status).toBe(503);
    expect(Number(early.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(early.body).toMatchObject({ error: 'temporarily_unavailable' });

    const answer = await created;
    expect(answer.errors).toBeUndefined();
    expect(answer.data!.createIdentification.identification.id).toBe(id);
    // The sender's retry is kept and read back.
    expect(
      (await postCallback(address, { id, workflowId, status: 'COMPLETED', event: 'IDENTIFICATION_COMPLETED' })).status,
    ).toBe(204);
    const read = await t.graphql(`query($id: ID!) { identification(id: $id) { status } }`, { id }, { key: 'key-a' });
    expect(read.data).toEqual({ identification: { status: 'COMPLETED' } });
  }, 60_000);

  it("with no creation in flight, an id the address may not report on is still 404, another app's alike", async () => {
    const workflowId = 'wf-idle-callback';
    const mine = await t.graphql(CREATE, { input: { workflowId } }, { key: 'key-a' });
    const address = mine.data!.createIdentification.identification.callbackUrl as string;
    const theirs = await t.graphql(CREATE, { input: { workflowId } }, { key: 'key-b' });
    const foreign = theirs.data!.createIdentification.identification.id as string;
    for (const id of [foreign, 'never-created']) {
      const res = await postCallback(address, { id, workflowId, status: 'COMPLETED' });
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({ error: 'not_found' });
    }
  });
});
