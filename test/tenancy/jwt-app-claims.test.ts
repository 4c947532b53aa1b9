// JWT apps and the names of apps with data (docs/apps-and-security.md, "Tenancy"): a name is one app, whatever
// credential carries it. An identity provider that accepts any app name (`*`) must not let a token take a name that
// AUTH_APPS (or an AUTH_ISSUERS entry) gives to a client id: a user's token named by its `sub`, or another client whose
// id is that name, would read what the named client created.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import {
  ISSUER,
  sign,
  signingKey,
  startJwksServer,
  startJwtGateway,
  type JwksServer,
  type SigningKey,
} from '../helpers/jwt.js';

const BILLING_CLIENT = '0f3c2a9e-1b7d-4c55-9a11-2d8e6f0b7c31';
const OTHER_ISSUER = 'https://login.partner.example.test/v2.0';
const REGISTER = `mutation { registerVerification(input: { workflowId: "wf-kyc", applicant: { lastName: "Petrova" } }) {
  verification { externalId }
} }`;
const RESULTS = 'query($ids: [ID!]!) { verificationResults(externalIds: $ids) { externalId } }';

async function registered(t: TestGateway, token: string): Promise<string> {
  const res = await t.graphql(REGISTER, {}, { key: token });
  expect(res.errors).toBeUndefined();
  return res.data!.registerVerification.verification.externalId as string;
}

describe('a provider that accepts any app name (*) beside <client id>=<name> entries', () => {
  let key: SigningKey;
  let jwks: JwksServer;
  let t: TestGateway;
  beforeAll(async () => {
    key = await signingKey('star-1');
    jwks = await startJwksServer([key]);
    t = await startJwtGateway(jwks, { AUTH_APPS: `${BILLING_CLIENT}=billing,*` });
  });
  afterAll(async () => {
    await t?.close();
    await jwks?.stop();
  });

  it("a token whose azp, client_id or sub is the name billing (not billing's client id) is refused, and reads none of billing's data", async () => {
    const billing = await sign(key, { claims: { azp: BILLING_CLIENT } });
    const id = await registered(t, billing);
    expect((await t.graphql(RESULTS, { ids: [id] }, { key: billing })).data).toEqual({
      verificationResults: [{ externalId: id }],
    });
    for (const claims of [
      { azp: 'billing' },
      { azp: undefined, client_id: 'billing' },
      { azp: undefined, sub: 'billing' },
    ]) {
      const token = await sign(key, { claims });
      const res = await t.graphql(RESULTS, { ids: [id] }, { key: token });
      expect(res.status, JSON.stringify(claims)).toBe(401);
      expect(res.data).toBeUndefined();
    }
    // Any other name is still an app of its own.
    expect(
      (await t.graphql(RESULTS, { ids: [id] }, { key: await sign(key, { claims: { azp: 'portal' } }) })).data,
    ).toEqual({
      verificationResults: [null],
    });
  });
});

describe('AUTH_ISSUERS: one app through two providers, one of which accepts any name', () => {
  let keycloak: SigningKey;
  let partner: SigningKey;
  let t: TestGateway;
  beforeAll(async () => {
    keycloak = await signingKey('kc-1');
    partner = await signingKey('partner-1');
    const dir = tempDataDir('star-issuers-');
    fs.writeFileSync(path.join(dir, 'kc.json'), JSON.stringify({ keys: [keycloak.publicJwk] }));
    fs.writeFileSync(path.join(dir, 'partner.json'), JSON.stringify({ keys: [partner.publicJwk] }));
    const file = path.join(dir, 'issuers.yaml');
    fs.writeFileSync(
      file,
      [
        'issuers:',
        `  - issuer: ${ISSUER}`,
        '    jwksFile: kc.json',
        '    audience: gateway',
        '    apps: ["shop-kc=shop"]',
        `  - issuer: ${OTHER_ISSUER}`,
        '    jwksFile: partner.json',
        '    audience: gateway',
        '    apps: ["shop-partner=shop", "*"]',
        '',
      ].join('\n'),
    );
    t = await startTestGateway({ AUTH_ISSUERS: file });
  });
  afterAll(() => t?.close());

  it("the * provider's token named shop (not shop's client id there) is refused; shop's own clients read shop's data", async () => {
    const shop = await sign(keycloak, { claims: { azp: 'shop-kc' } });
    const id = await registered(t, shop);
    const moved = await sign(partner, { iss: OTHER_ISSUER, claims: { azp: 'shop-partner' } });
    expect((await t.graphql(RESULTS, { ids: [id] }, { key: moved })).data).toEqual({
      verificationResults: [{ externalId: id }],
    });
    const impostor = await sign(partner, { iss: OTHER_ISSUER, claims: { azp: 'shop' } });
    const res = await t.graphql(RESULTS, { ids: [id] }, { key: impostor });
    expect(res.status).toBe(401);
    expect(res.data).toBeUndefined();
  });
});
