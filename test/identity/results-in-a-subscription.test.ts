// `Verification.result` read under a subscription (`verificationCompleted { verification { result } }`) asks the
// results endpoint for each event: a subscription lives for many events, and what one event's execution loaded (an
// answer the gateway could not read, UPSTREAM_ANSWER_INCOMPLETE; a result the upstream has changed since) must not
// answer the next one. The sandbox upstream's results answer is made unreadable for the first event only.
import { createClient } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';

import { VERIFICATION_EVENT_KIND } from '../../src/identity/service.js';
import { RESULTS_PATH } from '../../src/sandbox/verification.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { postCompletion, registerVerifications } from '../helpers/resumable.js';
import { waitFor, waitForSubscribers } from '../helpers/wait.js';

const KEY = 'key-results-subscription-0123456789';
const WATCH = /* GraphQL */ `
  subscription Watch($externalId: ID) {
    verificationCompleted(externalId: $externalId) {
      payload
      verification {
        result {
          externalId
        }
      }
    }
  }
`;

describe('Verification.result under a subscription', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ GATEWAY_API_KEYS: `app:${KEY}`, SANDBOX_CALLBACK_DELAY_MS: '600000' });
  });
  afterAll(() => t?.close());

  it('is read again for each event: an unreadable answer for one event is not the next one answer', async () => {
    const [id, url] = [...(await registerVerifications(t, t.gateway.sandbox.verification!, KEY, 1))][0]!;
    const client = createClient({
      url: `${t.url.replace(/^http/, 'ws')}/graphql`,
      webSocketImpl: WebSocket,
      retryAttempts: 0,
      connectionParams: { authorization: `Bearer ${KEY}` },
    });
    const results: any[] = [];
    client.subscribe(
      { query: WATCH, variables: { externalId: id } },
      {
        next: (value) => void results.push(value),
        error: (err) => void results.push({ failed: err }),
        complete: () => undefined,
      },
    );
    try {
      await waitForSubscribers(t, VERIFICATION_EVENT_KIND);
      t.gateway.sandbox.verification!.faults.enqueueFor(RESULTS_PATH, { alter: () => ({}) });
      await postCompletion(url, id, 'first');
      await waitFor(() => results.length === 1, 20_000, 'the first event');
      expect(results[0].errors?.[0]?.extensions).toMatchObject({ code: 'UPSTREAM_ANSWER_INCOMPLETE' });
      // The upstream answers readably again.
      await postCompletion(url, id, 'second');
      await waitFor(() => results.length === 2, 20_000, 'the second event');
      expect(results[1].data.verificationCompleted.payload.n).toBe('second');
      expect(results[1].errors).toBeUndefined();
      expect(results[1].data.verificationCompleted.verification.result).toMatchObject({ externalId: id });
    } finally {
      await client.dispose();
    }
  });
});
