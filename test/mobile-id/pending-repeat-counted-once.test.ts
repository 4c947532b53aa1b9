import type { CryptoKey } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';

import { startTestGateway, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import {
  OPERATOR_CLIENT_ID,
  OPERATOR_ISSUER,
  operatorJwks,
  postNotification,
  QUERY,
  signedNotification,
  storedEvents,
} from '../helpers/mobile-id.js';

// A notification kept pending verification (the JWKS down) was acknowledged with 204 and counted against its app's
// storage bound. An exact repeat stored before the pending one was verified is the one event that bound counts.

const API_KEY = 'app-key-1';
const OPS = 'ops-key';
const NOTIFY = 'operator-notification-token';
const ISSUER = OPERATOR_ISSUER;
const CLIENT_ID = OPERATOR_CLIENT_ID;
const AHEAD = 10 * 60_000;

const started: Array<{ close(): Promise<unknown> }> = [];
afterEach(async () => {
  await Promise.all(
    started
      .splice(0)
      .reverse()
      .map((s) => s.close()),
  );
});

/** The operator's JWKS, closed after the test. */
async function jwksServer() {
  const s = await operatorJwks();
  started.push(s);
  return s;
}

const notification = (key: CryptoKey, authReqId: string, sub: string) => signedNotification(key, authReqId, { sub });

/** `clock` is the time of notifications, passes and the JWKS retry schedule; no pass runs unless the test calls one. */
async function gateway(
  jwksUrl: string,
  clock: { now: number },
  env: Record<string, string> = {},
): Promise<TestGateway> {
  const gw = await startTestGateway(
    {
      ...env,
      DATA_DIR: tempDataDir(),
      GATEWAY_API_KEYS: API_KEY,
      OPERATOR_API_KEYS: OPS,
      SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
      MOBILEID_NOTIFICATION_TOKENS: NOTIFY,
      MOBILEID_JWKS_URL: jwksUrl,
      MOBILEID_ISSUER: ISSUER,
      MOBILEID_CLIENT_ID: CLIENT_ID,
    },
    { testing: { clock: () => clock.now, scheduleJob: () => () => undefined } },
  );
  started.push(gw);
  return gw;
}

describe('a notification kept pending verification', () => {
  it("counts once against its app's storage bound when an exact repeat was stored before it was verified", async () => {
    const jwks = await jwksServer();
    const clock = { now: Date.now() };
    const gw = await gateway(jwks.url, clock, { GATEWAY_API_KEYS: `shop:${API_KEY}`, APP_EVENTS_STORED: '2' });
    const issued = await gw.graphql(
      `mutation { issueMobileIdNotificationToken(ttlSeconds: 3600) { token } }`,
      {},
      { key: API_KEY },
    );
    const token = issued.data!.issueMobileIdNotificationToken.token as string;
    const first = await notification(jwks.privateKey, 'counted-1', 'first-subject');
    expect((await postNotification(gw, first, { token })).status).toBe(204);
    jwks.setUp(true);
    clock.now += 60_000;
    // The sender's repeat, verifiable now, is stored; the pending one is then a duplicate of it.
    expect((await postNotification(gw, first, { token })).status).toBe(204);
    expect(await gw.gateway.services.mobileId.verifyPending((clock.now += AHEAD))).toMatchObject({ verified: 1 });
    expect(await storedEvents(gw, 'counted-1')).toHaveLength(1);

    // One event stored of the two the bound allows: the next notification is taken.
    const next = await postNotification(gw, await notification(jwks.privateKey, 'counted-2', 's'), { token });
    expect(next.status, next.text).toBe(204);
  });
});
