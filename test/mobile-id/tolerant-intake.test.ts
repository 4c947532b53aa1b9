import fc from 'fast-check';
import { CompactEncrypt, createLocalJWKSet, exportJWK, generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { IdTokenVerifier } from '../../src/mobile-id/verify.js';
import { gatewaysPerTest, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { collect, postNotification, QUERY, storedEvents, SUBSCRIPTION, wsClient } from '../helpers/mobile-id.js';
import { waitForSubscribers } from '../helpers/wait.js';

// The sender does not retry (spec, mobile-id-notification.md), so a notification the spec allows must never be
// refused for how a value is written: nulls for optional fields, numbers where no type is shown, empty form
// fields, 1/0 and "3600", any case of "bearer", an encrypted id_token (docs/decisions/039).

const AUTH_REQ_ID_CLAIM = 'urn:openid:params:jwt:claim:auth_req_id';
const CHECKS = `query($id: String!) { mobileIdAuthentication(authReqId: $id) { ... on MobileIdAuthenticated {
  subject idToken idTokenVerified idTokenChecks { signature issuer audience expiry authReqIdClaim atHash strict notCheckedReason } } } }`;
const REJECTIONS = `{ mobileIdRejections(first: 500) { authReqId } }`;

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway();
});
afterAll(async () => {
  await gw?.close();
});

const build = (
  authReqId: string,
  options: { fields?: Record<string, unknown>; claims?: Record<string, unknown>; outcome?: 'CANCELLED_BY_USER' } = {},
) => gw.gateway.sandbox.mobileId!.buildNotification({ authReqId, ...options });

const form = (body: Record<string, unknown>) =>
  new URLSearchParams(Object.entries(body).map(([k, v]) => [k, String(v)])).toString();

/** Posts while a graphql-ws subscriber waits: the HTTP status, what the subscriber got, and the stored result. */
async function deliverWatched(g: TestGateway, authReqId: string, body: unknown, contentType?: string) {
  const client = wsClient(g);
  try {
    const sub = collect(client, SUBSCRIPTION, { id: authReqId });
    await waitForSubscribers(g, 'mobile-id', authReqId);
    const res = await postNotification(g, body, contentType ? { contentType } : {});
    if (res.status === 204) await sub.done;
    else sub.stop();
    const stored = (await g.graphql(QUERY, { id: authReqId })).data!.mobileIdAuthentication;
    return {
      status: res.status,
      json: res.json,
      published: sub.results.map((r) => r.data.mobileIdAuthentication),
      stored,
    };
  } finally {
    await client.dispose();
  }
}

