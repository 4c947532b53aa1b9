// Which JWT apps a gateway accepts and under which name (AUTH_APPS, AUTH_OPERATOR_APPS; docs/decisions/055): a JWT
// app name follows the configured names' syntax, a token of an app the operator did not declare is refused, a JWT
// never takes a configured app's name unless the operator says they are one app, and `operator` comes from a JWT
// only by explicit opt-in. Two apps over real HTTP, tokens signed by a local identity provider.
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { scopeOfApp } from '../../src/auth/caller.js';
import { loadConfig } from '../../src/config/index.js';
import { mobileIdDedupeKey } from '../../src/events/index.js';
import { configRefusal, type TestGateway } from '../helpers/gateway.js';
import {
  AUDIENCE,
  ISSUER,
  sign,
  signingKey,
  startJwksServer,
  startJwtGateway,
  type JwksServer,
  type SigningKey,
} from '../helpers/jwt.js';
import { postNotification } from '../helpers/mobile-id.js';

const VICTIM_KEY = 'victim-key-0123456789abcdef';
const OPS_KEY = 'ops-key-0123456789abcdef';
const TYPENAME = '{ __typename }';
const ISSUE = `mutation($id: String) { issueMobileIdNotificationToken(authReqId: $id) { token } }`;
const RESULT = `query($id: String!) { mobileIdAuthentication(authReqId: $id) { __typename } }`;
const REJECTIONS = `{ mobileIdRejections(first: 100) { authReqId reason } }`;
const APPS = `{ apps { name source scopes keys lastActivityAt jwt { scopes lastActivityAt } } }`;

