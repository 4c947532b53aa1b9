import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { RESULTS_PATH } from '../../src/sandbox/verification.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * The spec shows no results answer; an object keyed by the verification's id is one of the shapes the gateway reads
 * (docs/decisions/004). There the key names the verification: a field of the item that the gateway would otherwise
 * take for an id (the upstream's own `id` of a job, an `id` nested under `data`) does not move the result elsewhere.
 */

const REGISTER = `mutation($input: RegisterVerificationInput!) {
  registerVerification(input: $input) { verification { externalId } }
}`;
const RESULTS = `query($ids: [ID!]!) { verificationResults(externalIds: $ids) { externalId status data } }`;

/** The sandbox's list answer rewritten as an object keyed by id, each item holding ids of other things. */
const keyedWithOtherIds = (body: unknown) => {
  const items = (body as { results: Array<Record<string, unknown>> }).results;
  return {
    results: Object.fromEntries(
      items.map(({ verificationExternalId, ...rest }, i) => [
        verificationExternalId,
        { ...rest, id: `job-${i}`, data: { id: `check-${i}` } },
      ]),
    ),
  };
};

describe('verification results answered as an object keyed by id', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ SANDBOX_CALLBACK_DELAY_MS: '600000' });
  });
  afterAll(() => t.close());

  it('files each result under its key, whatever ids the item itself holds, and the app reads it by its id', async () => {
    const ids: string[] = [];
    for (const lastName of ['Keyed', 'Other']) {
      const res = await t.graphql(REGISTER, { input: { workflowId: 'wf-keyed', applicant: { lastName } } });
      expect(res.errors).toBeUndefined();
      ids.push(res.data!.registerVerification.verification.externalId);
    }
    const sandbox = t.gateway.sandbox.verification!;
    sandbox.faults.enqueueFor(RESULTS_PATH, { alter: keyedWithOtherIds });
    const res = await t.graphql(RESULTS, { ids });
    expect(res.errors).toBeUndefined();
    expect(res.data!.verificationResults).toEqual([
      { externalId: ids[0], status: 'IN_PROGRESS', data: expect.objectContaining({ id: 'job-0' }) },
      { externalId: ids[1], status: 'IN_PROGRESS', data: expect.objectContaining({ id: 'job-1' }) },
    ]);
  });
});
