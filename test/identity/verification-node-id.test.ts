import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const REGISTER = `mutation { registerVerification(input: { workflowId: "wf-kyc", applicant: { n: 1 }, externalId: "mine-1" }) {
  verification { id externalId } } }`;

// What the docs pane says of `Verification.id` is what `node` takes: the derived UUID, never the app's external id;
// the id the upstream assigned when the app gave none.
describe('a verification is found by node through its id, a UUID that is not its externalId', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ SANDBOX_CALLBACK_DELAY_MS: '600000' });
  });
  afterAll(() => t.close());

  it('finds it by id, not by externalId, and its description says so', async () => {
    const made = await t.graphql(REGISTER);
    expect(made.errors).toBeUndefined();
    const { id, externalId } = made.data!.registerVerification.verification;
    expect(externalId).toBe('mine-1');
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const read = await t.graphql(
      `query($id: ID!, $e: ID!) { byId: node(id: $id) { id } byExternalId: node(id: $e) { id } }`,
      { id, e: externalId },
    );
    expect(read.data).toEqual({ byId: { id }, byExternalId: null });
    const described = await t.graphql(`{ __type(name: "Verification") { fields { name description } } }`);
    const field = described.data!.__type.fields.find((f: { name: string }) => f.name === 'id');
    expect(field.description).not.toMatch(/same as `externalId`/i);
    expect(field.description).toMatch(/UUID/);
  });

  it('without an externalId, its id is the one the upstream assigned, and its description says so', async () => {
    const made = await t.graphql(
      `mutation { registerVerification(input: { workflowId: "wf-kyc", applicant: { n: 2 } }) { verification { id externalId } } }`,
    );
    expect(made.errors).toBeUndefined();
    const { id, externalId } = made.data!.registerVerification.verification;
    expect(id).toBe(t.gateway.sandbox.verification!.verifications().at(-1)!.externalId);
    expect(externalId).toBe(id);
    expect((await t.graphql(`query($id: ID!) { node(id: $id) { id } }`, { id })).data!.node).toEqual({ id });
    const described = await t.graphql(`{ __type(name: "Verification") { fields { name description } } }`);
    const field = described.data!.__type.fields.find((f: { name: string }) => f.name === 'id');
    expect(field.description).toMatch(/the id the upstream assigned/);
  });
});
