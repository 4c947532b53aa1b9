// Apps that sign in with their identity provider's JWTs, over POST /graphql: the provider is a key pair made here and
// a JWKS served from a local HTTP server; every check (signature, iss, aud, exp, nbf, alg) refuses with its own reason.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { TestGateway } from '../helpers/gateway.js';
import {
  AUDIENCE,
  nowSeconds,
  sign,
  signingKey,
  startJwksServer,
  startJwtGateway,
  unsigned,
  type JwksServer,
  type SigningKey,
} from '../helpers/jwt.js';

const TYPENAME = '{ __typename }';
const SHOP_KEY = 'shop-key-0123456789abcdef';
const CRM_KEY = 'crm-key-0123456789abcdef';
const REGISTER = `mutation($input: RegisterVerificationInput!) { registerVerification(input: $input) { verification { externalId } } }`;
const RESULTS = `query($ids: [ID!]!) { verificationResults(externalIds: $ids) { externalId status } }`;

describe('apps that sign in with JWTs, over HTTP', () => {
  let key: SigningKey;
  let jwks: JwksServer;
  let t: TestGateway;

  beforeAll(async () => {
    key = await signingKey('key-1', 'RS256');
    jwks = await startJwksServer([key]);
    // The JWT apps shop and crm are the apps of the keys shop: and crm: because AUTH_APPS says so; sre may be an operator.
    t = await startJwtGateway(jwks, {
      GATEWAY_API_KEYS: `shop:${SHOP_KEY},crm:${CRM_KEY}`,
      AUTH_APPS: '*,shop=shop,crm=crm',
      AUTH_OPERATOR_APPS: 'sre',
      SANDBOX_CALLBACK_DELAY_MS: '600000',
    });
  });
  afterAll(async () => {
    await t.close();
    await jwks.stop();
  });

  const refusal = async (token: string) => {
    const res = await t.graphql(TYPENAME, undefined, { key: token });
    expect(res.status).toBe(401);
    expect(res.data).toBeUndefined();
    expect(res.errors![0]!.extensions!.code).toBe('UNAUTHENTICATED');
    return res.errors![0]!.message;
  };

  it('a token signed by the identity provider is accepted', async () => {
    const res = await t.graphql(TYPENAME, undefined, { key: await sign(key) });
    expect(res).toEqual({ status: 200, data: { __typename: 'Query' } });
  });

  it('an expired token is refused, saying it expired', async () => {
    expect(await refusal(await sign(key, { exp: nowSeconds() - 5 }))).toMatch(/^the JWT has expired \(exp \d{4}-/);
  });

  it('a token that is not valid yet (nbf in the future beyond the clock skew) is refused', async () => {
    expect(await refusal(await sign(key, { nbf: nowSeconds() + 600 }))).toBe('the JWT is not valid yet (nbf)');
  });

  it('a token without exp is refused: tokens that never expire are not accepted', async () => {
    expect(await refusal(await sign(key, { exp: null }))).toMatch(/no exp claim/);
  });

  it('a token from another issuer is refused', async () => {
    expect(await refusal(await sign(key, { iss: 'https://idp.example.test/realms/other' }))).toMatch(
      /iss .*AUTH_ISSUER/,
    );
  });

  it('a token for another audience is refused', async () => {
    expect(await refusal(await sign(key, { aud: 'some-other-api' }))).toMatch(/aud .*AUTH_AUDIENCE/);
    // One of several audiences is enough.
    expect(
      (await t.graphql(TYPENAME, undefined, { key: await sign(key, { aud: ['some-other-api', AUDIENCE] }) })).status,
    ).toBe(200);
  });

  it('an unsigned token (alg: none) is refused before any key is looked up', async () => {
    const before = jwks.requests;
    const token = unsigned({
      iss: 'https://idp.example.test/realms/acme',
      aud: AUDIENCE,
      azp: 'shop',
      exp: nowSeconds() + 3600,
    });
    expect(await refusal(token)).toMatch(/alg is not accepted/);
    expect(jwks.requests).toBe(before);
  });

  it('an HMAC token keyed with the public key (alg confusion) is refused', async () => {
    const { SignJWT } = await import('jose');
    const secret = new TextEncoder().encode(JSON.stringify(key.publicJwk));
    const token = await new SignJWT({ azp: 'shop' })
      .setProtectedHeader({ alg: 'HS256', kid: key.kid })
      .setIssuer('https://idp.example.test/realms/acme')
      .setAudience(AUDIENCE)
      .setExpirationTime('1h')
      .sign(secret);
    expect(await refusal(token)).toMatch(/alg is not accepted/);
  });

  it('a token signed by a key of another JWKS, under a kid this one holds, is refused: the signature does not verify', async () => {
    const stranger = await signingKey(key.kid, 'RS256');
    expect(await refusal(await sign(stranger))).toMatch(/signature does not verify/);
    // Under its own kid: no key of this JWKS is the stranger's (the JWKS is not fetched again within the interval).
    expect(await refusal(await sign(await signingKey('stranger-kid')))).toMatch(
      /no key of the identity provider's JWKS .* matches the JWT's kid/,
    );
  });

  it('a token whose app claim is no app name (spaces, control characters, too long) is refused, naming the claim', async () => {
    expect(await refusal(await sign(key, { claims: { azp: 'shop admin' } }))).toMatch(
      /^the JWT's azp claim is not an app name/,
    );
    expect(await refusal(await sign(key, { claims: { azp: 'shop\u0007' } }))).toMatch(/azp claim is not an app name/);
    expect(await refusal(await sign(key, { claims: { azp: 'x'.repeat(129) } }))).toMatch(
      /azp claim is not an app name/,
    );
    expect(await refusal(await sign(key, { claims: { azp: 42 } }))).toMatch(/azp claim is not an app name/);
  });

  it('a bearer value that is neither an API key nor a JWT is refused as a wrong API key', async () => {
    expect(await refusal('not-a-key-nor-a-jwt')).toBe('the API key is not valid');
    const res = await t.graphql(TYPENAME);
    expect(res.status).toBe(401);
    expect(res.errors![0]!.message).toBe('a valid API key or JWT is required: send Authorization: Bearer <key or JWT>');
  });

  it('a JWT of app shop and the API key shop:<key> are one app when AUTH_APPS says so (shop=shop): each reads what the other created, another app reads nothing', async () => {
    const register = async (bearer: string) => {
      const res = await t.graphql(
        REGISTER,
        { input: { workflowId: 'wf-kyc', applicant: { lastName: 'Petrova' } } },
        { key: bearer },
      );
      expect(res.errors).toBeUndefined();
      return res.data!.registerVerification.verification.externalId as string;
    };
    const read = async (bearer: string, id: string) =>
      (await t.graphql(RESULTS, { ids: [id] }, { key: bearer })).data!.verificationResults[0];

    const shopJwt = await sign(key, { claims: { azp: 'shop' } });
    const underJwt = await register(shopJwt);
    expect(await read(SHOP_KEY, underJwt)).toMatchObject({ externalId: underJwt });
    const underKey = await register(SHOP_KEY);
    expect(await read(shopJwt, underKey)).toMatchObject({ externalId: underKey });
    // Another JWT of the same app (client_id instead of azp) is the same app too.
    expect(await read(await sign(key, { claims: { azp: undefined, client_id: 'shop' } }), underJwt)).toMatchObject({
      externalId: underJwt,
    });

    expect(await read(CRM_KEY, underJwt)).toBeNull();
    expect(await read(await sign(key, { claims: { azp: 'crm' } }), underKey)).toBeNull();
  });

  it('a token whose scopes lack cloud:write is refused createProject with FORBIDDEN, before anything runs', async () => {
    const token = await sign(key, { claims: { azp: 'watcher', scope: 'openid mobile-id:read' } });
    const res = await t.graphql(
      'mutation { createProject(input: { name: "not-allowed" }) { project { id } } }',
      undefined,
      { key: token },
    );
    expect(res.status).toBe(403);
    expect(res.errors![0]!.extensions).toMatchObject({
      code: 'FORBIDDEN',
      field: 'Mutation.createProject',
      scope: 'cloud:write',
    });
    const allowed = await t.graphql('{ mobileIdAuthentication(authReqId: "jwt-watcher") { __typename } }', undefined, {
      key: token,
    });
    expect(allowed.errors).toBeUndefined();
  });

  it('the operator lists a JWT app once seen, with its token’s scopes and no keys', async () => {
    await t.graphql('{ mobileIdAuthentication(authReqId: "listed") { __typename } }', undefined, {
      key: await sign(key, { claims: { azp: 'listed-app', scope: 'mobile-id:read' } }),
    });
    const operator = await sign(key, { claims: { azp: 'sre', scope: 'operator' } });
    const res = await t.graphql<{
      apps: Array<{
        name: string;
        source: string;
        scopes: string[];
        keys: number | null;
        lastActivityAt: string | null;
      }>;
    }>('{ apps { name source scopes keys lastActivityAt } }', undefined, { key: operator });
    expect(res.errors).toBeUndefined();
    expect(res.data!.apps.find((a) => a.name === 'listed-app')).toEqual({
      name: 'listed-app',
      source: 'JWT',
      scopes: ['mobile-id:read'],
      keys: null,
      lastActivityAt: expect.any(String),
    });
    expect(res.data!.apps.find((a) => a.name === 'shop')).toMatchObject({ source: 'API_KEYS', keys: 1 });
  });

  it('the token is never written to the log', async () => {
    const token = await sign(key, { exp: nowSeconds() - 5 });
    await t.graphql(TYPENAME, undefined, { key: token });
    expect(t.logs()).not.toContain(token.split('.')[2]!);
  });
});
