import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { generateKeyPair, type CryptoKey } from 'jose';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import {
  collect,
  OPERATOR_CLIENT_ID,
  OPERATOR_ISSUER,
  operatorJwks,
  postNotification,
  QUERY,
  signedNotification,
  storedEvents,
  SUBSCRIPTION,
  wsClient,
  type Collected,
} from '../helpers/mobile-id.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { waitForSubscribers } from '../helpers/wait.js';

// The sender does not retry, so a notification whose bearer token is valid is always stored and answered 204,
// also when its id_token cannot be verified now (the JWKS down). It is kept pending verification, verified
// later, and only then delivered, or quarantined if the check finally fails (docs/decisions/040). The tests drive
// the retry schedule themselves (verifyPending with a time far enough ahead), never by waiting.

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

const notification = (key: CryptoKey, authReqId: string, kid = 'op-1') => signedNotification(key, authReqId, { kid });

async function gateway(
  jwksUrl: string,
  dataDir = tempDataDir(),
  env: Record<string, string> = {},
): Promise<TestGateway> {
  const gw = await startTestGateway({
    ...env,
    DATA_DIR: dataDir,
    GATEWAY_API_KEYS: API_KEY,
    OPERATOR_API_KEYS: OPS,
    SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
    MOBILEID_NOTIFICATION_TOKENS: NOTIFY,
    MOBILEID_JWKS_URL: jwksUrl,
    MOBILEID_ISSUER: ISSUER,
    MOBILEID_CLIENT_ID: CLIENT_ID,
  });
  started.push(gw);
  return gw;
}

