import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { M } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { storeSnapshot } from '../helpers/store.js';

/**
 * PostgreSQL's text cannot hold U+0000. A name holding it used to be created upstream, then the ledger write failed
 * (INTERNAL_SERVER_ERROR) and the resource was never recorded; a verification's workflow id holding it was sent to
 * the verification upstream again on each retry with the same key; a read with it failed. Each is refused before
 * anything runs instead (the variables' rule, src/execution/pipeline.ts).
 */
describe('U+0000 on PostgreSQL', () => {
  let pg: TestPostgres;
  let gw: TestGateway;
  beforeAll(async () => {
    pg = await startPostgres();
    gw = await startTestGateway({ DATABASE_URL: await pg.createDatabase('gateway') });
  }, 120_000);
  afterAll(async () => {
    await gw?.close();
    await pg?.stop();
  });

  it('is BAD_USER_INPUT on the field, nothing created upstream, nothing stored, the same on a retry', async () => {
    const before = await storeSnapshot(gw);
    const key = randomUUID();
    for (let attempt = 0; attempt < 2; attempt++) {
      const res = await gw.graphql(M.project, { input: { name: 'shop\u0000x' }, key });
      expect(res.status).toBe(400);
      expect(res.errors).toEqual([
        {
          message: 'Variable "$input.name" must not contain the NUL character (U+0000); nothing was run',
          extensions: { code: 'BAD_USER_INPUT', field: 'input.name' },
        },
      ]);
    }
    expect(gw.gateway.sandbox.cloud!.requests).toHaveLength(0);
    expect(gw.gateway.sandbox.cloud!.projects()).toHaveLength(0);
    expect(await storeSnapshot(gw)).toEqual(before);
  });

  it('refuses a verification with it before it is sent, on every retry, and a read with it', async () => {
    const register = `mutation($input: RegisterVerificationInput!, $key: UUID) {
      registerVerification(input: $input, idempotencyKey: $key) { verification { externalId } } }`;
    const before = await storeSnapshot(gw);
    const key = randomUUID();
    for (let attempt = 0; attempt < 3; attempt++) {
      const res = await gw.graphql(register, {
        input: { workflowId: 'wf\u0000kyc', applicant: { lastName: 'Tamm' } },
        key,
      });
      expect(res.errors?.[0]?.extensions).toEqual({ code: 'BAD_USER_INPUT', field: 'input.workflowId' });
    }
    expect(gw.gateway.sandbox.verification!.verifications()).toHaveLength(0);
    expect(await storeSnapshot(gw)).toEqual(before);
    const read = await gw.graphql('query($ids: [ID!]!) { verificationResults(externalIds: $ids) { externalId } }', {
      ids: ['v\u0000'],
    });
    expect(read.errors?.[0]?.extensions).toEqual({ code: 'BAD_USER_INPUT', field: 'ids.0' });
  });
});
