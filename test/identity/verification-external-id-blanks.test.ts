// A verification's externalId is read as registerVerification keeps it, without the blanks around it: an app that
// registered "  v-1  " finds it again with "  v-1  " or "v-1", through verificationResults, its loaders and
// verificationCompleted.
import { randomUUID } from 'node:crypto';
import type { Client } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { subscribe } from '../helpers/identity.js';
import { wsClient } from '../helpers/mobile-id.js';
import { waitFor } from '../helpers/wait.js';

const REGISTER = /* GraphQL */ `
  mutation Register($input: RegisterVerificationInput!) {
    registerVerification(input: $input) {
      verification {
        id
        externalId
      }
    }
  }
`;
const RESULTS = 'query($ids: [ID!]!) { verificationResults(externalIds: $ids) { externalId status } }';
const COMPLETED = /* GraphQL */ `
  subscription Completed($externalId: ID) {
    verificationCompleted(externalId: $externalId) {
      externalId
      status
      verification {
        externalId
      }
    }
  }
`;

describe('an externalId with blanks around it', () => {
  let t: TestGateway;
  const clients: Client[] = [];

  beforeAll(async () => {
    // The sandbox completes and calls back only when the test says so.
    t = await startTestGateway({ SANDBOX_CALLBACK_DELAY_MS: '600000' });
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.dispose()));
    await t.close();
  });

  it('is registered, read and followed without the blanks, whichever way the app writes it', async () => {
    const bare = `v-${randomUUID()}`;
    const spaced = `  ${bare}  `;
    const reg = await t.graphql(REGISTER, {
      input: { workflowId: 'wf-kyc', applicant: { lastName: 'Ivanova' }, externalId: spaced },
    });
    expect(reg.errors).toBeUndefined();
    const verification = reg.data!.registerVerification.verification as { id: string; externalId: string };
    expect(verification.externalId).toBe(bare);

    const results = await t.graphql(RESULTS, { ids: [spaced, bare] });
    expect(results.errors).toBeUndefined();
    expect(results.data).toEqual({
      verificationResults: [
        { externalId: bare, status: 'IN_PROGRESS' },
        { externalId: bare, status: 'IN_PROGRESS' },
      ],
    });

    // The completion is stored; a subscriber naming the id with its blanks gets it at once.
    await t.gateway.sandbox.verification!.complete(verification.id);
    const c = wsClient(t, {});
    clients.push(c);
    const sub = subscribe(c, COMPLETED, { externalId: spaced });
    const [event] = await waitFor(() => sub.received.length > 0 && sub.received, 20_000, 'the stored completion');
    expect(sub.errors).toEqual([]);
    expect(event.verificationCompleted).toEqual({
      externalId: bare,
      status: 'COMPLETED',
      verification: { externalId: bare },
    });
    sub.stop();
  });
});
