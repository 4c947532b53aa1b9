// A registration answer nested under `data` (where the gateway already reads the verification's id) holds its status
// of acceptance in `data.jobResults.status`, as a flat answer holds it in `jobResults.status`: it is read there too,
// rather than `status` reading null.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { VERIFICATIONS_PATH } from '../../src/sandbox/verification.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const REGISTER = `mutation($input: RegisterVerificationInput!) {
  registerVerification(input: $input) { verification { externalId status } }
}`;

describe('a registration answer nested under data', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ SANDBOX_CALLBACK_DELAY_MS: '600000' });
  });
  afterAll(() => t.close());

  it('has its status read from data.jobResults', async () => {
    const sandbox = t.gateway.sandbox.verification!;
    sandbox.faults.enqueueFor(VERIFICATIONS_PATH, { alter: (body) => ({ data: body }) });
    const res = await t.graphql(REGISTER, { input: { workflowId: 'wf-nested', applicant: { lastName: 'Nested' } } });
    expect(res.errors).toBeUndefined();
    const upstreamId = sandbox.verifications().at(-1)!.externalId;
    expect(res.data!.registerVerification.verification).toEqual({ externalId: upstreamId, status: 'ACCEPTED' });
  });
});
