// A registration sent without an external id is recorded under the id the verification service's answer assigns. Read
// at VERIFICATION_EXTERNAL_ID_PATH, an id is taken as every upstream id is (src/config/json-path.ts answerId): 1 to
// 1,024 characters, no control character, no lone surrogate. Read by the guesses it was taken whatever it held: an id
// with a line break was recorded and handed to the app, whose verificationResults then refused it as bad input; a lone
// surrogate was stored as U+FFFD, another id than the one the app was told; a NUL could not be stored on PostgreSQL
// once the upstream had registered it. Such an answer is one whose id cannot be read, whichever way it is read: kept
// with the key (UPSTREAM_ANSWER_INCOMPLETE), nothing recorded.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';

import { VERIFICATIONS_PATH } from '../../src/sandbox/verification.js';
import { gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';

const gateway = gatewaysPerTest();

const REGISTER = `mutation($input: RegisterVerificationInput!, $key: UUID) {
  registerVerification(input: $input, idempotencyKey: $key) { verification { externalId } }
}`;

const verifications = async (t: TestGateway) =>
  (await t.gateway.services.store.db.selectFrom('resources').select('id').where('kind', '=', 'verification').execute())
    .length;

describe('a registration answer assigning an id no store keeps as it is', () => {
  it('is UPSTREAM_ANSWER_INCOMPLETE, as at VERIFICATION_EXTERNAL_ID_PATH, and nothing is recorded', async () => {
    const t = await gateway();
    const sandbox = t.gateway.sandbox.verification!;
    const unstorable: Array<[string, string]> = [
      ['a line break', 'assigned\n7'],
      ['a lone surrogate', 'assigned-\ud800'],
      ['over 1,024 characters', 'a'.repeat(1025)],
    ];
    for (const [what, id] of unstorable) {
      sandbox.faults.enqueueFor(VERIFICATIONS_PATH, {
        alter: (body) => ({ ...(body as Record<string, unknown>), verificationExternalId: id }),
      });
      const res = await t.graphql(REGISTER, {
        input: { workflowId: 'wf-unstorable', applicant: { lastName: 'Garbage' } },
        key: randomUUID(),
      });
      expect(res.data?.registerVerification ?? null, what).toBeNull();
      expect(res.errors?.[0]?.extensions, what).toMatchObject({
        code: 'UPSTREAM_ANSWER_INCOMPLETE',
        upstream: 'verification',
        variable: 'VERIFICATION_EXTERNAL_ID_PATH',
      });
    }
    expect(await verifications(t)).toBe(0);
  });
});