async function metric(gw: TestGateway, name: string, labels = ''): Promise<number> {
  const text = await (await request(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${OPS}` } })).body.text();
  const m = new RegExp(`^${name}${labels.replace(/[{}]/g, '\\$&')} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

async function read(gw: TestGateway, id: string) {
  return (await gw.graphql(QUERY, { id }, { key: API_KEY })).data!.mobileIdAuthentication;
}

/** A subscriber of `id`; `live` waits until it listens on the in-process bus (a later one is served from the log). */
async function watch(gw: TestGateway, id: string, live = true): Promise<Collected> {
  const client = wsClient(gw, { key: API_KEY });
  started.push({ close: async () => client.dispose() });
  const sub = collect(client, SUBSCRIPTION, { id });
  if (live) await waitForSubscribers(gw, 'mobile-id', id);
  return sub;
}

const REJECTIONS = `{ mobileIdRejections(first: 50) { authReqId httpStatus reason description } }`;

describe('a notification whose id_token cannot be verified now', () => {
  it('is acknowledged with 204, kept pending (not delivered), then verified and delivered once when the JWKS is back', async () => {
    const jwks = await jwksServer();
    const gw = await gateway(jwks.url);
    const sub = await watch(gw, 'late-1');

    const res = await postNotification(gw, await notification(jwks.privateKey, 'late-1'), { token: NOTIFY });
    expect(res.status).toBe(204);
    expect(await read(gw, 'late-1')).toBeNull();
    expect(await storedEvents(gw, 'late-1')).toEqual([]);
    expect(sub.results).toEqual([]);
    expect(await metric(gw, 'gateway_mobile_id_pending_verifications')).toBe(1);

    // Still down at the next attempt: it waits, nothing is delivered.
    expect(await gw.gateway.services.mobileId.verifyPending(Date.now() + AHEAD)).toMatchObject({
      verified: 0,
      refused: 0,
    });
    expect(sub.results).toEqual([]);

    jwks.setUp(true);
    await gw.gateway.services.mobileId.verifyPending(Date.now() + 2 * AHEAD);
    await sub.done;
    expect(sub.results).toHaveLength(1);
    expect(sub.results[0].data.mobileIdAuthentication).toMatchObject({
      authReqId: 'late-1',
      idTokenVerified: true,
      subject: 'pcr-123',
    });
    expect(await read(gw, 'late-1')).toMatchObject({
      idTokenChecks: { signature: 'VALID', issuer: 'VALID', expiry: 'VALID' },
    });
    expect(await metric(gw, 'gateway_mobile_id_verified_late_total')).toBe(1);
    expect(await metric(gw, 'gateway_mobile_id_pending_verifications')).toBe(0);
  });

  it('acknowledges a repeat of a pending notification as a duplicate, and refuses a different one for its auth_req_id with 409', async () => {
    const jwks = await jwksServer();
    const gw = await gateway(jwks.url);
    const n = await notification(jwks.privateKey, 'late-2');
    expect((await postNotification(gw, n, { token: NOTIFY })).status).toBe(204);
    expect((await postNotification(gw, n, { token: NOTIFY })).status).toBe(204);
    expect((await postNotification(gw, await notification(jwks.privateKey, 'late-2'), { token: NOTIFY })).status).toBe(
      409,
    );
    jwks.setUp(true);
    expect(await gw.gateway.services.mobileId.verifyPending(Date.now() + AHEAD)).toMatchObject({ verified: 1 });
    expect(await storedEvents(gw, 'late-2')).toHaveLength(1);
  });

  it('is quarantined, never delivered, when its check fails once the keys can be loaded', async () => {
    const jwks = await jwksServer();
    const gw = await gateway(jwks.url);
    const { privateKey: stranger } = await generateKeyPair('ES256', { extractable: true });
    expect((await postNotification(gw, await notification(stranger, 'forged-1'), { token: NOTIFY })).status).toBe(204);
    jwks.setUp(true);
    expect(await gw.gateway.services.mobileId.verifyPending(Date.now() + AHEAD)).toMatchObject({ refused: 1 });
    expect(await read(gw, 'forged-1')).toBeNull();
    const rows = (await gw.graphql(REJECTIONS, {}, { key: OPS })).data!.mobileIdRejections;
    expect(rows).toMatchObject([
      {
        authReqId: 'forged-1',
        httpStatus: 204,
        reason: 'ID_TOKEN_SIGNATURE',
        description: expect.stringMatching(/refused when verified later/),
      },
    ]);
    expect(await metric(gw, 'gateway_mobile_id_pending_refused_total', '{reason="ID_TOKEN_SIGNATURE"}')).toBe(1);
  });

  it('is quarantined as JWKS_UNAVAILABLE when still unverifiable at EVENT_RETENTION', async () => {
    const jwks = await jwksServer();
    const gw = await gateway(jwks.url);
    expect((await postNotification(gw, await notification(jwks.privateKey, 'never'), { token: NOTIFY })).status).toBe(
      204,
    );
    // Far past any EVENT_RETENTION (default 7 days).
    expect(await gw.gateway.services.mobileId.verifyPending(Date.now() + 400 * 86_400_000)).toMatchObject({
      refused: 1,
    });
    const rows = (await gw.graphql(REJECTIONS, {}, { key: OPS })).data!.mobileIdRejections;
    expect(rows).toMatchObject([{ authReqId: 'never', httpStatus: 204, reason: 'JWKS_UNAVAILABLE' }]);
  });

  it('survives a restart and is delivered by the next process once the JWKS is back', async () => {
    const jwks = await jwksServer();
    const dataDir = tempDataDir();
    const first = await gateway(jwks.url, dataDir);
    expect(
      (await postNotification(first, await notification(jwks.privateKey, 'restart-1'), { token: NOTIFY })).status,
    ).toBe(204);
    await first.close();

    jwks.setUp(true);
    const second = await gateway(jwks.url, dataDir);
    const sub = await watch(second, 'restart-1');
    await second.gateway.services.mobileId.verifyPending(Date.now() + AHEAD);
    await sub.done;
    expect(sub.results.map((r) => r.data.mobileIdAuthentication.authReqId)).toEqual(['restart-1']);
  });
});

describe('an id_token whose kid the JWKS does not have (yet)', () => {
  it('is acknowledged and kept pending, then refused after a few attempts if the key never appears', async () => {
    const jwks = await jwksServer();
    jwks.setUp(true);
    const gw = await gateway(jwks.url);
    const { privateKey: rotated } = await generateKeyPair('ES256', { extractable: true });
    expect((await postNotification(gw, await notification(rotated, 'new-kid', 'op-2'), { token: NOTIFY })).status).toBe(
      204,
    );
    expect(await read(gw, 'new-kid')).toBeNull();
    let refused = 0;
    for (let i = 1; i <= 4; i++)
      refused += (await gw.gateway.services.mobileId.verifyPending(Date.now() + i * AHEAD)).refused;
    expect(refused).toBe(1);
    const rows = (await gw.graphql(REJECTIONS, {}, { key: OPS })).data!.mobileIdRejections;
    expect(rows).toMatchObject([{ authReqId: 'new-kid', httpStatus: 204, reason: 'ID_TOKEN_SIGNATURE' }]);
  });
});

describe('property: notifications sent while the JWKS is down are each delivered once after it comes back', () => {
  it('loses none and delivers none twice, in either encoding', async () => {
    let batch = 0;
    let cases = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(fc.constantFrom('json', 'form'), { minLength: 1, maxLength: 5 }), async (encodings) => {
        cases += 1;
        // A gateway of its own each run: one that has loaded the keys once keeps them cached, down or not.
        const jwks = await jwksServer();
        const gw = await gateway(jwks.url);
        batch += 1;
        const ids = encodings.map((_, i) => `down-${batch}-${i}`);
        const subs = await Promise.all(ids.map((id) => watch(gw, id)));
        for (const [i, id] of ids.entries()) {
          const n = await notification(jwks.privateKey, id);
          const res =
            encodings[i] === 'json'
              ? await postNotification(gw, n, { token: NOTIFY })
              : await postNotification(
                  gw,
                  new URLSearchParams(Object.entries(n).map(([k, v]) => [k, String(v)])).toString(),
                  { token: NOTIFY, contentType: 'application/x-www-form-urlencoded' },
                );
          expect(res.status).toBe(204);
        }
        expect(subs.every((s) => s.results.length === 0)).toBe(true);
        jwks.setUp(true);
        await gw.gateway.services.mobileId.verifyPending(Date.now() + AHEAD);
        await Promise.all(subs.map((s) => s.done));
        for (const [i, s] of subs.entries())
          expect(s.results.map((r) => r.data.mobileIdAuthentication.authReqId)).toEqual([ids[i]]);
        for (const id of ids) expect(await storedEvents(gw, id)).toHaveLength(1);
      }),
      { numRuns: 10 },
    );
    expect(cases).toBe(10);
  });
});

describe('pending notifications on PostgreSQL (DATABASE_URL)', () => {
  let pg: TestPostgres;
  let url: string;
  beforeAll(async () => {
    pg = await startPostgres();
    url = await pg.createDatabase('mobile_id_pending');
  }, 120_000);
  afterAll(() => pg?.stop());

  it('are verified by exactly one of two replicas that look at once, and delivered once to a subscriber on either', async () => {
    const jwks = await jwksServer();
    const key = randomBytes(32).toString('hex');
    const a = await gateway(jwks.url, tempDataDir(), { DATABASE_URL: url, TOKEN_ENCRYPTION_KEY: key });
    const b = await gateway(jwks.url, tempDataDir(), { DATABASE_URL: url, TOKEN_ENCRYPTION_KEY: key });
    const ids = ['pg-late-1', 'pg-late-2', 'pg-late-3'];
    // Subscribed before or after the verification, each gets its result once (from the bus or from the log).
    const subs = await Promise.all(ids.map((id) => watch(b, id, false)));
    for (const id of ids)
      expect((await postNotification(a, await notification(jwks.privateKey, id), { token: NOTIFY })).status).toBe(204);
    jwks.setUp(true);
    const at = Date.now() + AHEAD;
    const [ra, rb] = await Promise.all([
      a.gateway.services.mobileId.verifyPending(at),
      b.gateway.services.mobileId.verifyPending(at),
    ]);
    expect(ra.verified + rb.verified).toBe(ids.length);
    await Promise.all(subs.map((s) => s.done));
    for (const [i, s] of subs.entries())
      expect(s.results.map((r) => r.data.mobileIdAuthentication.authReqId)).toEqual([ids[i]]);
    for (const id of ids) expect(await storedEvents(a, id)).toHaveLength(1);
  });
});
