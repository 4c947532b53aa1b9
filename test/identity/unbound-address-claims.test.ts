import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { VERIFICATIONS_PATH } from '../../src/sandbox/verification.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { postCallback } from '../helpers/identity.js';

/**
 * An address whose registration's answer named no id the gateway could read is bound by the first id a callback on it
 * names (docs/webhooks.md). That id may not be one another verification of the app holds: not only one another address
 * of the app is bound to, but one the ledger records for a verification registered with `callback: false`, which has
 * no address to hold it. Bound to such an id, the address would write that verification's result.
 */

const API_KEY = 'claims-app';
const REGISTER = `mutation($input: RegisterVerificationInput!) {
  registerVerification(input: $input) { verification { id externalId } }
}`;
const COMPLETION = `query($id: ID!) { node(id: $id) { ... on Verification { externalId completion { status } } } }`;

/** The registration answer with its id moved where the gateway does not look (decision 042's unreadable answer). */
const idElsewhere = (body: unknown) => {
  const { verificationExternalId, ...rest } = body as Record<string, unknown>;
  return { ...rest, registration: [{ ref: verificationExternalId }] };
};

describe('an address not yet bound, named an id the ledger records for another verification of its app', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ GATEWAY_API_KEYS: API_KEY, SANDBOX_CALLBACK_DELAY_MS: '600000' });
  });
  afterAll(() => t.close());

  async function register(input: Record<string, unknown>): Promise<{ id: string; externalId: string }> {
    const res = await t.graphql(
      REGISTER,
      { input: { workflowId: 'wf-claims', applicant: { lastName: 'Claims' }, ...input } },
      { key: API_KEY },
    );
    expect(res.errors).toBeUndefined();
    return res.data!.registerVerification.verification;
  }

  async function completion(id: string): Promise<unknown> {
    const res = await t.graphql(COMPLETION, { id }, { key: API_KEY });
    expect(res.errors).toBeUndefined();
    return res.data!.node.completion;
  }

  it('refuses it, storing nothing, and is still bound by its own verification’s id', async () => {
    // Two verifications registered without a callback: one the upstream assigned an id, one with the app's own id
    // (recorded under the id the gateway derived and sent).
    const assigned = await register({ callback: false });
    const own = await register({ callback: false, externalId: 'claims-own' });
    // Its node id is the id sent upstream, derived from the app and its own id.
    expect(own.id).not.toBe(own.externalId);
    const sandbox = t.gateway.sandbox.verification!;
    sandbox.faults.enqueueFor(VERIFICATIONS_PATH, { alter: idElsewhere });
    const incomplete = await t.graphql(
      REGISTER,
      { input: { workflowId: 'wf-claims', applicant: { lastName: 'Unbound' } } },
      { key: API_KEY },
    );
    expect(incomplete.errors![0]!.extensions!.code).toBe('UPSTREAM_ANSWER_INCOMPLETE');
    const unbound = sandbox.verifications().at(-1)!;

    for (const named of [assigned.externalId, assigned.externalId.toUpperCase(), own.externalId, own.id]) {
      const res = await postCallback(unbound.callbackUrl!, { verificationExternalId: named, status: 'HIJACK' });
      expect(res.status, named).toBe(400);
      expect(res.body.error_description, named).toMatch(/names another verification/);
    }
    expect(await completion(assigned.id)).toBeNull();
    expect(await completion(own.id)).toBeNull();

    // Its own verification's id binds it, and its result is kept.
    const mine = await postCallback(unbound.callbackUrl!, {
      verificationExternalId: unbound.externalId,
      status: 'OWN',
    });
    expect(mine.status).toBe(204);
    expect(await completion(assigned.id)).toBeNull();
    const events = await t.gateway.services.store.db
      .selectFrom('events')
      .select('key')
      .where('kind', '=', 'verification')
      .execute();
    expect(events.map((e) => e.key)).toEqual([unbound.externalId]);
  });
});
