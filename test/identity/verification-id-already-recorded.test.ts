// A registration sent without an external id is recorded under the id the verification service assigns. When that id
// is one the ledger already holds for another creation (another app's identification, whose platform's ids may meet
// the verification platform's; another app's verification, from a service that answers an id twice), the ledger keeps
// the first record, and the app was told a verification was registered that it could then not read: no node, no
// result, the upstream never asked. It is told so (UPSTREAM_ANSWER_INCOMPLETE, the answer kept with its key, as an
// identification creation answered so is), and the first record stays its owner's, as it was.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { VERIFICATIONS_PATH } from '../../src/sandbox/verification.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const CREATE = `mutation { createIdentification(input: { workflowId: "wf-first" }) { identification { id url } } }`;
const READ_IDENTIFICATION = `query($id: ID!) { identification(id: $id) { id url workflowId } }`;
const REGISTER = `mutation($key: UUID) {
  registerVerification(input: { workflowId: "wf-second", applicant: { lastName: "Second" } }, idempotencyKey: $key) {
    verification { externalId }
  }
}`;
const READ_VERIFICATION = `query($id: ID!) { node(id: $id) { ... on Verification { externalId workflowId } } }`;

describe('a registration answered with an id the ledger holds for another creation', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ GATEWAY_API_KEYS: 'key-a,key-b', SANDBOX_CALLBACK_DELAY_MS: '600000' });
  });
  afterAll(() => t.close());

  const registrations = () =>
    t.gateway.sandbox.verification!.requests.filter((r) => r.method === 'POST' && r.path === VERIFICATIONS_PATH).length;

  /** key-a registers without an id, and the service answers with `id`: the error, and the same call again. */
  async function registerAnswered(id: string) {
    t.gateway.sandbox.verification!.faults.enqueueFor(VERIFICATIONS_PATH, {
      alter: (body) => ({ ...(body as Record<string, unknown>), verificationExternalId: id }),
    });
    const before = registrations();
    const key = randomUUID();
    const res = await t.graphql(REGISTER, { key }, { key: 'key-a' });
    expect(res.data?.registerVerification ?? null).toBeNull();
    expect(res.errors![0]!.extensions).toMatchObject({
      code: 'UPSTREAM_ANSWER_INCOMPLETE',
      upstream: 'verification',
      idempotencyKey: key,
    });
    expect(res.errors![0]!.message).toContain(id);
    // The key keeps the answer: the same call again answers the same and sends nothing.
    const again = await t.graphql(REGISTER, { key }, { key: 'key-a' });
    expect(again.errors![0]!.extensions).toMatchObject({ code: 'UPSTREAM_ANSWER_INCOMPLETE', idempotencyKey: key });
    expect(registrations() - before).toBe(1);
  }

  it("another app's identification: UPSTREAM_ANSWER_INCOMPLETE, and the identification is its owner's as it was", async () => {
    const created = await t.graphql(CREATE, {}, { key: 'key-b' });
    expect(created.errors).toBeUndefined();
    const held = created.data!.createIdentification.identification as { id: string; url: string };

    await registerAnswered(held.id);
    const read = await t.graphql(READ_IDENTIFICATION, { id: held.id }, { key: 'key-b' });
    expect(read.data!.identification).toEqual({ id: held.id, url: held.url, workflowId: 'wf-first' });
  });

  it("another app's verification: UPSTREAM_ANSWER_INCOMPLETE, and the verification is its owner's as it was", async () => {
    const theirs = await t.graphql(REGISTER, { key: randomUUID() }, { key: 'key-b' });
    expect(theirs.errors).toBeUndefined();
    const id = theirs.data!.registerVerification.verification.externalId as string;

    await registerAnswered(id);
    const read = await t.graphql(READ_VERIFICATION, { id }, { key: 'key-b' });
    expect(read.data!.node).toEqual({ externalId: id, workflowId: 'wf-second' });
    expect((await t.graphql(READ_VERIFICATION, { id }, { key: 'key-a' })).data!.node).toBeNull();
  });
});