describe('the mobile-ID webhook accepts every way the spec allows a value to be written', () => {
  it('takes null for the optional jwks_uri, leading_kyc_match and correlation_id as absent, and delivers once', async () => {
    const n = await build('nulls', { fields: { jwks_uri: null, leading_kyc_match: null, correlation_id: null } });
    const r = await deliverWatched(gw, 'nulls', n.body);
    expect(r.status).toBe(204);
    expect(r.published).toHaveLength(1);
    expect(r.stored).toMatchObject({
      __typename: 'MobileIdAuthenticated',
      authReqId: 'nulls',
      jwksUri: null,
      leadingKycMatch: null,
      correlationId: null,
    });
  });

  it('takes null correlation_id in a failure notification as absent', async () => {
    const n = await build('failure-null', { outcome: 'CANCELLED_BY_USER', fields: { correlation_id: null } });
    const r = await deliverWatched(gw, 'failure-null', n.body);
    expect(r.status).toBe(204);
    expect(r.stored).toMatchObject({
      __typename: 'MobileIdAuthenticationFailed',
      reason: 'CANCELLED_BY_USER',
      correlationId: null,
    });
  });

  it("takes the other scenario's fields written as null as absent: every field a serializer knows, in each", async () => {
    const success = await build('other-null-success', { fields: { error: null, error_description: null } });
    const s = await deliverWatched(gw, 'other-null-success', success.body);
    expect(s.status).toBe(204);
    expect(s.stored).toMatchObject({ __typename: 'MobileIdAuthenticated', authReqId: 'other-null-success' });
    const tokens = { access_token: null, id_token: null, token_type: null, expires_in: null };
    const failure = await build('other-null-failure', { outcome: 'CANCELLED_BY_USER', fields: tokens });
    const f = await deliverWatched(gw, 'other-null-failure', failure.body);
    expect(f.status).toBe(204);
    expect(f.stored).toMatchObject({ __typename: 'MobileIdAuthenticationFailed', reason: 'CANCELLED_BY_USER' });
    // A value that is not null still makes the notification both: refused.
    const both = await build('other-both', { fields: { error: 'access_denied' } });
    const r = await postNotification(gw, both.body);
    expect(r.status).toBe(400);
    expect(r.text).toContain('not both');
  });

  it("takes the other scenario's fields written as empty form fields (a form's null) as absent, in each", async () => {
    const success = await build('other-empty-success');
    const s = await deliverWatched(
      gw,
      'other-empty-success',
      form({ ...success.body, error: '', error_description: '' }),
      'application/x-www-form-urlencoded',
    );
    expect(s.status, JSON.stringify(s.json)).toBe(204);
    expect(s.published).toHaveLength(1);
    expect(s.stored).toMatchObject({ __typename: 'MobileIdAuthenticated', authReqId: 'other-empty-success' });
    const failure = await build('other-empty-failure', { outcome: 'CANCELLED_BY_USER' });
    const tokens = { access_token: '', id_token: '', token_type: '', expires_in: '' };
    const f = await deliverWatched(
      gw,
      'other-empty-failure',
      form({ ...failure.body, ...tokens }),
      'application/x-www-form-urlencoded',
    );
    expect(f.status, JSON.stringify(f.json)).toBe(204);
    expect(f.stored).toMatchObject({ __typename: 'MobileIdAuthenticationFailed', reason: 'CANCELLED_BY_USER' });
    // A value that is not empty still makes the notification both: refused.
    const both = await build('other-empty-both');
    const r = await postNotification(gw, form({ ...both.body, error: 'access_denied' }), {
      contentType: 'application/x-www-form-urlencoded',
    });
    expect(r.status).toBe(400);
    expect(r.text).toContain('not both');
  });

  it('refuses a jwks_uri that is no http(s) address, which an app shown it might open or run', async () => {
    for (const [authReqId, uri] of [
      ['jwks-js', 'javascript:alert(1)'],
      ['jwks-file', 'file:///etc/passwd'],
      ['jwks-data', 'data:text/html,<script>alert(1)</script>'],
    ]) {
      const n = await build(authReqId!, { fields: { jwks_uri: uri } });
      const r = await postNotification(gw, n.body);
      expect(r.status, `${uri}: ${r.text}`).toBe(400);
      expect(JSON.parse(r.text).error_description).toContain('jwks_uri must be an absolute https URL');
      expect(await storedEvents(gw, authReqId)).toEqual([]);
    }
    const plain = await build('jwks-http', { fields: { jwks_uri: 'http://op.example/jwks' } });
    expect((await postNotification(gw, plain.body)).status).toBe(204);
  });

  it('reads auth_req_id, correlation_id and the sub claim given as numbers as their decimal text', async () => {
    const n = await build('4242', { fields: { auth_req_id: 4242, correlation_id: 77 }, claims: { sub: 380501234567 } });
    const r = await deliverWatched(gw, '4242', n.body);
    expect(r.status).toBe(204);
    expect(r.published).toHaveLength(1);
    expect(r.stored).toMatchObject({
      authReqId: '4242',
      correlationId: '77',
      subject: '380501234567',
      idTokenVerified: true,
    });
  });

  it('takes empty optional form fields as absent and leading_kyc_match=1/0 as true/false', async () => {
    const empty = await build('form-empty');
    const r1 = await deliverWatched(
      gw,
      'form-empty',
      form({ ...empty.body, jwks_uri: '', leading_kyc_match: '', correlation_id: '' }),
      'application/x-www-form-urlencoded',
    );
    expect(r1.status).toBe(204);
    expect(r1.stored).toMatchObject({ jwksUri: null, leadingKycMatch: null, correlationId: null });

    for (const [id, value, expected] of [
      ['form-one', '1', true],
      ['form-zero', '0', false],
    ] as const) {
      const n = await build(id);
      const r = await deliverWatched(
        gw,
        id,
        form({ ...n.body, leading_kyc_match: value }),
        'application/x-www-form-urlencoded',
      );
      expect(r.status).toBe(204);
      expect(r.stored.leadingKycMatch).toBe(expected);
    }
  });

  it('reads expires_in given as JSON text ("3600") as that many seconds', async () => {
    const n = await build('expires-text', { fields: { expires_in: '3600' } });
    const before = Date.now();
    const r = await deliverWatched(gw, 'expires-text', n.body);
    expect(r.status).toBe(204);
    const expiresAt = Date.parse(r.stored.expiresAt);
    expect(expiresAt).toBeGreaterThanOrEqual(before + 3600_000);
    expect(expiresAt).toBeLessThanOrEqual(Date.now() + 3600_000);
    expect(r.stored.accessToken).toBe(n.body.access_token);
  });

  it('accepts expires_in 0: the authentication is delivered, its access token is already expired', async () => {
    const n = await build('expires-zero', { fields: { expires_in: 0 } });
    const r = await deliverWatched(gw, 'expires-zero', n.body);
    expect(r.status).toBe(204);
    expect(r.published).toHaveLength(1);
    expect(r.stored).toMatchObject({ authReqId: 'expires-zero', accessToken: null });
  });

  it('reads token_type case-insensitively (RFC 6749 §5.1) and reports it as Bearer', async () => {
    for (const [id, tokenType] of [
      ['tt-lower', 'bearer'],
      ['tt-upper', 'BEARER'],
    ]) {
      const n = await build(id!, { fields: { token_type: tokenType } });
      const r = await deliverWatched(gw, id!, n.body);
      expect(r.status).toBe(204);
      expect(r.stored.tokenType).toBe('Bearer');
    }
  });

  it('accepts an encrypted id_token (JWE), stores it sealed, and says each check was not run and why', async () => {
    const { publicKey } = await generateKeyPair('RSA-OAEP-256');
    const jwe = await new CompactEncrypt(new TextEncoder().encode(JSON.stringify({ sub: 'someone' })))
      .setProtectedHeader({ alg: 'RSA-OAEP-256', enc: 'A256GCM' })
      .encrypt(publicKey);
    expect(jwe.split('.')).toHaveLength(5);
    const n = await build('jwe', { fields: { id_token: jwe } });
    const r = await deliverWatched(gw, 'jwe', n.body);
    expect(r.status).toBe(204);
    expect(r.published).toHaveLength(1);
    const a = (await gw.graphql(CHECKS, { id: 'jwe' })).data!.mobileIdAuthentication;
    expect(a).toMatchObject({ subject: null, idToken: jwe, idTokenVerified: false });
    for (const check of ['signature', 'issuer', 'audience', 'expiry', 'authReqIdClaim', 'atHash'])
      expect(a.idTokenChecks[check]).toBe('NOT_CHECKED');
    expect(a.idTokenChecks.notCheckedReason).toMatch(/encrypted \(JWE\)/);
    const rows = await storedEvents(gw, 'jwe');
    expect(rows).toHaveLength(1);
    expect(JSON.stringify(rows)).not.toContain(jwe);
  });

  it('refuses five base64url parts that are no JWE: a header that is no JSON object with alg and enc', async () => {
    const part = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const fakes = {
      'jwe-garbage': 'AAAA.BBBB.CCCC.DDDD.EEEE',
      'jwe-no-enc': `${part({ alg: 'RSA-OAEP-256' })}.key.iv.ct.tag`,
      'jwe-no-alg': `${part({ enc: 'A256GCM' })}..iv.ct.tag`,
      'jwe-array': `${part(['RSA-OAEP-256', 'A256GCM'])}..iv.ct.tag`,
    };
    for (const [authReqId, token] of Object.entries(fakes)) {
      const n = await build(authReqId, { fields: { id_token: token } });
      const r = await postNotification(gw, n.body);
      expect(r.status, `${authReqId}: ${r.text}`).toBe(400);
      expect(JSON.parse(r.text).error_description).toMatch(/id_token.*is neither a well-formed JWT/);
      expect(await storedEvents(gw, authReqId)).toEqual([]);
    }
    // The same header with its enc is a JWE, kept as received.
    const n = await build('jwe-both', { fields: { id_token: `${part({ alg: 'dir', enc: 'A256GCM' })}..iv.ct.tag` } });
    expect((await postNotification(gw, n.body)).status).toBe(204);
  });

  it('accepts an id_token carrying only sub and acr when a JWKS is configured: signature VALID, the rest ABSENT', async () => {
    const claims = {
      iss: undefined,
      aud: undefined,
      exp: undefined,
      iat: undefined,
      auth_time: undefined,
      amr: undefined,
      at_hash: undefined,
      [AUTH_REQ_ID_CLAIM]: undefined,
    };
    const n = await build('sub-and-acr', { claims });
    const r = await deliverWatched(gw, 'sub-and-acr', n.body);
    expect(r.status).toBe(204);
    const a = (await gw.graphql(CHECKS, { id: 'sub-and-acr' })).data!.mobileIdAuthentication;
    expect(a.idTokenChecks).toEqual({
      signature: 'VALID',
      issuer: 'ABSENT',
      audience: 'ABSENT',
      expiry: 'ABSENT',
      authReqIdClaim: 'ABSENT',
      atHash: 'ABSENT',
      strict: false,
      notCheckedReason: null,
    });
  });

  it('still refuses a present iss or aud that is wrong', async () => {
    for (const [id, claims] of [
      ['wrong-iss', { iss: 'https://elsewhere.example' }],
      ['wrong-aud', { aud: 'another-client' }],
    ] as const) {
      const n = await build(id, { claims });
      const res = await postNotification(gw, n.body);
      expect(res.status).toBe(400);
      expect(res.json.error_description).toMatch(id === 'wrong-iss' ? /iss/ : /aud/);
      expect(await storedEvents(gw, id)).toEqual([]);
    }
  });

  it('leaves the quarantine untouched by every notification above', async () => {
    const rows = (await gw.graphql(REJECTIONS)).data!.mobileIdRejections as Array<{ authReqId: string }>;
    const refusedAbove = [
      'jwks-js',
      'jwks-file',
      'jwks-data',
      'wrong-iss',
      'wrong-aud',
      'jwe-garbage',
      'jwe-no-enc',
      'jwe-no-alg',
      'jwe-array',
      'other-both',
      'other-empty-both',
    ];
    expect(rows.map((r) => r.authReqId).filter((id) => !refusedAbove.includes(id))).toEqual([]);
  });
});

