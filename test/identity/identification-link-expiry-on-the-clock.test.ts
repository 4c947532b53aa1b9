// An identification link's expiry (its creation plus the lifetime asked for) is read on the gateway's clock, as every
// stored time compared with now is: a test moves the clock past it instead of waiting.
import { describe, expect, it } from 'vitest';

import { gatewaysPerTest } from '../helpers/gateway.js';

const CREATE = `mutation($input: CreateIdentificationInput!) {
  createIdentification(input: $input) { identification { id createdAt expiresAt expired } } }`;
const READ = `query($id: ID!) { identification(id: $id) { expiresAt expired } }`;

const start = gatewaysPerTest();

describe("an identification link's expiry, on the gateway clock", () => {
  it('is not expired within its lifetime and is expired once the clock has passed it', async () => {
    const clock = { now: Date.now() - 3_600_000 };
    const gw = await start({}, { testing: { clock: () => clock.now } });
    const created = await gw.graphql(CREATE, { input: { workflowId: 'wf-expiry', linkLifetimeInMinutes: 5 } });
    expect(created.errors).toBeUndefined();
    const link = created.data!.createIdentification.identification;
    expect(Date.parse(link.createdAt)).toBe(clock.now);
    expect(Date.parse(link.expiresAt)).toBe(clock.now + 5 * 60_000);
    expect(link.expired).toBe(false);

    clock.now += 4 * 60_000;
    expect((await gw.graphql(READ, { id: link.id })).data!.identification.expired).toBe(false);
    clock.now += 2 * 60_000;
    expect((await gw.graphql(READ, { id: link.id })).data!.identification.expired).toBe(true);
  });
});
