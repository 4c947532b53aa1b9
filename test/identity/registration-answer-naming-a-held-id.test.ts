// A registration sent without an app id is bound, address and all, to the id the service's answer assigns. When that
// id is one the ledger already holds for another verification of the app, the registration cannot be recorded
// (UPSTREAM_ANSWER_INCOMPLETE), and its address must not be bound to that id either: bound, a callback on it would be
// taken as the other verification's result. The answer's bind follows the rule a callback's claim follows
// (VerificationCallbacks.claim): no id another address of the app is bound to, nor one its ledger records.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { VERIFICATIONS_PATH } from '../../src/sandbox/verification.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { postCallback } from '../helpers/identity.js';

const API_KEY = 'held-id-app';
const REGISTER = `mutation($input: RegisterVerificationInput!) {
  registerVerification(input: $input) { verification { id externalId } }
}`;
const COMPLETION = `query($id: ID!) { node(id: $id) { ... on Verification { externalId completion { status } } } }`;

describe('a registration answer naming an id another verification of the app holds', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ GATEWAY_API_KEYS: API_KEY, SANDBOX_CALLBACK_DELAY_MS: '600000' });
  });
  afterAll(() => t.close());

  const register = (input: Record<string, unknown>) =>
    t.graphql(
      REGISTER,
      { input: { workflowId: 'wf-held', applicant: { lastName: 'Held' }, ...input } },
      { key: API_KEY },
    );

  it('is not recorded, and leaves its address bound to nothing: a callback on it naming that id is refused', async () => {
    const sandbox = t.gateway.sandbox.verification!;
    // The first verification with no address (nothing but its record holds its id), then one with an address.
    for (const callback of [false, true]) {
      const first = await register({ callback });
      expect(first.errors).toBeUndefined();
      const held = first.data!.registerVerification.verification as { id: string; externalId: string };

      sandbox.faults.enqueueFor(VERIFICATIONS_PATH, {
        alter: (body) => ({ ...(body as Record<string, unknown>), verificationExternalId: held.externalId }),
      });
      const second = await register({});
      expect(second.errors?.[0]?.extensions?.code, JSON.stringify(second.errors)).toBe('UPSTREAM_ANSWER_INCOMPLETE');
      const address = sandbox.verifications().at(-1)!.callbackUrl!;
      // Bound to it: the first verification's address alone, if it has one.
      const bound = await t.gateway.services.store.db
        .selectFrom('verification_callbacks')
        .select('external_id')
        .where('external_id', '=', held.externalId)
        .execute();
      expect(bound.length, `callback: ${callback}`).toBe(callback ? 1 : 0);

      const hijack = await postCallback(address, { verificationExternalId: held.externalId, status: 'HIJACK' });
      expect(hijack.status, `callback: ${callback}`).toBe(400);
      expect(hijack.body.error_description).toMatch(/names another verification/);
      const read = await t.graphql(COMPLETION, { id: held.id }, { key: API_KEY });
      expect(read.data!.node).toEqual({ externalId: held.externalId, completion: null });
    }
  });
});
