import { createClient } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';

import { VERIFICATION_EVENT_KIND } from '../../src/identity/service.js';
import type { TestGateway } from '../helpers/gateway.js';
import { collect, postNotification, SUBSCRIPTION, wsClient } from '../helpers/mobile-id.js';
import { startReplicas, type Replicas } from '../helpers/postgres.js';
import { waitFor, waitForSubscribers } from '../helpers/wait.js';

/** PostgreSQL refuses a NOTIFY payload of this many bytes or more (the `pg_notify` documentation). */
const NOTIFY_PAYLOAD_LIMIT = 8000;

describe('events cross replicas through PostgreSQL LISTEN/NOTIFY', () => {
  let replicas: Replicas | undefined;
  let a: TestGateway;
  let b: TestGateway;
  beforeAll(async () => {
    replicas = await startReplicas('replicas');
    ({ a, b } = replicas);
  }, 120_000);
  afterAll(() => replicas?.close());

  it('a webhook that hits replica A reaches a subscriber on replica B', async () => {
    const client = createClient({
      url: b.url.replace('http', 'ws') + '/graphql',
      webSocketImpl: WebSocket,
      retryAttempts: 0,
    });
    try {
      const sub = client.iterate<{ mobileIdAuthentication: { __typename: string; authReqId: string } }>({
        query: `subscription { mobileIdAuthentication(authReqId: "replicated-1") { __typename ... on MobileIdAuthenticated { authReqId } } }`,
      });
      const first = sub.next();
      // B's subscription is registered before A publishes (a late one would read the log instead)
      await waitForSubscribers(b, 'mobile-id');
      const sent = await a.graphql(
        `mutation { sandboxCompleteMobileIdAuthentication(authReqId: "replicated-1", outcome: SUCCESS) { httpStatus } }`,
      );
      expect(sent.data!.sandboxCompleteMobileIdAuthentication.httpStatus).toBe(204);
      const msg = await first;
      expect(msg.value.data).toEqual({
        mobileIdAuthentication: { __typename: 'MobileIdAuthenticated', authReqId: 'replicated-1' },
      });
    } finally {
      await client.dispose();
    }
  });

  it('the event is published once on the replica that received it', async () => {
    const client = createClient({
      url: a.url.replace('http', 'ws') + '/graphql',
      webSocketImpl: WebSocket,
      retryAttempts: 0,
    });
    try {
      const received: string[] = [];
      const done = new Promise<void>((resolve, reject) => {
        client.subscribe(
          { query: `subscription { verificationCompleted { externalId status } }` },
          { next: (m) => received.push(JSON.stringify(m.data)), error: reject, complete: resolve },
        );
      });
      await waitForSubscribers(a, VERIFICATION_EVENT_KIND);
      const reg = await a.graphql(
        `mutation { registerVerification(input: { workflowId: "kyc", applicant: { name: "x" } }) { verification { externalId } } }`,
      );
      const externalId = reg.data!.registerVerification.verification.externalId;
      await expect.poll(() => received.length, { timeout: 20_000 }).toBeGreaterThanOrEqual(1);
      // A second verification, completed after the first, is the marker: a second copy would come before it.
      const marker = await a.graphql(
        `mutation { registerVerification(input: { workflowId: "kyc", applicant: { name: "y" } }) { verification { externalId } } }`,
      );
      const markerId = marker.data!.registerVerification.verification.externalId;
      await expect.poll(() => received.some((r) => r.includes(markerId)), { timeout: 20_000 }).toBe(true);
      expect(received.filter((r) => r.includes(externalId))).toHaveLength(1);
      void done;
    } finally {
      await client.dispose();
    }
  });

  it('a notification larger than a NOTIFY payload still reaches a subscriber on the other replica, whole', async () => {
    // Long texts the spec allows (an error_description and a correlation_id of 4,000 characters each) and an extra
    // member as long as the gateway keeps (4 KiB) make the event exceed what one NOTIFY may carry: the bus must send
    // a reference to the stored event, not the event.
    const detail = 'x'.repeat(4000);
    const long = { error_description: `client timeout ${'d'.repeat(3980)}`, correlation_id: 'c'.repeat(4000) };
    const id = 'replicated-large';
    const client = wsClient(b);
    try {
      const sub = collect(client, SUBSCRIPTION, { id });
      await waitForSubscribers(b, 'mobile-id');
      const sent = await postNotification(a, {
        auth_req_id: id,
        error: 'access_denied',
        ...long,
        vendor_detail: detail,
      });
      expect(sent.status).toBe(204);
      const [stored] = await a.gateway.services.store.db
        .selectFrom('events')
        .select(['payload'])
        .where('kind', '=', 'mobile-id')
        .where('key', '=', id)
        .execute();
      expect(Buffer.byteLength(stored!.payload)).toBeGreaterThan(NOTIFY_PAYLOAD_LIMIT);
      await waitFor(() => sub.results.length > 0 || sub.errors.length > 0, 20_000);
      expect(sub.errors).toEqual([]);
      const event = sub.results[0].data.mobileIdAuthentication;
      expect(event).toMatchObject({
        __typename: 'MobileIdAuthenticationFailed',
        authReqId: id,
        error: 'access_denied',
      });
      expect(event.otherFields).toEqual({ vendor_detail: detail });
    } finally {
      await client.dispose();
    }
  });
});
