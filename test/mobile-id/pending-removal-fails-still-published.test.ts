// A pending mobile-ID notification verified later is appended to the event log, then its pending row is removed, then
// it is published. The removal failing (the database away a moment) must not keep it from its subscribers: the next
// pass finds the event a duplicate and publishes nothing, so on SQLite a live subscriber never got it. Now it is
// published whatever the removal does, the failure logged once, and the row left behind removed by the next pass.
// The tests drive the retry schedule themselves (verifyPending with a time far enough ahead), never by waiting.
import { afterEach, describe, expect, it, vi } from 'vitest';

import { PendingVerifications } from '../../src/mobile-id/pending.js';
import { logLines, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import {
  collect,
  OPERATOR_CLIENT_ID,
  OPERATOR_ISSUER,
  operatorJwks,
  postNotification,
  signedNotification,
  storedEvents,
  SUBSCRIPTION,
  wsClient,
} from '../helpers/mobile-id.js';
import { waitForSubscribers } from '../helpers/wait.js';

const API_KEY = 'app-key-1';
const NOTIFY = 'operator-notification-token';
const AHEAD = 10 * 60_000;

const started: Array<{ close(): Promise<unknown> }> = [];
afterEach(async () => {
  vi.restoreAllMocks();
  await Promise.all(
    started
      .splice(0)
      .reverse()
      .map((s) => s.close()),
  );
});

describe('a pending mobile-ID notification verified later, whose pending row cannot be removed', () => {
  it('is published to its waiting subscriber all the same, once; the failure is logged once, the row removed later', async () => {
    const jwks = await operatorJwks();
    started.push(jwks);
    const gw: TestGateway = await startTestGateway({
      GATEWAY_API_KEYS: API_KEY,
      SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
      MOBILEID_NOTIFICATION_TOKENS: NOTIFY,
      MOBILEID_JWKS_URL: jwks.url,
      MOBILEID_ISSUER: OPERATOR_ISSUER,
      MOBILEID_CLIENT_ID: OPERATOR_CLIENT_ID,
    });
    started.push(gw);
    const client = wsClient(gw, { key: API_KEY });
    started.push({ close: async () => client.dispose() });
    const sub = collect(client, SUBSCRIPTION, { id: 'unremoved-1' });
    await waitForSubscribers(gw, 'mobile-id', 'unremoved-1');

    // The JWKS down: acknowledged and kept pending.
    const notification = await signedNotification(jwks.privateKey, 'unremoved-1', { kid: 'op-1' });
    expect((await postNotification(gw, notification, { token: NOTIFY })).status).toBe(204);
    expect(await storedEvents(gw, 'unremoved-1')).toEqual([]);

    // The JWKS back; the pending row's removal fails once, as a database gone for a moment does.
    jwks.setUp(true);
    const remove = vi
      .spyOn(PendingVerifications.prototype, 'remove')
      .mockRejectedValueOnce(new Error('the connection was closed'));
    expect(await gw.gateway.services.mobileId.verifyPending(Date.now() + AHEAD)).toMatchObject({ verified: 1 });
    expect(remove).toHaveBeenCalledTimes(1);
    await sub.done;
    expect(sub.results.map((r) => r.data.mobileIdAuthentication.authReqId)).toEqual(['unremoved-1']);
    const failures = logLines<{ msg: string; authReqId?: string; err?: { message: string } }>(gw, (l) =>
      /pending row could not be removed/.test(l.msg),
    );
    expect(failures).toEqual([
      expect.objectContaining({
        authReqId: 'unremoved-1',
        err: expect.objectContaining({ message: 'the connection was closed' }),
      }),
    ]);

    // Once its lease is over the next pass finds it stored already: the row goes, nothing is stored or sent again.
    await gw.gateway.services.mobileId.verifyPending(Date.now() + 2 * AHEAD);
    const pending = gw.gateway.services.store.db.selectFrom('mobile_id_pending').select('auth_req_id');
    expect(await pending.execute()).toEqual([]);
    expect(await storedEvents(gw, 'unremoved-1')).toHaveLength(1);
  });
});
