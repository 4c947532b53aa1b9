// Identity providers as enterprises run them (docs/decisions/058): Microsoft Entra ID client-credential tokens, whose
// permissions are in `roles` (AUTH_SCOPE_CLAIMS), and several providers at once (AUTH_ISSUERS), each token checked
// against the provider of its own iss only. Real gateways over HTTP; the providers are key pairs made here, their
// JWKS served over loopback or written to a file.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { SignJWT } from 'jose';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { ConfigError, loadConfig } from '../../src/config/index.js';
import { startTestGateway, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import {
  AUDIENCE,
  ISSUER,
  nowSeconds,
  sign,
  signingKey,
  startJwksServer,
  type JwksServer,
  type SigningKey,
} from '../helpers/jwt.js';

const TENANT = '72f988bf-86f1-41af-91ab-2d7cd011db47';
const ENTRA_ISSUER = `https://login.microsoftonline.com/${TENANT}/v2.0`;
/** The gateway's app registration in Entra ID: the aud of tokens issued for it (v2: its client id). */
const GATEWAY_APP_ID = '6e74172b-be56-4843-9ff4-e66a39bb12e3';
/** The billing service's app registration: the azp of its client-credential tokens. */
const BILLING_CLIENT_ID = 'b3f1c2d4-0a9e-4c55-8b1e-2f0d5a7c9e11';
const PROJECTS = '{ projects(first: 1) { id } }';
const TYPENAME = '{ __typename }';

/** A client-credential access token as Entra ID (v2 endpoint) issues it to a daemon app with application permissions. */
async function entraToken(
  key: SigningKey,
  claims: Record<string, unknown> = {},
  audience = GATEWAY_APP_ID,
): Promise<string> {
  const now = nowSeconds();
  const oid = randomUUID();
  return new SignJWT({
    aio: 'k2BgYDi8e+7gvqXZ5kL8lf4Q0y5bAQA=',
    azp: BILLING_CLIENT_ID,
    azpacr: '1',
    idtyp: 'app',
    oid,
    rh: '0.AXEAv4j5cvGGr0GRqy180BHbRysXdG5WvkNIn_vmajm7EuNxAAA.',
    roles: ['gateway:cloud:read', 'gateway:identity:read'],
    sub: oid,
    tid: TENANT,
    uti: 'Vb5ZhK3wKkC7bMnR5lQjAA',
    ver: '2.0',
    ...claims,
  })
    .setProtectedHeader({ typ: 'JWT', alg: key.alg, kid: key.kid })
    .setIssuer(ENTRA_ISSUER)
    .setAudience(audience)
    .setIssuedAt(now)
    .setNotBefore(now)
    .setExpirationTime(now + 3599)
    .sign(key.privateKey);
}

async function ask(t: TestGateway, token: string, query: string) {
  return t.graphql(query, undefined, { key: token });
}

describe('Microsoft Entra ID client-credential tokens (AUTH_SCOPE_CLAIMS)', () => {
  let key: SigningKey;
  let jwks: JwksServer;
  const started: TestGateway[] = [];
  const entra = async (env: Record<string, string> = {}) => {
    const t = await startTestGateway({
      AUTH_JWKS_URL: jwks.url,
      AUTH_ISSUER: ENTRA_ISSUER,
      AUTH_AUDIENCE: GATEWAY_APP_ID,
      AUTH_APP_CLAIM: 'azp',
      AUTH_APPS: `${BILLING_CLIENT_ID}=billing`,
      AUTH_SCOPE_PREFIX: 'gateway:',
      OPERATOR_API_KEYS: 'root:root-key-0123456789abcdef',
      ...env,
    });
    started.push(t);
    return t;
  };
  beforeAll(async () => {
    key = await signingKey('entra-kid-1', 'RS256');
    jwks = await startJwksServer([key]);
  });
  afterEach(async () => {
    await Promise.all(started.splice(0).map((t) => t.close()));
  });
  afterAll(() => jwks.stop());

  it('with AUTH_SCOPE_CLAIMS=roles, the roles of an Entra ID token grant their scopes to the app its azp names', async () => {
    const t = await entra({ AUTH_SCOPE_CLAIMS: 'roles' });
    const token = await entraToken(key);
    const read = await ask(t, token, PROJECTS);
    expect(read.errors).toBeUndefined();
    expect(read.data).toEqual({ projects: expect.any(Array) });
    // cloud:read and identity:read only: mobile-ID results need mobile-id:read, which no role grants.
    const other = await ask(t, token, '{ mobileIdAuthentication(authReqId: "x") { __typename } }');
    expect(other.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    // The app is the one AUTH_APPS names for the client id in azp.
    const seen = await t.graphql('{ apps { name source } }', undefined, { key: 'root-key-0123456789abcdef' });
    expect(seen.data!.apps).toEqual(
      expect.arrayContaining([expect.objectContaining({ name: 'billing', source: 'JWT' })]),
    );
  });

  it("with the default AUTH_SCOPE_CLAIMS (scope,scp), an Entra ID token's roles grant nothing", async () => {
    const t = await entra();
    const read = await ask(t, await entraToken(key), PROJECTS);
    expect(read.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
  });

  it('AUTH_SCOPE_CLAIMS reads every claim it names: roles and scp together', async () => {
    const t = await entra({ AUTH_SCOPE_CLAIMS: 'scp, roles' });
    const token = await entraToken(key, { roles: ['gateway:identity:read'], scp: 'gateway:cloud:read' });
    expect((await ask(t, token, PROJECTS)).errors).toBeUndefined();
  });

  it('AUTH_SCOPE_CLAIMS refuses a value that is not claim names, naming the variable', () => {
    const env = {
      AUTH_JWKS_URL: 'https://idp.example/keys',
      AUTH_ISSUER: ENTRA_ISSUER,
      AUTH_AUDIENCE: GATEWAY_APP_ID,
      AUTH_APPS: '*',
    };
    expect(() => loadConfig({ ...env, AUTH_SCOPE_CLAIMS: 'roles, app roles' })).toThrow(
      /^AUTH_SCOPE_CLAIMS: must be claim names/,
    );
    expect(loadConfig({ ...env, AUTH_SCOPE_CLAIMS: 'roles' }).jwtAuth!.issuers[0]!.scopeClaims).toEqual(['roles']);
  });
});

describe('several identity providers (AUTH_ISSUERS)', () => {
  let entraKey: SigningKey;
  let keycloakKey: SigningKey;
  let entraJwks: JwksServer;
  let dir: string;
  let issuersFile: string;
  let t: TestGateway;

  const issuers = (entries: { entra?: boolean; keycloak?: boolean } = { entra: true, keycloak: true }) =>
    [
      'issuers:',
      ...(entries.entra
        ? [
            `  - issuer: ${ENTRA_ISSUER}`,
            `    jwksUrl: ${entraJwks.url}`,
            `    audience: ${GATEWAY_APP_ID}`,
            '    appClaim: azp',
            '    scopeClaims: [roles]',
            '    scopePrefix: "gateway:"',
            `    apps: ["${BILLING_CLIENT_ID}=billing"]`,
          ]
        : []),
      ...(entries.keycloak
        ? [
            `  - issuer: ${ISSUER}`,
            '    jwksFile: keycloak-jwks.json',
            `    audience: [${AUDIENCE}]`,
            '    apps: ["*"]',
            '    operatorApps: [sre]',
            '    note: the staff portal and internal tools',
          ]
        : []),
      '',
    ].join('\n');

  beforeAll(async () => {
    entraKey = await signingKey('entra-kid-1', 'RS256');
    keycloakKey = await signingKey('keycloak-kid-1', 'ES256');
    entraJwks = await startJwksServer([entraKey]);
    dir = tempDataDir('issuers-');
    fs.writeFileSync(path.join(dir, 'keycloak-jwks.json'), JSON.stringify({ keys: [keycloakKey.publicJwk] }));
    issuersFile = path.join(dir, 'issuers.yaml');
    fs.writeFileSync(issuersFile, issuers());
    t = await startTestGateway({ AUTH_ISSUERS: issuersFile, OPERATOR_API_KEYS: 'root:root-key-0123456789abcdef' });
  });
  afterAll(async () => {
    await t.close();
    await entraJwks.stop();
  });

  const refusal = async (token: string) => {
    const res = await ask(t, token, TYPENAME);
    expect(res.status).toBe(401);
    return res.errors![0]!.message;
  };

  it("each provider's token is admitted with its own audience, app claim and scope claims", async () => {
    const entra = await ask(t, await entraToken(entraKey), PROJECTS);
    expect(entra.errors).toBeUndefined();
    const keycloak = await ask(
      t,
      await sign(keycloakKey, { claims: { azp: 'portal', scope: 'cloud:read' } }),
      PROJECTS,
    );
    expect(keycloak.errors).toBeUndefined();
    // The Keycloak entry reads scope and scp (AUTH_SCOPE_CLAIMS' default): roles there grant nothing.
    const roles = await ask(
      t,
      await sign(keycloakKey, { claims: { azp: 'portal', scope: 'openid', roles: ['cloud:read'] } }),
      PROJECTS,
    );
    expect(roles.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
  });

  it("a token with one provider's iss signed by another provider's key is refused", async () => {
    // Entra's iss, audience and claims, signed with Keycloak's key (which the Entra entry's JWKS does not hold).
    const forged = await new SignJWT({ azp: BILLING_CLIENT_ID, roles: ['gateway:cloud:read'], ver: '2.0' })
      .setProtectedHeader({ alg: keycloakKey.alg, kid: keycloakKey.kid })
      .setIssuer(ENTRA_ISSUER)
      .setAudience(GATEWAY_APP_ID)
      .setExpirationTime(nowSeconds() + 600)
      .sign(keycloakKey.privateKey);
    expect(await refusal(forged)).toMatch(/no key of the identity provider's JWKS .* matches the JWT's kid/);
    // And with Entra's kid in the header: the signature does not verify with Entra's key.
    const forgedKid = await new SignJWT({ azp: BILLING_CLIENT_ID, roles: ['gateway:cloud:read'] })
      .setProtectedHeader({ alg: 'RS256', kid: entraKey.kid })
      .setIssuer(ENTRA_ISSUER)
      .setAudience(GATEWAY_APP_ID)
      .setExpirationTime(nowSeconds() + 600)
      .sign((await signingKey('attacker', 'RS256')).privateKey);
    expect(await refusal(forgedKid)).toMatch(/signature does not verify/);
  });

  it("a token is checked against its own provider's audience: Keycloak's audience with Entra's iss is refused", async () => {
    expect(await refusal(await entraToken(entraKey, {}, AUDIENCE))).toMatch(/aud does not name this gateway/);
  });

  it('a token whose iss is no provider of AUTH_ISSUERS is refused, saying so', async () => {
    const other = await sign(keycloakKey, {
      iss: 'https://login.microsoftonline.com/another-tenant/v2.0',
      claims: { azp: 'portal' },
    });
    expect(await refusal(other)).toBe(
      `the JWT's iss "https://login.microsoftonline.com/another-tenant/v2.0" is not an identity provider this gateway trusts (AUTH_ISSUERS)`,
    );
    const none = await new SignJWT({ azp: 'portal' })
      .setProtectedHeader({ alg: keycloakKey.alg, kid: keycloakKey.kid })
      .setAudience(AUDIENCE)
      .setExpirationTime(nowSeconds() + 600)
      .sign(keycloakKey.privateKey);
    expect(await refusal(none)).toMatch(/has no iss claim/);
  });

  it('a provider that accepts any app name (*) does not take an app another provider lists', async () => {
    expect(await refusal(await sign(keycloakKey, { claims: { azp: 'billing' } }))).toMatch(
      /names an app another identity provider of AUTH_ISSUERS signs in/,
    );
    const metrics = await (await request(`${t.url}/metrics`)).body.text();
    expect(metrics).toMatch(/^gateway_jwt_refusals_total\{reason="other_issuer"\} [1-9]/m);
  });

  it("what one provider's app created reads, for another provider's apps, as an unknown id: one named like it in another case too", async () => {
    const billing = await entraToken(entraKey, { roles: ['gateway:identity:read', 'gateway:identity:write'] });
    const registered = await ask(
      t,
      billing,
      'mutation { registerVerification(input: { workflowId: "wf-kyc", applicant: { lastName: "Ivanova" } }) { verification { externalId } } }',
    );
    expect(registered.errors).toBeUndefined();
    const id = registered.data!.registerVerification.verification.externalId as string;
    const results = (token: string, ids: string[]) =>
      t.graphql(
        'query($ids: [ID!]!) { verificationResults(externalIds: $ids) { externalId } }',
        { ids },
        { key: token },
      );
    expect((await results(billing, [id])).data).toEqual({ verificationResults: [{ externalId: id }] });
    for (const azp of ['portal', 'Billing']) {
      const other = await sign(keycloakKey, { claims: { azp, scope: 'identity:read' } });
      const theirs = await results(other, [id, `unknown-${randomUUID()}`]);
      expect(theirs, azp).toEqual({ status: 200, data: { verificationResults: [null, null] } });
    }
  });

  it("operator is granted only to a provider's operatorApps", async () => {
    const sre = await ask(
      t,
      await sign(keycloakKey, { claims: { azp: 'sre', scope: 'operator' } }),
      '{ apps { name } }',
    );
    expect(sre.errors).toBeUndefined();
    const billing = await ask(t, await entraToken(entraKey, { roles: ['gateway:operator'] }), '{ apps { name } }');
    expect(billing.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
  });

  it("a token of each provider is verified once and then answered from the cache, each under its own provider's keys", async () => {
    const checks = async () => {
      const text = await (await request(`${t.url}/metrics`)).body.text();
      const count = (check: string) =>
        Number(new RegExp(`^gateway_jwt_checks_total\\{check="${check}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
      return { verified: count('verified'), cached: count('cached') };
    };
    const entra = await entraToken(entraKey);
    const keycloak = await sign(keycloakKey, { claims: { azp: 'portal' } });
    const before = await checks();
    for (const token of [entra, keycloak, entra, keycloak, entra])
      expect((await ask(t, token, TYPENAME)).status).toBe(200);
    expect(await checks()).toEqual({ verified: before.verified + 2, cached: before.cached + 3 });
  });

  it('a reload reads AUTH_ISSUERS again: a provider removed refuses its tokens as unknown, one added back admits them', async () => {
    const reload = () =>
      request(`${t.url}/admin/reload`, {
        method: 'POST',
        headers: { authorization: 'Bearer root-key-0123456789abcdef' },
      });
    try {
      fs.writeFileSync(issuersFile, issuers({ keycloak: true }));
      expect((await reload()).statusCode).toBe(200);
      expect(await refusal(await entraToken(entraKey))).toMatch(/is not an identity provider this gateway trusts/);
      expect((await ask(t, await sign(keycloakKey, { claims: { azp: 'portal' } }), TYPENAME)).status).toBe(200);
    } finally {
      fs.writeFileSync(issuersFile, issuers());
      expect((await reload()).statusCode).toBe(200);
    }
    expect((await ask(t, await entraToken(entraKey), PROJECTS)).errors).toBeUndefined();
  });
});

describe('AUTH_ISSUERS at start-up', () => {
  const write = (text: string) => {
    const file = path.join(tempDataDir('issuers-'), 'issuers.yaml');
    fs.writeFileSync(file, text);
    return file;
  };
  const refusal = (env: Record<string, string>): ConfigError => {
    try {
      loadConfig(env);
    } catch (err) {
      if (err instanceof ConfigError) return err;
      throw err;
    }
    throw new Error('loadConfig accepted the configuration');
  };
  const entry = (issuer: string, apps: string) =>
    `  - issuer: ${issuer}\n    jwksUrl: https://idp.example/keys\n    audience: gateway\n    apps: [${apps}]\n`;

  it('reads each entry, a jwksFile relative to the file, and AUTH_SCOPE_PREFIX and AUTH_SCOPE_CLAIMS as the defaults', () => {
    const file = write(
      `issuers:\n${entry('https://a.example', '"*"')}  - issuer: https://b.example\n    jwksFile: b.json\n    audience: [gateway, gateway-staging]\n    scopeClaims: [roles]\n    apps: [crm]\n`,
    );
    const config = loadConfig({ AUTH_ISSUERS: file, AUTH_SCOPE_PREFIX: 'gw:', AUTH_SCOPE_CLAIMS: 'scope' }).jwtAuth!;
    expect(config.issuersFile).toBe(file);
    expect(config.issuers.map((i) => [i.issuer, i.jwks, i.audience, i.scopePrefix, i.scopeClaims])).toEqual([
      ['https://a.example', { url: 'https://idp.example/keys' }, ['gateway'], 'gw:', ['scope']],
      [
        'https://b.example',
        { file: path.join(path.dirname(file), 'b.json') },
        ['gateway', 'gateway-staging'],
        'gw:',
        ['roles'],
      ],
    ]);
  });

  it('stops start-up naming the file and line for a bad entry, a repeated issuer, or an app listed bare by two providers', () => {
    expect(
      refusal({
        AUTH_ISSUERS: write(`issuers:\n  - issuer: https://a.example\n    audience: gateway\n    apps: ["*"]\n`),
      }).message,
    ).toMatch(/^AUTH_ISSUERS: .*issuers\.yaml line 2: issuers\.0\.jwksUrl needs jwksUrl or jwksFile/);
    expect(
      refusal({
        AUTH_ISSUERS: write(`issuers:\n${entry('https://a.example', '"*"')}${entry('https://a.example', 'crm')}`),
      }).message,
    ).toMatch(/line 6: issuer https:\/\/a\.example is listed twice \(first at line 2\)/);
    expect(
      refusal({
        AUTH_ISSUERS: write(`issuers:\n${entry('https://a.example', 'crm')}${entry('https://b.example', 'crm')}`),
      }).message,
    ).toMatch(/line 9: issuer https:\/\/b\.example: the app crm is also an app of issuer https:\/\/a\.example/);
    // Written <claim value>=<name> by both, it is one app signing in through both.
    expect(
      loadConfig({
        AUTH_ISSUERS: write(
          `issuers:\n${entry('https://a.example', 'crm-a=crm')}${entry('https://b.example', 'crm-b=crm')}`,
        ),
      }).jwtAuth!.issuers,
    ).toHaveLength(2);
    expect(
      refusal({ AUTH_ISSUERS: write(`issuers:\n${entry('https://a.example', '"*"')}    operatorApps: ["bad name"]\n`) })
        .message,
    ).toMatch(/line 6: issuer https:\/\/a\.example: operatorApps "bad name" is not an app name/);
  });

  it('refuses two providers that both accept any app name: one name would be one app whoever signs its tokens (decision 058)', () => {
    const both = refusal({
      AUTH_ISSUERS: write(`issuers:\n${entry('https://a.example', '"*"')}${entry('https://b.example', '"*"')}`),
    });
    expect(both.message).toMatch(
      /line 9: issuer https:\/\/b\.example: apps \* is also accepted by issuer https:\/\/a\.example/,
    );
    expect(both).toMatchObject({ variable: 'AUTH_ISSUERS', place: { line: 9 } });
    // One provider with *, the other listing its apps: names stay apart (the * provider does not take the listed ones).
    expect(
      loadConfig({
        AUTH_ISSUERS: write(`issuers:\n${entry('https://a.example', '"*"')}${entry('https://b.example', 'crm')}`),
      }).jwtAuth!.issuers,
    ).toHaveLength(2);
  });

  it('refuses AUTH_ISSUERS beside the single-provider variables, naming the variable', () => {
    const file = write(`issuers:\n${entry('https://a.example', '"*"')}`);
    expect(refusal({ AUTH_ISSUERS: file, AUTH_ISSUER: 'https://a.example' }).message).toMatch(
      /^AUTH_ISSUER: is set beside AUTH_ISSUERS/,
    );
    expect(refusal({ AUTH_ISSUERS: file, AUTH_JWKS_URL: 'https://idp.example/keys' }).message).toMatch(
      /^AUTH_JWKS_URL: is set beside AUTH_ISSUERS/,
    );
  });
});
