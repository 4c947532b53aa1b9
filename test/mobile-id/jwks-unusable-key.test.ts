// The mobile identity service's JWKS (MOBILEID_JWKS_URL) holds a key the gateway cannot use (a point off its curve, a
// curve or key type it does not verify with, an alg not of its key type): an id_token that names that key's kid is
// one that cannot be verified now, as while the JWKS cannot be loaded: acknowledged 204 and kept pending, and once
// EVENT_RETENTION has passed quarantined as JWKS_UNAVAILABLE naming the kid. The operator reads a warning naming the
// JWKS URL and the kid; nothing is logged as an unexpected error. An id_token of the JWKS's good key is delivered.
import { exportJWK, generateKeyPair, type JWK } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startJwksServer, type JwksServer } from '../helpers/jwt.js';
import {
  OPERATOR_CLIENT_ID,
  OPERATOR_ISSUER,
  postNotification,
  signedNotification,
  storedEvents,
} from '../helpers/mobile-id.js';

const OPS = 'ops-key';
const NOTIFY = 'operator-notification-token';
/** Far past any EVENT_RETENTION (default 7 days): a pending notification gives up and is quarantined. */
const GIVE_UP = 400 * 86_400_000;
const REJECTIONS = `{ mobileIdRejections(first: 50) { authReqId httpStatus reason description } }`;

const running: Array<TestGateway | JwksServer> = [];
afterEach(async () => {
  for (const r of running.splice(0).reverse()) await ('stop' in r ? r.stop() : r.close());
});

const CASES: Array<[string, (jwk: JWK) => JWK]> = [
  ['an EC key whose point is not on its curve', (k) => ({ ...k, x: 'AAAA' })],
  ['an EC key of a curve the gateway does not verify with', (k) => ({ ...k, crv: 'secp256k1' })],
  ['a key of a type the gateway does not verify with', (k) => ({ kty: 'XYZ', kid: k.kid, use: 'sig' })],
  ['an EC key whose alg is not an EC algorithm', (k) => ({ ...k, alg: 'RS256' })],
];

describe('a mobile-ID JWKS that holds a key the gateway cannot use', () => {
  it.each(CASES)('%s: its id_token is kept pending, then quarantined as JWKS_UNAVAILABLE', async (_, publish) => {
    const good = await generateKeyPair('ES256', { extractable: true });
    const bad = await generateKeyPair('ES256', { extractable: true });
    const goodJwk = { ...(await exportJWK(good.publicKey)), kid: 'op-1', alg: 'ES256', use: 'sig' };
    const badJwk = publish({ ...(await exportJWK(bad.publicKey)), kid: 'op-broken', alg: 'ES256', use: 'sig' });
    const jwks = await startJwksServer([
      { kid: 'op-1', alg: 'ES256', privateKey: good.privateKey, publicJwk: goodJwk },
      { kid: 'op-broken', alg: 'ES256', privateKey: bad.privateKey, publicJwk: badJwk },
    ]);
    running.push(jwks);
    const gw = await startTestGateway({
      GATEWAY_API_KEYS: 'app-key-1',
      OPERATOR_API_KEYS: OPS,
      SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
      MOBILEID_NOTIFICATION_TOKENS: NOTIFY,
      MOBILEID_JWKS_URL: jwks.url,
      MOBILEID_ISSUER: OPERATOR_ISSUER,
      MOBILEID_CLIENT_ID: OPERATOR_CLIENT_ID,
    });
    running.push(gw);

    const broken = await signedNotification(bad.privateKey, 'broken-1', { kid: 'op-broken' });
    expect((await postNotification(gw, broken, { token: NOTIFY })).status).toBe(204);
    expect(await storedEvents(gw)).toEqual([]);
    const fine = await signedNotification(good.privateKey, 'good-1');
    expect((await postNotification(gw, fine, { token: NOTIFY })).status).toBe(204);
    expect((await storedEvents(gw)).map((e) => e.key)).toEqual(['good-1']);

    expect(await gw.gateway.services.mobileId.verifyPending(Date.now() + GIVE_UP)).toMatchObject({ refused: 1 });
    const rows = (await gw.graphql(REJECTIONS, {}, { key: OPS })).data!.mobileIdRejections;
    expect(rows).toMatchObject([{ authReqId: 'broken-1', httpStatus: 204, reason: 'JWKS_UNAVAILABLE' }]);
    expect(rows[0].description).toContain('"op-broken"');

    const lines = gw
      .logs()
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { level: number; jwks?: string; kid?: string; err?: unknown });
    expect(lines.some((l) => l.level === 40 && l.kid === 'op-broken' && l.jwks === jwks.url)).toBe(true);
    // The one error line is the quarantine's, at EVENT_RETENTION, as for a JWKS that is down: no error with a stack.
    expect(lines.filter((l) => l.level >= 50 && l.err !== undefined)).toEqual([]);
    expect(gw.logs()).not.toContain('unexpected error');
    expect(gw.logs()).not.toContain(broken.id_token);
  });
});
