// MOBILEID_NOTIFICATION_TOKENS=<app>:<token> binds a notification token to an app that signs in only with JWTs (one
// AUTH_APPS or AUTH_ISSUERS lists, or any app name when a provider accepts `*`): the mobile-ID results it carries are
// that app's alone, as for an app of API keys.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { loadConfig } from '../../src/config/index.js';
import type { TestGateway } from '../helpers/gateway.js';
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
import { postNotification, QUERY } from '../helpers/mobile-id.js';

const SHOP_NOTIFY = 'shop-notification-token-0123456789';

describe('notification tokens of JWT apps', () => {
  let key: SigningKey;
  let jwks: JwksServer;
  let t: TestGateway;
  beforeAll(async () => {
    key = await signingKey('kid-1');
    jwks = await startJwksServer([key]);
    t = await startJwtGateway(jwks, {
      AUTH_APPS: 'shop,crm',
      SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
      MOBILEID_NOTIFICATION_TOKENS: `shop:${SHOP_NOTIFY}`,
    });
  });
  afterAll(async () => {
    await t.close();
    await jwks.stop();
  });

  it("MOBILEID_NOTIFICATION_TOKENS binds a token to a JWT-only app: the results it carries are that app's, and no other app reads them", async () => {
    const authReqId = `auth-${randomUUID()}`;
    const posted = await postNotification(
      t,
      { auth_req_id: authReqId, error: 'access_denied', error_description: 'the user refused' },
      { token: SHOP_NOTIFY },
    );
    expect(posted.status).toBe(204);
    const shop = await t.graphql(QUERY, { id: authReqId }, { key: await sign(key, { claims: { azp: 'shop' } }) });
    expect(shop.data!.mobileIdAuthentication).toMatchObject({
      __typename: 'MobileIdAuthenticationFailed',
      errorDescription: 'the user refused',
    });
    const crm = await t.graphql(QUERY, { id: authReqId }, { key: await sign(key, { claims: { azp: 'crm' } }) });
    expect(crm.errors).toBeUndefined();
    expect(crm.data!.mobileIdAuthentication).toBeNull();
  });

  it('a token bound to a name that is neither a configured app nor a JWT app still stops start-up; with AUTH_APPS=* any app name may be bound', () => {
    const env = {
      AUTH_JWKS_URL: 'https://idp.example/keys',
      AUTH_ISSUER: ISSUER,
      AUTH_AUDIENCE: AUDIENCE,
      SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
    };
    expect(() =>
      loadConfig({ ...env, AUTH_APPS: 'shop', MOBILEID_NOTIFICATION_TOKENS: `shpo:${SHOP_NOTIFY}` }),
    ).toThrow(
      /^MOBILEID_NOTIFICATION_TOKENS: entry 1 binds a token to the app "shpo", which no configured app is called; the named apps are shop/,
    );
    const mobileId = loadConfig({ ...env, AUTH_APPS: '*', MOBILEID_NOTIFICATION_TOKENS: `portal:${SHOP_NOTIFY}` })
      .upstreams.mobileId;
    expect(mobileId).toMatchObject({
      sandbox: false,
      notificationTokens: [{ token: SHOP_NOTIFY, scope: 'app:portal' }],
    });
  });
});
