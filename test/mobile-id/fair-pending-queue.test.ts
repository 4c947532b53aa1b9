// The queue of notifications pending id_token verification is shared by every app, so it is bounded per owner and
// each pass is shared across owners: one app flooding it with notifications it cannot get verified (an unknown kid,
// while the JWKS is down) neither holds up another app's genuine result nor makes the gateway hammer the JWKS
// (docs/decisions/052). Two apps over real HTTP, each on the token it issued itself; the tests hold the clock and run
// the passes themselves (no pass runs on its own), never waiting for time to pass.
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';

import { PASS_ROWS } from '../../src/mobile-id/pending.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { collect, postNotification, QUERY, SUBSCRIPTION, wsClient } from '../helpers/mobile-id.js';
import { waitForSubscribers } from '../helpers/wait.js';

const VICTIM = 'fair-victim-key-0123456789';
const FLOOD = 'fair-flood-key-9876543210';
const OPS = 'fair-ops-key-5555555555';
const ISSUER = 'https://mobileid.operator.example';
const CLIENT_ID = 'sp-client-1';
/** MOBILEID_PENDING_MAX_PER_APP here: more than two passes' worth of rows, so that a due-time order would show. */
const LIMIT = 250;
const OVER = 10;
const ISSUE = `mutation { issueMobileIdNotificationToken(ttlSeconds: 86400) { token } }`;
const REJECTIONS = `{ mobileIdRejections(first: 500) { authReqId httpStatus reason description } }`;

const started: Array<{ close(): Promise<unknown> }> = [];
afterEach(async () => {
  await Promise.all(
    started
      .splice(0)
      .reverse()
      .map((s) => s.close()),
  );
});