describe('JWT app names and the configured apps', () => {
  let key: SigningKey;
  let jwks: JwksServer;
  let t: TestGateway;

  beforeAll(async () => {
    key = await signingKey('key-1');
    jwks = await startJwksServer([key]);
    // victim and ops are configured with keys; only `partner` and `crm-client` (as crm) are JWT apps by name, plus `*`
    // for any other name; the client `victim-idp` is declared to be the app victim.
    t = await startJwtGateway(jwks, {
      GATEWAY_API_KEYS: `victim:${VICTIM_KEY}`,
      OPERATOR_API_KEYS: `ops:${OPS_KEY}`,
      AUTH_APPS: '*,victim-idp=victim',
      AUTH_OPERATOR_APPS: 'sre',
      SANDBOX_CALLBACK_DELAY_MS: '600000',
    });
  });
  afterAll(async () => {
    await t.close();
    await jwks.stop();
  });

  const status = async (token: string, query = TYPENAME) => {
    const res = await t.graphql(query, undefined, { key: token });
    return { status: res.status, code: res.errors?.[0]?.extensions?.code, message: res.errors?.[0]?.message };
  };

  it('a JWT app name outside the configured names’ syntax is refused: a colon, a homoglyph, a name too long', async () => {
    for (const azp of [
      'victim:x123',
      'vіctim' /* Cyrillic і */,
      'ѕhop' /* Cyrillic ѕ */,
      'x'.repeat(65),
      '-leading-dash',
    ]) {
      const res = await status(await sign(key, { claims: { azp } }));
      expect(res, azp).toMatchObject({ status: 401, code: 'UNAUTHENTICATED' });
      expect(res.message).toMatch(/^the JWT's azp claim is not an app name \(1 to 64 ASCII letters/);
      expect(res.message).not.toContain(azp);
    }
    expect((await status(await sign(key, { claims: { azp: 'partner.v2_x-1' } }))).status).toBe(200);
  });

  it('a JWT named victim:x123 cannot take the key of victim’s notification for auth_req_id x123:y: the name is refused, and owner keys split one way only', async () => {
    const attacker = await sign(key, { claims: { azp: 'victim:x123', scope: 'mobile-id:write' } });
    expect((await t.graphql(ISSUE, { id: 'y' }, { key: attacker })).status).toBe(401);
    // The victim's genuine notification for x123:y is stored (204), not refused as a conflict.
    const token = (await t.graphql(ISSUE, { id: 'x123:y' }, { key: VICTIM_KEY })).data!.issueMobileIdNotificationToken
      .token as string;
    const n = await t.gateway.sandbox.mobileId!.buildNotification({ authReqId: 'x123:y' });
    expect((await postNotification(t, n.body, { token })).status).toBe(204);
    expect((await t.graphql(RESULT, { id: 'x123:y' }, { key: VICTIM_KEY })).data!.mobileIdAuthentication).toEqual({
      __typename: 'MobileIdAuthenticated',
    });
    // An owner scope holds no `:` past its prefix, so `<owner>:<auth_req_id>` cannot be written two ways.
    expect(() => scopeOfApp('victim:x123')).toThrow(/APP_NAME/);
    expect(mobileIdDedupeKey(scopeOfApp('victim'), 'x123:y')).toBe('mobile-id@app:victim:x123:y');
  });

  it('a JWT whose name is a configured app’s is refused and spends none of that app’s rate-limit budget', async () => {
    const limited = await startJwtGateway(jwks, { OPERATOR_API_KEYS: `ops:${OPS_KEY}`, RATE_LIMIT_READS: '3/1h' });
    try {
      for (let i = 0; i < 4; i++) {
        const res = await limited.graphql(TYPENAME, undefined, {
          key: await sign(key, { claims: { azp: 'ops', scope: 'cloud:read' } }),
        });
        expect(res.status).toBe(401);
        expect(res.errors![0]!.message).toMatch(/names an app configured with API keys .*AUTH_APPS/);
      }
      // ops still has its whole budget of 3 reads (RATE_LIMIT_READS=3/1h).
      for (let i = 0; i < 3; i++)
        expect((await limited.graphql(TYPENAME, undefined, { key: OPS_KEY })).status).toBe(200);
      expect((await limited.graphql(TYPENAME, undefined, { key: OPS_KEY })).errors![0]!.extensions!.code).toBe(
        'RATE_LIMITED',
      );
      // The operator sees the refusals by reason.
      const metrics = await (await request(`${limited.url}/metrics`)).body.text();
      expect(metrics).toMatch(/^gateway_jwt_refusals_total\{reason="configured_name"\} 4$/m);
    } finally {
      await limited.close();
    }
    // On the shared gateway too: a token named victim (a key's app) is refused, operator scope or not.
    expect(
      await status(await sign(key, { claims: { azp: 'victim', scope: 'operator mobile-id:read' } })),
    ).toMatchObject({ status: 401, code: 'UNAUTHENTICATED' });
  });

  it('a JWT client the operator declares to be a configured app (victim-idp=victim) is that app: it reads what the key created', async () => {
    const token = await sign(key, { claims: { azp: 'victim-idp', scope: 'mobile-id:read' } });
    expect((await t.graphql(RESULT, { id: 'x123:y' }, { key: token })).data!.mobileIdAuthentication).toEqual({
      __typename: 'MobileIdAuthenticated',
    });
    // Another JWT app reads nothing of it.
    const other = await sign(key, { claims: { azp: 'partner', scope: 'mobile-id:read' } });
    expect((await t.graphql(RESULT, { id: 'x123:y' }, { key: other })).data!.mobileIdAuthentication).toBeNull();
  });

  it('operator comes from a JWT only for the apps of AUTH_OPERATOR_APPS: another token’s operator scope is ignored', async () => {
    await postNotification(t, { auth_req_id: 'ops-only' }, { token: 'junk-token' });
    const asVictim = await sign(key, { claims: { azp: 'victim-idp', scope: 'operator mobile-id:read' } });
    // victim's JWT reads its own refusals only (none), not every app's, and may not list the apps.
    expect((await t.graphql(REJECTIONS, undefined, { key: asVictim })).data!.mobileIdRejections).toEqual([]);
    expect(await status(asVictim, APPS)).toMatchObject({ status: 403, code: 'FORBIDDEN' });
    const sre = await sign(key, { claims: { azp: 'sre', scope: 'operator mobile-id:read' } });
    const res = await t.graphql(REJECTIONS, undefined, { key: sre });
    expect(res.errors).toBeUndefined();
    expect(res.data!.mobileIdRejections.length).toBeGreaterThan(0);
  });

  it('the apps query lists JWT activity under a configured name, with the scopes used', async () => {
    const token = await sign(key, { claims: { azp: 'victim-idp', scope: 'mobile-id:read identity:read' } });
    expect((await t.graphql(TYPENAME, undefined, { key: token })).status).toBe(200);
    const res = await t.graphql(APPS, undefined, {
      key: await sign(key, { claims: { azp: 'sre', scope: 'operator' } }),
    });
    expect(res.errors).toBeUndefined();
    const apps = res.data!.apps as Array<Record<string, any>>;
    const victim = apps.find((a) => a.name === 'victim')!;
    expect(victim).toMatchObject({
      source: 'API_KEYS',
      keys: 1,
      jwt: { scopes: ['identity:read', 'mobile-id:read'], lastActivityAt: expect.any(String) },
    });
    expect(Date.parse(victim.lastActivityAt)).toBeGreaterThanOrEqual(Date.parse(victim.jwt.lastActivityAt));
    // The JWT app partner is listed on its own; ops, seen only with its key, has no JWT activity.
    expect(apps.find((a) => a.name === 'partner')).toMatchObject({
      source: 'JWT',
      keys: null,
      jwt: { scopes: ['mobile-id:read'] },
    });
    expect(apps.find((a) => a.name === 'ops')).toMatchObject({ source: 'OPERATOR_KEYS', jwt: null });
    // No JWT was ever listed under the refused names.
    expect(apps.map((a) => a.name)).not.toContain('victim:x123');
  });

  it('activity stored before JWT rows were kept apart (a JWT app under its bare name) is still listed as that JWT app’s', async () => {
    const at = Date.now() - 60_000;
    await t.gateway.services.store.db
      .insertInto('app_activity')
      .values({ app: 'legacy-client', source: 'JWT', scopes: 'cloud:read', last_seen_at: at })
      .execute();
    const res = await t.graphql(APPS, undefined, {
      key: await sign(key, { claims: { azp: 'sre', scope: 'operator' } }),
    });
    expect((res.data!.apps as Array<Record<string, any>>).find((a) => a.name === 'legacy-client')).toEqual({
      name: 'legacy-client',
      source: 'JWT',
      scopes: ['cloud:read'],
      keys: null,
      lastActivityAt: new Date(at).toISOString(),
      jwt: { scopes: ['cloud:read'], lastActivityAt: new Date(at).toISOString() },
    });
  });
});

describe('AUTH_APPS: the JWT apps the operator declares', () => {
  let key: SigningKey;
  let jwks: JwksServer;
  let t: TestGateway;

  beforeAll(async () => {
    key = await signingKey('key-2');
    jwks = await startJwksServer([key]);
    t = await startJwtGateway(jwks, {
      GATEWAY_API_KEYS: `crm:${VICTIM_KEY}`,
      AUTH_APPS: 'partner,0f3c2a9e-1b7d-4c55-9a11-2d8e6f0b7c31=billing',
      AUTH_SCOPE_PREFIX: 'gateway:',
    });
  });
  afterAll(async () => {
    await t.close();
    await jwks.stop();
  });

  it('a token of an app AUTH_APPS does not list is refused; a listed name or client id is accepted under its name', async () => {
    const refused = await t.graphql(TYPENAME, undefined, { key: await sign(key, { claims: { azp: 'stranger' } }) });
    expect(refused.status).toBe(401);
    expect(refused.errors![0]!.message).toBe("the JWT's azp claim names no app this gateway accepts (AUTH_APPS)");
    expect(
      (await t.graphql(TYPENAME, undefined, { key: await sign(key, { claims: { azp: 'partner' } }) })).status,
    ).toBe(200);
    const billing = await sign(key, {
      claims: { azp: '0f3c2a9e-1b7d-4c55-9a11-2d8e6f0b7c31', scope: 'gateway:mobile-id:read' },
    });
    expect((await t.graphql(RESULT, { id: 'nothing' }, { key: billing })).errors).toBeUndefined();
  });

  it('with the default claim chain, a token without azp or client_id (a user’s, named by sub) is refused unless listed', async () => {
    const user = await sign(key, { claims: { azp: undefined, sub: '00u1a2b3c4d5e6f7g8h9' } });
    expect((await t.graphql(TYPENAME, undefined, { key: user })).status).toBe(401);
  });

  it('start-up warns when AUTH_SCOPE_PREFIX is empty, and when any name is accepted with sub as a fallback; not when neither is so', async () => {
    expect(t.logs()).not.toMatch(/AUTH_SCOPE_PREFIX is empty|AUTH_APPS accepts any app name/);
    const bare = await startJwtGateway(jwks);
    try {
      expect(bare.logs()).toMatch(/AUTH_SCOPE_PREFIX is empty/);
      expect(bare.logs()).toMatch(/AUTH_APPS accepts any app name \(\*\) with the default app claims/);
    } finally {
      await bare.close();
    }
  });
});

describe('AUTH_APPS at start-up', () => {
  const JWKS = { AUTH_JWKS_URL: 'https://idp.example/certs', AUTH_ISSUER: ISSUER, AUTH_AUDIENCE: AUDIENCE };

  it('is required with a JWKS, so that the operator declares which apps sign in with JWTs', () => {
    expect(configRefusal(JWKS)).toMatch(/^AUTH_APPS: is required with AUTH_JWKS_URL/);
    expect(configRefusal({ AUTH_APPS: '*' })).toMatch(/^AUTH_APPS: is set but no JWKS is/);
  });

  it('refuses a bare entry that is a configured app’s name: that they are one app must be said with name=name', () => {
    expect(configRefusal({ ...JWKS, GATEWAY_API_KEYS: 'shop:k1', AUTH_APPS: 'shop' })).toMatch(
      /^AUTH_APPS: entry 1: shop is also an app configured with keys .*write shop=shop/,
    );
    expect(
      loadConfig({ ...JWKS, GATEWAY_API_KEYS: 'shop:k1', AUTH_APPS: 'shop=shop' }).jwtAuth!.issuers[0]!.apps.listed,
    ).toEqual([{ claim: 'shop', app: 'shop', sameAsConfigured: true }]);
  });

  it('refuses names outside the configured names’ syntax, a claim listed twice, and operator apps it does not accept', () => {
    expect(configRefusal({ ...JWKS, AUTH_APPS: 'vіctim' })).toMatch(/^AUTH_APPS: entry 1: .* is not an app name/);
    expect(configRefusal({ ...JWKS, AUTH_APPS: 'client-1=a:b' })).toMatch(/^AUTH_APPS: entry 1: .* is not an app name/);
    expect(configRefusal({ ...JWKS, AUTH_APPS: 'a,a=b' })).toMatch(/^AUTH_APPS: entry 2: a is listed twice/);
    expect(configRefusal({ ...JWKS, AUTH_APPS: 'partner', AUTH_OPERATOR_APPS: 'sre' })).toMatch(
      /^AUTH_OPERATOR_APPS: sre is not an app AUTH_APPS accepts/,
    );
    expect(
      loadConfig({ ...JWKS, AUTH_APPS: '*', AUTH_OPERATOR_APPS: 'sre' }).jwtAuth!.issuers[0]!.operatorApps,
    ).toEqual(['sre']);
  });
});
