// The AUTH_* variables, and what a verified token makes of its claims: the app, its scopes, and when its connections end.
import { describe, expect, it } from 'vitest';

import { APP_GRANTS, Grants } from '../../src/auth/caller.js';
import { appOf, expiryDelay, scopesOf } from '../../src/auth/jwt.js';
import { ConfigError, loadConfig } from '../../src/config/index.js';

const JWKS = {
  AUTH_JWKS_URL: 'https://idp.example/certs',
  AUTH_ISSUER: 'https://idp.example',
  AUTH_AUDIENCE: 'gateway',
  AUTH_APPS: '*',
};

function refusal(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('start-up was not stopped');
}

describe('the AUTH_* variables', () => {
  it('a JWKS needs AUTH_ISSUER and AUTH_AUDIENCE: start-up stops naming the one that is missing', () => {
    expect(refusal({ AUTH_JWKS_URL: JWKS.AUTH_JWKS_URL, AUTH_AUDIENCE: 'gateway' }).message).toMatch(
      /^AUTH_ISSUER: is required with AUTH_JWKS_URL/,
    );
    expect(refusal({ AUTH_JWKS_FILE: '/tmp/jwks.json', AUTH_ISSUER: 'https://idp.example' }).message).toMatch(
      /^AUTH_AUDIENCE: is required/,
    );
  });

  it('refuses both a JWKS URL and file, settings without a JWKS, and bad values, naming the variable', () => {
    expect(refusal({ ...JWKS, AUTH_JWKS_FILE: '/tmp/jwks.json' }).message).toMatch(
      /^AUTH_JWKS_FILE: set either AUTH_JWKS_URL or AUTH_JWKS_FILE/,
    );
    expect(refusal({ AUTH_ISSUER: 'https://idp.example' }).message).toMatch(/^AUTH_ISSUER: is set but no JWKS is/);
    expect(refusal({ ...JWKS, AUTH_JWKS_URL: 'ftp://idp.example/certs' }).message).toMatch(
      /^AUTH_JWKS_URL: must be an http\(s\) URL/,
    );
    expect(refusal({ ...JWKS, AUTH_JWKS_REFRESH_INTERVAL: '10ms' }).message).toMatch(
      /^AUTH_JWKS_REFRESH_INTERVAL: must be from 1s to 24h/,
    );
    expect(refusal({ ...JWKS, AUTH_JWKS_REFRESH_INTERVAL: 'soon' }).message).toMatch(
      /^AUTH_JWKS_REFRESH_INTERVAL: must be a duration/,
    );
    expect(refusal({ ...JWKS, AUTH_APP_CLAIM: 'app name' }).message).toMatch(/^AUTH_APP_CLAIM: must be a claim name/);
    expect(refusal({ ...JWKS, AUTH_SCOPE_PREFIX: 'gw: ' }).message).toMatch(/^AUTH_SCOPE_PREFIX: must not hold spaces/);
  });

  it('with a JWKS, real upstreams need no API keys: the gateway is not open, apps sign in with JWTs', () => {
    const env = {
      CLOUD_API_URL: 'https://cloud.example',
      CLOUD_API_TOKEN: 't',
      SANDBOX_UPSTREAMS: 'verification,identification,mobile-id',
    };
    expect(refusal(env).message).toMatch(
      /^GATEWAY_API_KEYS: is required when any upstream is real, unless apps sign in with JWTs/,
    );
    const config = loadConfig({
      ...env,
      ...JWKS,
      AUTH_AUDIENCE: 'gateway, gateway-staging',
      AUTH_SCOPE_PREFIX: 'gateway:',
    });
    expect(config.jwtAuth).toEqual({
      issuersFile: null,
      issuers: [
        {
          jwks: { url: 'https://idp.example/certs' },
          issuer: 'https://idp.example',
          audience: ['gateway', 'gateway-staging'],
          appClaim: null,
          scopePrefix: 'gateway:',
          scopeClaims: ['scope', 'scp'],
          apps: { any: true, listed: [] },
          operatorApps: [],
        },
      ],
      refreshIntervalMs: 60_000,
      verifiedCacheSize: 10_000,
    });
    expect(loadConfig({}).jwtAuth).toBeNull();
  });

  it('a bad AUTH_JWKS_FILE stops start-up naming it', async () => {
    const { startTestGateway } = await import('../helpers/gateway.js');
    await expect(
      startTestGateway({
        AUTH_JWKS_FILE: '/nonexistent/jwks.json',
        AUTH_ISSUER: 'https://idp.example',
        AUTH_AUDIENCE: 'gateway',
        AUTH_APPS: '*',
      }),
    ).rejects.toThrow(/^AUTH_JWKS_FILE: .*not a readable JSON file/);
  });
});

describe('what a token grants', () => {
  it('scopes come from scope (space-separated) and scp (array or string), with the prefix removed; others are ignored', () => {
    expect(scopesOf({ scope: 'openid cloud:read identity:write bogus' }, '')).toEqual(['cloud:read', 'identity:write']);
    expect(scopesOf({ scp: ['mobile-id:read', 'operator', 42] }, '')).toEqual(['mobile-id:read', 'operator']);
    expect(scopesOf({ scope: 'gateway:cloud:write cloud:read profile', scp: 'gateway:operator' }, 'gateway:')).toEqual([
      'cloud:write',
      'operator',
    ]);
    expect(scopesOf({}, '')).toEqual([]);
    expect(Grants.of(scopesOf({ scope: 'cloud:read cloud:read' }, '')).scopes).toEqual(['cloud:read']);
    // A token granting every scope of the upstreams holds what a key of GATEWAY_API_KEYS holds: the same interned grants.
    const every = Grants.of(
      scopesOf({ scope: 'cloud:read cloud:write identity:read identity:write mobile-id:read mobile-id:write' }, ''),
    );
    expect(every).toBe(APP_GRANTS);
    expect(Grants.of(scopesOf({ scope: 'cloud:read' }, ''))).not.toBe(APP_GRANTS);
  });

  it('the app is AUTH_APP_CLAIM, or the first present of azp, client_id, sub', () => {
    expect(appOf({ azp: 'shop', client_id: 'other', sub: 'x' }, null)).toEqual({ app: 'shop' });
    expect(appOf({ client_id: 'shop', sub: 'x' }, null)).toEqual({ app: 'shop' });
    expect(appOf({ sub: 'service-account-shop' }, null)).toEqual({ app: 'service-account-shop' });
    expect(appOf({ azp: 'shop', appid: 'entra-app' }, 'appid')).toEqual({ app: 'entra-app' });
    expect(appOf({ azp: 'shop' }, 'appid')).toEqual({
      refused: 'the JWT has no appid claim to name the app',
      reason: 'no_app_claim',
    });
    expect(appOf({}, null)).toEqual({
      refused: 'the JWT has no azp, client_id, sub claim to name the app',
      reason: 'no_app_claim',
    });
  });

  it("a connection's end is scheduled exp − now after it opens; an API key's never", () => {
    const caller = { scope: 'app:shop', app: 'shop', grants: Grants.of([]), expiresAt: 1_800_000_000_000 };
    expect(expiryDelay(caller, 1_800_000_000_000 - 90_000)).toBe(90_000);
    expect(expiryDelay(caller, 1_800_000_000_000 + 5)).toBe(0);
    expect(expiryDelay({ scope: 'app:shop', grants: Grants.of([]) }, 0)).toBeNull();
  });
});
