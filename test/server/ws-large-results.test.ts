// Subscription results of every size reach graphql-ws clients whole, in order, to several subscribers of one
// verification at once: results that need WebSocket's 7-bit, 16-bit and 64-bit payload lengths (up to 64 KiB and
// beyond), with the gateway's shared encoding of a result (src/server/ws.ts sendResult).
import { randomUUID } from 'node:crypto';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { subscribe } from '../helpers/identity.js';
import { wsClient } from '../helpers/mobile-id.js';
import { subscribers, waitFor } from '../helpers/wait.js';

const REGISTER = `mutation($id: ID!) { registerVerification(input: { workflowId: "wf-large", applicant: { lastName: "Large" }, externalId: $id }) { verification { id } } }`;
const COMPLETED = `subscription($id: ID) { verificationCompleted(externalId: $id) { externalId payload } }`;

describe('large subscription results over graphql-ws', () => {
  let t: TestGateway;
  beforeAll(async () => {
    // Callback bodies are kept whole up to CALLBACK_BODY_KEPT_BYTES (8 KiB by default): raised here, so that the
    // results sent over the socket are as large as the test needs.
    t = await startTestGateway({ SANDBOX_CALLBACK_DELAY_MS: '600000', CALLBACK_BODY_KEPT_BYTES: String(1024 * 1024) });
  });
  afterAll(() => t.close());

  it('delivers callbacks of 100 B, 64 KiB and 300 KiB whole and in order to three subscribers of one verification', async () => {
    const externalId = `large-${randomUUID()}`;
    const registered = await t.graphql(REGISTER, { id: externalId });
    const upstreamId = registered.data!.registerVerification.verification.id as string;
    const callbackUrl = t.gateway.sandbox
      .verification!.verifications()
      .find((v) => v.externalId === upstreamId)!.callbackUrl!;

    const clients = [wsClient(t), wsClient(t), wsClient(t)];
    try {
      const subs = clients.map((c) => subscribe(c, COMPLETED, { id: externalId }));
      await waitFor(() => subscribers(t, 'verification', externalId) === 3, 20_000, 'three subscribers');

      // The payload's JSON around the text adds some bytes: 100 B, just under and over 64 KiB, and 300 KiB.
      const sizes = [100, 65_400, 65_600, 300_000];
      const bodies = sizes.map((n, i) => ({
        verificationExternalId: upstreamId,
        status: `STEP_${i}`,
        note: 'x'.repeat(n),
      }));
      for (const body of bodies) {
        const res = await request(callbackUrl, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        expect(res.statusCode).toBe(204);
        await res.body.dump();
      }
      await waitFor(
        () => subs.every((s) => s.received.length === bodies.length),
        20_000,
        'every result at every subscriber',
      );
      for (const s of subs) {
        expect(s.errors).toEqual([]);
        expect(s.received.map((r) => r.verificationCompleted.payload)).toEqual(bodies);
        expect(s.received.every((r) => r.verificationCompleted.externalId === externalId)).toBe(true);
      }
    } finally {
      await Promise.all(clients.map((c) => c.dispose()));
    }
  });
});