describe('strict mode (MOBILEID_STRICT_ID_TOKEN=true) requires iss and aud, and refuses what it cannot check', () => {
  const gateway = gatewaysPerTest();

  it('refuses an id_token without iss, and an encrypted one, with 400 naming why', async () => {
    const strict = await gateway({ MOBILEID_STRICT_ID_TOKEN: 'true' });
    const noIss = await strict.gateway.sandbox.mobileId!.buildNotification({
      authReqId: 'strict-no-iss',
      claims: { iss: undefined },
    });
    const r1 = await postNotification(strict, noIss.body);
    expect(r1.status).toBe(400);
    expect(r1.json.error_description).toMatch(/iss claim: missing/);

    const { publicKey } = await generateKeyPair('RSA-OAEP-256');
    const jwe = await new CompactEncrypt(new TextEncoder().encode('{}'))
      .setProtectedHeader({ alg: 'RSA-OAEP-256', enc: 'A256GCM' })
      .encrypt(publicKey);
    const enc = await strict.gateway.sandbox.mobileId!.buildNotification({
      authReqId: 'strict-jwe',
      fields: { id_token: jwe },
    });
    const r2 = await postNotification(strict, enc.body);
    expect(r2.status).toBe(400);
    expect(r2.json.error_description).toMatch(/encrypted \(JWE\)/);
  });
});

