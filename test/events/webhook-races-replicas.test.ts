// Webhooks that reach two replicas at once (two gateways on one embedded PostgreSQL, real HTTP and graphql-ws): a
// notification and its exact repeat, or two different notifications for one auth_req_id, posted to A and B together;
// a verification callback and its exact repeat, posted to A and B together. One event each time, one delivery per
// subscriber on either replica, and for two different notifications one 204 and one 409.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { VERIFICATION_EVENT_KIND } from '../../src/identity/service.js';
import type { TestGateway } from '../helpers/gateway.js';
import { collect, postNotification, storedEvents, wsClient } from '../helpers/mobile-id.js';
import { startReplicas, type Replicas } from '../helpers/postgres.js';
import { deliveredEverywhere, postCompletion, registerVerifications } from '../helpers/resumable.js';
import { waitFor, waitForSubscribers } from '../helpers/wait.js';

const KEY = 'webhook-races-key';
const ROUNDS = 20;

const MOBILE_ID = `subscription($id: String!) {
  mobileIdAuthentication(authReqId: $id) { __typename ... on MobileIdAuthenticationFailed { authReqId reason } }
}`;
const VERIFICATIONS = `subscription { verificationCompleted { externalId payload } }`;

let r: Replicas;
beforeAll(async () => {
  r = await startReplicas('webhook_races', { GATEWAY_API_KEYS: KEY, SANDBOX_CALLBACK_DELAY_MS: '600000' });
}, 120_000);
afterAll(async () => {
  await r?.close();
});

const failure = async (authReqId: string, outcome: 'CLIENT_TIMEOUT' | 'SERVER_ERROR' = 'CLIENT_TIMEOUT') =>
  (await r.a.gateway.sandbox.mobileId!.buildNotification({ authReqId, outcome })).body;

describe('mobile-ID notifications posted to two replicas at once', () => {
  it('an exact repeat at A and B together: both 204, one event, one result to a subscriber on each replica', async () => {
    for (let i = 0; i < ROUNDS; i++) {
      const id = `race-repeat-${i}`;
      const subs = [r.a, r.b].map((t) => collect(wsClient(t, { key: KEY }), MOBILE_ID, { id }));
      await waitForSubscribers(r.a, 'mobile-id', id);
      await waitForSubscribers(r.b, 'mobile-id', id);
      const body = await failure(id);
      const answers = await Promise.all([postNotification(r.a, body), postNotification(r.b, body)]);
      expect(answers.map((x) => x.status)).toEqual([204, 204]);
      for (const s of subs) await s.done;
      for (const s of subs) {
        expect(s.errors).toEqual([]);
        expect(s.results.map((x) => x.data.mobileIdAuthentication.authReqId)).toEqual([id]);
      }
      expect(await storedEvents(r.a, id)).toHaveLength(1);
    }
  }, 120_000);

  it('two different notifications for one auth_req_id at A and B together: one 204 and one 409, one event', async () => {
    for (let i = 0; i < ROUNDS; i++) {
      const id = `race-conflict-${i}`;
      const answers = await Promise.all([
        postNotification(r.a, await failure(id, 'CLIENT_TIMEOUT')),
        postNotification(r.b, await failure(id, 'SERVER_ERROR')),
      ]);
      expect(answers.map((x) => x.status).sort()).toEqual([204, 409]);
      expect(await storedEvents(r.a, id)).toHaveLength(1);
    }
  }, 120_000);
});

describe('verification callbacks posted to two replicas at once', () => {
  it('an exact repeat at A and B together: one event, one delivery per subscriber on each replica, later events still delivered', async () => {
    const urls = await registerVerifications(r.a, r.a.gateway.sandbox.verification!, KEY, 1);
    const [[id, url]] = [...urls.entries()] as [[string, string]];
    const on = (t: TestGateway) => url.replace(r.a.url, t.url);
    await deliveredEverywhere(r.a, r.b);
    const subs = [r.a, r.b].map((t) => collect(wsClient(t, { key: KEY }), VERIFICATIONS, {}));
    await waitForSubscribers(r.a, VERIFICATION_EVENT_KIND);
    await waitForSubscribers(r.b, VERIFICATION_EVENT_KIND);
    const names: string[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      names.push(`v${i}`);
      await Promise.all([postCompletion(on(r.a), id, `v${i}`), postCompletion(on(r.b), id, `v${i}`)]);
    }
    names.push('last');
    await postCompletion(on(r.b), id, 'last');
    for (const s of subs) {
      await waitFor(() => s.results.some((x) => x.data.verificationCompleted.payload.n === 'last'), 30_000, 'last');
      expect(s.results.map((x) => x.data.verificationCompleted.payload.n)).toEqual(names);
      s.stop();
    }
    const rows = await r.a.gateway.services.store.db
      .selectFrom('events')
      .select('seq')
      .where('kind', '=', VERIFICATION_EVENT_KIND)
      .where('key', '=', id)
      .execute();
    expect(rows).toHaveLength(ROUNDS + 1);
  }, 120_000);
});
