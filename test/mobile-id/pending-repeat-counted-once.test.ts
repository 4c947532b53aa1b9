import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';

import { startTestGateway, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import { postNotification, QUERY, storedEvents } from '../helpers/mobile-id.js';

// A notification kept pending verification (the JWKS down) was acknowledged with 204 and counted against its app's
// storage bound. An exact repeat stored before the pending one was verified is the one event that bound counts.

const API_KEY = 'app-key-1';
const OPS = 'ops-key';
const NOTIFY = 'operator-notification-token';
const ISSUER = 'https://mobileid.operator.example';
const CLIENT_ID = 'sp-client-1';
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

async function jwksServer() {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const jwks = { keys: [{ ...(await exportJWK(publicKey)), kid: 'op-1', alg: 'ES256', use: 'sig' }] };
  let up = false;
  const server = http.createServer((_req, res) => {
    if (!up) {
      res.writeHead(503).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(jwks));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const s = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`,
    setUp: (v: boolean) => void (up = v),
    privateKey,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
  started.push(s);
  return s;
}

async function notification(key: CryptoKey, authReqId: string, sub: string) {
  const accessToken = randomBytes(24).toString('base64url');
  const now = Math.floor(Date.now() / 1000);
  const claims = {
    iss: ISSUER,
    aud: CLIENT_ID,
    sub,
    acr: '3',
    iat: now,
    exp: now + 300,
    at_hash: createHash('sha256').update(accessToken).digest().subarray(0, 16).toString('base64url'),
    'urn:openid:params:jwt:claim:auth_req_id': authReqId,
  };
  const idToken = await new SignJWT(claims).setProtectedHeader({ alg: 'ES256', kid: 'op-1' }).sign(key);
  return {
    auth_req_id: authReqId,
    access_token: accessToken,
    token_type: 'Bearer',
    id_token: idToken,
    expires_in: 3600,
  };
}

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