describe('MOBILEID_ISSUER and MOBILEID_CLIENT_ID are optional beside a JWKS', () => {
  it('checks the signature and reports a present iss and aud as not compared, saying which variable is unset', async () => {
    const { privateKey, publicKey } = await generateKeyPair('ES256');
    const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256' };
    const verifier = new IdTokenVerifier({
      keys: { source: 'test JWKS', get: createLocalJWKSet({ keys: [jwk] }) },
      issuer: undefined,
      clientId: undefined,
    });
    const token = await new SignJWT({ sub: 'u', acr: '2', iss: 'https://op.example', aud: 'rp' })
      .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
      .sign(privateKey);
    const out = await verifier.check({ idToken: token, accessToken: 'at', authReqId: 'x' });
    expect(out).toMatchObject({
      status: 'accepted',
      keys: 'test JWKS',
      checks: { signature: 'VALID', issuer: 'NOT_CHECKED', audience: 'NOT_CHECKED' },
    });
    expect(out.status === 'accepted' && out.checks.notCheckedReason).toMatch(
      /MOBILEID_ISSUER is not set.*MOBILEID_CLIENT_ID is not set/,
    );

    const { privateKey: otherKey } = await generateKeyPair('ES256');
    const forged = await new SignJWT({ sub: 'u' }).setProtectedHeader({ alg: 'ES256', kid: 'k1' }).sign(otherKey);
    expect(await verifier.check({ idToken: forged, accessToken: 'at', authReqId: 'x' })).toMatchObject({
      status: 'rejected',
      reason: 'ID_TOKEN_SIGNATURE',
    });
  });
});

