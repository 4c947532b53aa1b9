// An identification link's expiry (its creation plus the lifetime asked for) is read on the gateway's clock, as every
// stored time compared with now is: a test moves the clock past it instead of waiting.
import { describe, expect, it } from 'vitest';

import { gatewaysPerTest } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

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

  it('counts the lifetime from when the request was sent, not from when its answer came', async () => {
    const clock = { now: Date.now() - 3_600_000 };
    const gw = await start({}, { testing: { clock: () => clock.now } });
    const sentAt = clock.now;
    // The upstream takes three minutes (on the gateway's clock) to answer: the link it made expires five minutes after
    // it was asked for, and reads expired then, not three minutes later.
    const upstream = gw.gateway.sandbox.identification!.faults.hold();
    const creating = gw.graphql(CREATE, { input: { workflowId: 'wf-slow-answer', linkLifetimeInMinutes: 5 } });
    await waitFor(() => upstream.arrived() === 1, 20_000, 'the creation to reach the upstream');
    clock.now += 3 * 60_000;
    upstream.release();
    const created = await creating;
    expect(created.errors).toBeUndefined();
    const link = created.data!.createIdentification.identification;
    expect(Date.parse(link.expiresAt)).toBe(sentAt + 5 * 60_000);

    clock.now = sentAt + 5 * 60_000;
    expect((await gw.graphql(READ, { id: link.id })).data!.identification.expired).toBe(true);
  });
});
