import { randomBytes } from 'node:crypto';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { collect, postNotification, SUBSCRIPTION, wsClient } from '../helpers/mobile-id.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { waitFor, waitForSubscribers } from '../helpers/wait.js';

/**
 * An event stored on one replica whose NOTIFY never goes out: the replica stalled (or died) after its commit, before
 * it published. The sender's retry reaches another replica, which finds it stored and answers 204 as a duplicate.
 * A subscriber waiting on a third replica must still get it: it was acknowledged.
 */
describe('an event stored on a replica that never published it', () => {
  let pg: TestPostgres;
  let stalled: TestGateway;
  let b: TestGateway;
  let c: TestGateway;

  beforeAll(async () => {
    pg = await startPostgres();
    const shared = {
      DATABASE_URL: await pg.createDatabase('unnotified'),
      TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
    };
    // Stops for good once a mobile-ID notification is stored, before its 204 and its publish (src/phases.ts).
    stalled = await startTestGateway({ ...shared, GATEWAY_TEST_PAUSE_AT: 'webhook-stored' });
    b = await startTestGateway(shared);
    c = await startTestGateway(shared);
  }, 120_000);
  afterAll(async () => {
    await c?.close();
    await b?.close();
    await stalled?.close();
    await pg?.stop();
  });

  it('the retry acknowledged on B as a duplicate reaches subscribers on B and on C', async () => {
    const authReqId = `unnotified-${randomBytes(4).toString('hex')}`;
    const notification = { auth_req_id: authReqId, error: 'access_denied', error_description: 'user refused' };
    const onB = collect(wsClient(b), SUBSCRIPTION, { id: authReqId });
    const onC = collect(wsClient(c), SUBSCRIPTION, { id: authReqId });
    await waitForSubscribers(b, 'mobile-id', authReqId);
    await waitForSubscribers(c, 'mobile-id', authReqId);

    // The first delivery is stored on the stalled replica, which never answers it: the sender gives up on it.
    const abandoned = new AbortController();
    const first = request(`${stalled.url}/webhooks/mobile-id`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${stalled.gateway.sandbox.mobileId!.notificationToken}`,
        'content-type': 'application/json',
      },
      body: JSON.stringify(notification),
      signal: abandoned.signal,
    }).catch((err: unknown) => err);
    await waitFor(() => stalled.logs().includes('paused at a test phase'), 20_000, 'the notification stored');
    abandoned.abort();
    expect(await first).toBeInstanceOf(Error);

    // The sender's retry reaches B: stored already, acknowledged.
    const retry = await postNotification(b, notification);
    expect(retry.status).toBe(204);

    for (const [name, seen] of [
      ['B', onB],
      ['C', onC],
    ] as const) {
      await waitFor(() => seen.results.length > 0 || seen.errors.length > 0, 40_000, `the event on ${name}`);
      expect(seen.errors).toEqual([]);
      expect(seen.results).toHaveLength(1);
      expect(seen.results[0].data.mobileIdAuthentication).toMatchObject({
        __typename: 'MobileIdAuthenticationFailed',
        authReqId,
        error: 'access_denied',
      });
    }
    onB.stop();
    onC.stop();
  }, 90_000);
});