describe('property: every seed-conformant notification, in either encoding, is acknowledged and stored once', () => {
  /** How an optional field is written: absent, null (JSON only), empty, or a value in an allowed form. */
  const optional = <T>(values: fc.Arbitrary<T>) =>
    fc.oneof(
      fc.constant({ kind: 'absent' as const }),
      fc.constant({ kind: 'null' as const }),
      fc.constant({ kind: 'empty' as const }),
      values.map((v) => ({ kind: 'value' as const, v })),
    );
  const notification = fc.record({
    encoding: fc.constantFrom('json', 'form'),
    outcome: fc.constantFrom('success', 'failure'),
    numericId: fc.boolean(),
    tokenType: fc.constantFrom('Bearer', 'bearer', 'BEARER', 'BeArEr'),
    expiresIn: fc.oneof(fc.integer({ min: 0, max: 86_400 }), fc.integer({ min: 0, max: 86_400 }).map(String)),
    jwksUri: optional(fc.constant('https://op.example/jwks')),
    kyc: optional(fc.constantFrom(true, false, 'true', 'false', '1', '0', 1, 0)),
    correlation: optional(fc.oneof(fc.stringMatching(/^[a-z0-9-]{1,20}$/), fc.integer({ min: 0, max: 1e9 }))),
    numericSub: fc.boolean(),
  });
  let seq = 0;
  let cases = 0;

  it('answers 204, stores exactly one event, quarantines nothing and echoes no secret', async () => {
    const secrets: string[] = [];
    await fc.assert(
      fc.asyncProperty(notification, async (c) => {
        cases += 1;
        const id = c.numericId ? 900_000 + seq++ : `prop-${seq++}`;
        const authReqId = String(id);
        const n = await build(authReqId, {
          ...(c.outcome === 'failure' ? { outcome: 'CANCELLED_BY_USER' as const } : {}),
          ...(c.numericSub ? { claims: { sub: 1000 + seq } } : {}),
        });
        const body: Record<string, unknown> = { ...n.body, auth_req_id: c.encoding === 'json' ? id : authReqId };
        if (c.outcome === 'success') {
          body.token_type = c.tokenType;
          body.expires_in = c.expiresIn;
          secrets.push(String(body.access_token), String(body.id_token));
        }
        const fields: Array<[string, { kind: string; v?: unknown }]> =
          c.outcome === 'success'
            ? [
                ['jwks_uri', c.jwksUri],
                ['leading_kyc_match', c.kyc],
                ['correlation_id', c.correlation],
              ]
            : [['correlation_id', c.correlation]];
        for (const [name, f] of fields) {
          if (f.kind === 'absent') delete body[name];
          else if (f.kind === 'null') body[name] = c.encoding === 'json' ? null : '';
          else if (f.kind === 'empty') body[name] = '';
          else body[name] = f.v;
        }
        const res =
          c.encoding === 'json'
            ? await postNotification(gw, body)
            : await postNotification(gw, form(body), { contentType: 'application/x-www-form-urlencoded' });
        expect(res.status, `${res.text} for ${JSON.stringify(c)}`).toBe(204);
        expect(await storedEvents(gw, authReqId)).toHaveLength(1);
        const got = (await gw.graphql(QUERY, { id: authReqId })).data!.mobileIdAuthentication;
        expect(got.authReqId).toBe(authReqId);
        expect(got.__typename).toBe(c.outcome === 'success' ? 'MobileIdAuthenticated' : 'MobileIdAuthenticationFailed');
      }),
      { numRuns: 80, seed: Number(process.env.FC_SEED ?? Date.now() % 2 ** 31) },
    );
    expect(cases).toBeGreaterThanOrEqual(80);
    const quarantine = JSON.stringify(
      (await gw.graphql(`{ mobileIdRejections(first: 500) { authReqId description reason } }`)).data,
    );
    expect(quarantine).not.toMatch(/prop-|"9\d{5}"/);
    for (const s of secrets) expect(quarantine).not.toContain(s);
  });
});
