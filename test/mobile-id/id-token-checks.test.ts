import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';

import { loadConfig } from '../../src/config/index.js';
import { gatewaysPerTest, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import { collect, postNotification, QUERY, storedEvents, SUBSCRIPTION, wsClient } from '../helpers/mobile-id.js';
import { waitForSubscribers } from '../helpers/wait.js';

// The spec promises only `sub` and the authentication context in the id_token, and the sender
// does not retry. A wrong claim is refused; an absent optional claim is accepted and reported, unless the
// operator turns strict mode on (docs/decisions/016-id-token-checks-and-quarantine.md).

const gateway = gatewaysPerTest();
const AUTH_REQ_ID_CLAIM = 'urn:openid:params:jwt:claim:auth_req_id';
const REJECTIONS = `query($id: String) { mobileIdRejections(authReqId: $id) { authReqId httpStatus error reason description } }`;

const ALL_ABSENT = { exp: undefined, at_hash: undefined, [AUTH_REQ_ID_CLAIM]: undefined };

/** Posts a notification while a subscriber waits for it; returns the HTTP status and what the subscriber got. */
async function deliverWatched(gw: TestGateway, authReqId: string, body: unknown) {
  const client = wsClient(gw);
  try {
    const sub = collect(client, SUBSCRIPTION, { id: authReqId });
    await waitForSubscribers(gw, 'mobile-id', authReqId);
    const res = await postNotification(gw, body);
    if (res.status === 204) await sub.done;
    else sub.stop();
    return { status: res.status, json: res.json, published: sub.results.map((r) => r.data.mobileIdAuthentication) };
  } finally {
    await client.dispose();
  }
}

describe('an id_token without the optional claims', () => {
  it('is stored, published and answered 204, and the result reports each absent claim', async () => {
    const gw = await gateway();
    const n = await gw.gateway.sandbox.mobileId!.buildNotification({ authReqId: 'no-optional', claims: ALL_ABSENT });
    const { status, published } = await deliverWatched(gw, 'no-optional', n.body);
    expect(status).toBe(204);
    expect(published).toHaveLength(1);
    const checks = {
      signature: 'VALID',
      issuer: 'VALID',
      audience: 'VALID',
      expiry: 'ABSENT',
      authReqIdClaim: 'ABSENT',
      atHash: 'ABSENT',
      strict: false,
    };
    expect(published[0]).toMatchObject({ authReqId: 'no-optional', idTokenVerified: true, idTokenChecks: checks });
    const stored = (await gw.graphql(QUERY, { id: 'no-optional' })).data!.mobileIdAuthentication;
    expect(stored.idTokenChecks).toEqual(checks);
    expect(await storedEvents(gw, 'no-optional')).toHaveLength(1);
  });

  it.each([
    ['exp', { exp: undefined }, 'expiry'],
    ['the auth_req_id claim', { [AUTH_REQ_ID_CLAIM]: undefined }, 'authReqIdClaim'],
    ['at_hash', { at_hash: undefined }, 'atHash'],
  ])('without %s is accepted, and only that check says ABSENT', async (_name, claims, check) => {
    const gw = await gateway();
    const n = await gw.gateway.sandbox.mobileId!.buildNotification({ authReqId: 'one-absent', claims });
    expect((await postNotification(gw, n.body)).status).toBe(204);
    const a = (await gw.graphql(QUERY, { id: 'one-absent' })).data!.mobileIdAuthentication;
    const expected = {
      signature: 'VALID',
      issuer: 'VALID',
      audience: 'VALID',
      expiry: 'VALID',
      authReqIdClaim: 'VALID',
      atHash: 'VALID',
      strict: false,
      [check]: 'ABSENT',
    };
    expect(a.idTokenChecks).toEqual(expected);
  });

  it('reports every check VALID for an id_token that carries every claim', async () => {
    const gw = await gateway();
    const n = await gw.gateway.sandbox.mobileId!.buildNotification({ authReqId: 'full' });
    expect((await postNotification(gw, n.body)).status).toBe(204);
    const a = (await gw.graphql(QUERY, { id: 'full' })).data!.mobileIdAuthentication;
    expect(a.idTokenChecks).toEqual({
      signature: 'VALID',
      issuer: 'VALID',
      audience: 'VALID',
      expiry: 'VALID',
      authReqIdClaim: 'VALID',
      atHash: 'VALID',
      strict: false,
    });
  });

  it('is accepted against a configured JWKS file too (the operator signs with its own key)', async () => {
    const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
    const dir = tempDataDir();
    const file = path.join(dir, 'jwks.json');
    fs.writeFileSync(file, JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256' }] }));
    const gw = await gateway({
      DATA_DIR: dir,
      GATEWAY_API_KEYS: 'app',
      SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
      MOBILEID_NOTIFICATION_TOKENS: 'notify',
      MOBILEID_JWKS_FILE: file,
      MOBILEID_ISSUER: 'https://op.example',
      MOBILEID_CLIENT_ID: 'sp',
    });
    const idToken = await new SignJWT({ sub: 'pcr-1', acr: '2' })
      .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
      .setIssuer('https://op.example')
      .setAudience('sp')
      .sign(privateKey);
    const body = {
      auth_req_id: 'minimal',
      access_token: randomBytes(16).toString('hex'),
      token_type: 'Bearer',
      id_token: idToken,
      expires_in: 600,
    };
    expect((await postNotification(gw, body, { token: 'notify' })).status).toBe(204);
    const a = (await gw.graphql(QUERY, { id: 'minimal' }, { key: 'app' })).data!.mobileIdAuthentication;
    expect(a).toMatchObject({
      subject: 'pcr-1',
      idTokenVerified: true,
      idTokenChecks: { signature: 'VALID', expiry: 'ABSENT', authReqIdClaim: 'ABSENT', atHash: 'ABSENT' },
    });
  });
});

describe('an id_token that fails a check', () => {
  const tamper = (jwt: string) => {
    const [h, p, sig] = jwt.split('.');
    const bytes = Buffer.from(sig!, 'base64url');
    bytes[3] = bytes[3]! ^ 0xff;
    return `${h}.${p}.${bytes.toString('base64url')}`;
  };
  it.each([
    ['a bad signature', {}, (b: any) => ({ ...b, id_token: tamper(b.id_token) }), 'ID_TOKEN_SIGNATURE'],
    ['a wrong iss', { iss: 'https://someone.example' }, (b: any) => b, 'ID_TOKEN_ISSUER'],
    ['a wrong aud', { aud: 'another-client' }, (b: any) => b, 'ID_TOKEN_AUDIENCE'],
    ['an expired exp', { exp: Math.floor(Date.now() / 1000) - 600 }, (b: any) => b, 'ID_TOKEN_EXPIRY'],
    ['a wrong auth_req_id claim', { [AUTH_REQ_ID_CLAIM]: 'another' }, (b: any) => b, 'ID_TOKEN_AUTH_REQ_ID'],
    [
      'a wrong at_hash',
      { at_hash: createHash('sha256').update('x').digest().subarray(0, 16).toString('base64url') },
      (b: any) => b,
      'ID_TOKEN_AT_HASH',
    ],
    ['a malformed token', {}, (b: any) => ({ ...b, id_token: 'not.a-jwt' }), 'MALFORMED'],
  ])(
    'with %s, even with optional claims absent, is refused with 400, published to nobody, and quarantined',
    async (_name, claims, edit, reason) => {
      const gw = await gateway();
      const n = await gw.gateway.sandbox.mobileId!.buildNotification({
        authReqId: 'refused',
        claims: { at_hash: undefined, ...claims },
      });
      const { status, json, published } = await deliverWatched(gw, 'refused', edit(n.body));
      expect(status).toBe(400);
      expect(json.error).toBe('invalid_request');
      expect(published).toEqual([]);
      expect(await storedEvents(gw)).toEqual([]);
      const rows = (await gw.graphql(REJECTIONS, { id: 'refused' })).data!.mobileIdRejections;
      expect(rows).toEqual([
        {
          authReqId: 'refused',
          httpStatus: 400,
          error: 'invalid_request',
          reason,
          description: json.error_description,
        },
      ]);
    },
  );
});

describe('strict mode (MOBILEID_STRICT_ID_TOKEN=true)', () => {
  it.each([
    ['exp', { exp: undefined }, 'ID_TOKEN_EXPIRY', /no exp claim/],
    [
      'the auth_req_id claim',
      { [AUTH_REQ_ID_CLAIM]: undefined },
      'ID_TOKEN_AUTH_REQ_ID',
      /no urn:openid:params:jwt:claim:auth_req_id claim/,
    ],
    ['at_hash', { at_hash: undefined }, 'ID_TOKEN_AT_HASH', /no at_hash claim/],
  ])(
    'refuses an id_token without %s with 400, stores nothing and quarantines it',
    async (_name, claims, reason, description) => {
      const gw = await gateway({ MOBILEID_STRICT_ID_TOKEN: 'true' });
      const n = await gw.gateway.sandbox.mobileId!.buildNotification({ authReqId: 'strict', claims });
      const res = await postNotification(gw, n.body);
      expect(res.status).toBe(400);
      expect(res.json.error_description).toMatch(description);
      expect(await storedEvents(gw)).toEqual([]);
      expect((await gw.graphql(REJECTIONS, { id: 'strict' })).data!.mobileIdRejections).toMatchObject([
        { reason, httpStatus: 400 },
      ]);
    },
  );

  it('accepts an id_token with every claim and reports strict: true', async () => {
    const gw = await gateway({ MOBILEID_STRICT_ID_TOKEN: 'true' });
    const n = await gw.gateway.sandbox.mobileId!.buildNotification({ authReqId: 'strict-ok' });
    expect((await postNotification(gw, n.body)).status).toBe(204);
    const a = (await gw.graphql(QUERY, { id: 'strict-ok' })).data!.mobileIdAuthentication;
    expect(a.idTokenChecks).toEqual({
      signature: 'VALID',
      issuer: 'VALID',
      audience: 'VALID',
      expiry: 'VALID',
      authReqIdClaim: 'VALID',
      atHash: 'VALID',
      strict: true,
    });
  });

  it('is refused at start-up without a JWKS to check against', () => {
    expect(() =>
      loadConfig({
        GATEWAY_API_KEYS: 'k',
        SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
        MOBILEID_NOTIFICATION_TOKENS: 't',
        MOBILEID_STRICT_ID_TOKEN: 'true',
      }),
    ).toThrow(/MOBILEID_STRICT_ID_TOKEN: strict id_token checks need a JWKS/);
    expect(() => loadConfig({ MOBILEID_STRICT_ID_TOKEN: 'maybe' })).toThrow(
      /MOBILEID_STRICT_ID_TOKEN: must be true or false/,
    );
  });
});