/** The operator's JWKS over loopback HTTP, down (503) until the test brings it back; it counts every GET. */
async function jwksServer() {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const jwks = { keys: [{ ...(await exportJWK(publicKey)), kid: 'op-1', alg: 'ES256', use: 'sig' }] };
  let up = false;
  const hits = { down: 0, up: 0 };
  const server = http.createServer((_req, res) => {
    if (!up) {
      hits.down += 1;
      res.writeHead(503).end();
      return;
    }
    hits.up += 1;
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(jwks));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const s = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`,
    setUp: (v: boolean) => void (up = v),
    hits,
    privateKey,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
  started.push(s);
  return s;
}

async function notification(key: CryptoKey, authReqId: string, kid: string) {
  const accessToken = randomBytes(24).toString('base64url');
  const now = Math.floor(Date.now() / 1000);
  const claims = {
    iss: ISSUER,
    aud: CLIENT_ID,
    sub: 'pcr-123',
    iat: now,
    exp: now + 3600,
    at_hash: createHash('sha256').update(accessToken).digest().subarray(0, 16).toString('base64url'),
    'urn:openid:params:jwt:claim:auth_req_id': authReqId,
  };
  const idToken = await new SignJWT(claims).setProtectedHeader({ alg: 'ES256', kid }).sign(key);
  return {
    auth_req_id: authReqId,
    access_token: accessToken,
    token_type: 'Bearer',
    id_token: idToken,
    expires_in: 3600,
  };
}

async function metric(gw: TestGateway, name: string, labels = ''): Promise<number> {
  const text = await (await request(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${OPS}` } })).body.text();
  const m = new RegExp(`^${name}${labels.replace(/[{}]/g, '\\$&')} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

/**
 * A gateway with two apps, `victim` and `flood`, each holding a notification token it issued itself; the JWKS down.
 * `clock` is the time of pending notifications, of each pass and of the JWKS retry schedule; no pass runs unless the
 * test calls `pass()`.
 */
async function twoApps() {
  const jwks = await jwksServer();
  const clock = { now: Date.now() };
  const gw = await startTestGateway(
    {
      GATEWAY_API_KEYS: `victim:${VICTIM},flood:${FLOOD}`,
      OPERATOR_API_KEYS: `ops:${OPS}`,
      SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
      MOBILEID_NOTIFICATION_TOKENS: 'operator-notification-token',
      MOBILEID_JWKS_URL: jwks.url,
      MOBILEID_ISSUER: ISSUER,
      MOBILEID_CLIENT_ID: CLIENT_ID,
      MOBILEID_PENDING_MAX_PER_APP: String(LIMIT),
    },
    { testing: { clock: () => clock.now, scheduleJob: () => () => undefined } },
  );
  started.push(gw);
  const tokenOf = async (key: string) =>
    (await gw.graphql(ISSUE, {}, { key })).data!.issueMobileIdNotificationToken.token as string;
  const tokens = { victim: await tokenOf(VICTIM), flood: await tokenOf(FLOOD) };
  // A key the JWKS never has: the flooder's notifications can never be verified.
  const { privateKey: rogue } = await generateKeyPair('ES256', { extractable: true });
  const flood = async (authReqId: string) =>
    postNotification(gw, await notification(rogue, authReqId, 'rogue-1'), { token: tokens.flood });
  const pass = () => gw.gateway.services.mobileId.verifyPending(clock.now);
  return { gw, jwks, clock, tokens, rogue, flood, pass };
}

describe('a pending-verification queue shared by two apps, one flooding it while the JWKS is down', () => {
  it("delivers the victim's genuine result in the first pass at which it is due once the JWKS is back, whatever the flooder has pending", async () => {
    const { gw, jwks, clock, tokens, flood, pass } = await twoApps();
    const client = wsClient(gw, { key: VICTIM });
    started.push({ close: async () => client.dispose() });
    const sub = collect(client, SUBSCRIPTION, { id: 'victim-1' });
    await waitForSubscribers(gw, 'mobile-id', 'victim-1');

    // The flooder fills its share of the queue first: under a due-time order its rows would all come before the victim's.
    for (let i = 0; i < LIMIT; i++) expect((await flood(`flood-${i}`)).status).toBe(204);
    expect(
      (await postNotification(gw, await notification(jwks.privateKey, 'victim-1', 'op-1'), { token: tokens.victim }))
        .status,
    ).toBe(204);
    expect(await metric(gw, 'gateway_mobile_id_pending_verifications')).toBe(LIMIT + 1);

    // A minute of outage, a pass every 2 s: nothing can be verified, the rows back off.
    for (let t = 2; t <= 60; t += 2) {
      clock.now += 2_000;
      expect(await pass()).toMatchObject({ verified: 0 });
    }
    expect(sub.results).toEqual([]);

    // The JWKS is back. Ten minutes on, every row is due and the JWKS may be fetched: one pass.
    jwks.setUp(true);
    clock.now += 10 * 60_000;
    const first = await pass();
    await sub.done;
    expect(sub.results.map((r) => r.data.mobileIdAuthentication)).toEqual([
      expect.objectContaining({ authReqId: 'victim-1', idTokenVerified: true }),
    ]);
    expect(first.verified).toBe(1);
    // The flooder had an equal share of that pass (half of it, with two owners), not the whole of it.
    expect(first.waiting + first.refused).toBe(PASS_ROWS / 2);
    const read = await gw.graphql(QUERY, { id: 'victim-1' }, { key: VICTIM });
    expect(read.data!.mobileIdAuthentication).toMatchObject({ authReqId: 'victim-1', idTokenVerified: true });
    expect(await metric(gw, 'gateway_mobile_id_pending_verifications')).toBe(LIMIT - first.refused);
  });

  it("refuses the flooder's notifications over MOBILEID_PENDING_MAX_PER_APP with 429, quarantined as PENDING_LIMIT and counted, while the victim's are still acknowledged", async () => {
    const { gw, jwks, tokens, rogue, flood } = await twoApps();
    const firstOne = await notification(rogue, 'flood-first', 'rogue-1');
    expect((await postNotification(gw, firstOne, { token: tokens.flood })).status).toBe(204);
    for (let i = 1; i < LIMIT; i++) expect((await flood(`flood-${i}`)).status).toBe(204);
    for (let i = LIMIT; i < LIMIT + OVER; i++) {
      const res = await flood(`flood-${i}`);
      expect(res.status).toBe(429);
      expect(res.json).toEqual({
        error: 'temporarily_unavailable',
        error_description: expect.stringMatching(/MOBILEID_PENDING_MAX_PER_APP/),
      });
    }
    // A repeat of a notification it already has pending is still a duplicate (204), over the bound too.
    expect((await postNotification(gw, firstOne, { token: tokens.flood })).status).toBe(204);
    // The victim's bound is its own: its notifications are still kept.
    for (let i = 0; i < 6; i++)
      expect(
        (
          await postNotification(gw, await notification(jwks.privateKey, `victim-${i}`, 'op-1'), {
            token: tokens.victim,
          })
        ).status,
      ).toBe(204);

    expect(await metric(gw, 'gateway_mobile_id_rejections_total', '{reason="PENDING_LIMIT"}')).toBe(OVER);
    expect(await metric(gw, 'gateway_mobile_id_pending_verifications')).toBe(LIMIT + 6);
    const theirs = (await gw.graphql(REJECTIONS, {}, { key: FLOOD })).data!.mobileIdRejections as Array<{
      authReqId: string;
      httpStatus: number;
      reason: string;
    }>;
    expect(theirs.map((r) => r.authReqId).sort()).toEqual(
      Array.from({ length: OVER }, (_, i) => `flood-${LIMIT + i}`).sort(),
    );
    expect(theirs.every((r) => r.httpStatus === 429 && r.reason === 'PENDING_LIMIT')).toBe(true);
    expect((await gw.graphql(REJECTIONS, {}, { key: VICTIM })).data!.mobileIdRejections).toEqual([]);
    expect((await gw.graphql(REJECTIONS, {}, { key: OPS })).data!.mobileIdRejections).toHaveLength(OVER);
  });

  it('fetches the JWKS on its backoff schedule during the outage, not once per notification or per pending row', async () => {
    const { gw, jwks, clock, flood, pass } = await twoApps();
    // The flood arrives at one instant: the first notification's check fetches, the others find the fetch failed.
    for (let i = 0; i < LIMIT; i++) await flood(`flood-${i}`);
    expect(jwks.hits.down).toBe(1);

    // Five minutes of outage: every 2 s the flooder sends one more (each one checked) and a pass checks every due row.
    let checks = LIMIT;
    for (let t = 2; t < 300; t += 2) {
      clock.now += 2_000;
      await flood(`flood-late-${t}`);
      const done = await pass();
      checks += 1 + done.verified + done.refused + done.waiting;
    }
    // The schedule: 5 s after the first failure, then 10, 20, 40 and every 60 s; with checks every 2 s the fetches
    // start at 0, 6, 16, 36, 76, 136, 196 and 256 s.
    expect(jwks.hits.down).toBe(8);
    expect(checks).toBeGreaterThan(1_000);
    expect(await metric(gw, 'gateway_mobile_id_jwks_fetches_total', '{outcome="failed"}')).toBe(8);

    // Back up: one fetch serves every row of the next pass, the unknown kids included (refetched at most every 30 s).
    jwks.setUp(true);
    clock.now += 10 * 60_000;
    const back = await pass();
    expect(back.waiting + back.refused).toBeGreaterThan(1);
    expect(jwks.hits.up).toBe(1);
    expect(await metric(gw, 'gateway_mobile_id_jwks_fetches_total', '{outcome="ok"}')).toBe(1);
  });
});
