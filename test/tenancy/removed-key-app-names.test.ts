// The name of an app configured with keys is its data's owner (`app:<name>`), and stays so after the app is removed:
// an identity provider that accepts any app name (`*`) never takes it, neither after the reload that removes the app
// nor after a restart without it, on SQLite and across PostgreSQL replicas (docs/decisions/058). An explicit
// `<claim value>=<name>` entry of AUTH_APPS still hands the name over, and a name never configured with keys is `*`'s.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import {
  sign,
  signingKey,
  startJwksServer,
  startJwtGateway,
  type JwksServer,
  type SigningKey,
} from '../helpers/jwt.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';

const SHOP = 'shop-key-0123456789abcdef';
const SRE = 'sre-key-0123456789abcdef';
const REGISTER = `mutation { registerVerification(input: { workflowId: "wf-kyc", applicant: { lastName: "Petrova" } }) {
  verification { id }
} }`;
/** A store-only read of the verification (node), so that a restarted gateway's new sandbox does not matter. */
const READ = 'query($id: ID!) { node(id: $id) { id } }';

const digest = (key: string) => createHash('sha256').update(key).digest('hex');
/** The apps file: the operator app sre, and shop with its key when `withShop`. */
const apps = (withShop: boolean) =>
  [
    'apps:',
    '  - name: sre',
    '    scopes: [operator]',
    `    keys: [{ sha256: ${digest(SRE)} }]`,
    ...(withShop
      ? ['  - name: shop', '    scopes: [identity:read, identity:write]', `    keys: [{ sha256: ${digest(SHOP)} }]`]
      : []),
    '',
  ].join('\n');

async function reload(t: TestGateway): Promise<number> {
  const res = await request(`${t.url}/admin/reload`, { method: 'POST', headers: { authorization: `Bearer ${SRE}` } });
  await res.body.dump();
  return res.statusCode;
}

/** Registers a verification with shop's key: its id. */
async function shopsVerification(t: TestGateway): Promise<string> {
  const res = await t.graphql(REGISTER, {}, { key: SHOP });
  expect(res.errors).toBeUndefined();
  return res.data!.registerVerification.verification.id as string;
}

async function expectRefused(t: TestGateway, token: string, id: string): Promise<void> {
  const res = await t.graphql(READ, { id }, { key: token });
  expect(res.status).toBe(401);
  expect(res.data).toBeUndefined();
  expect(res.errors![0]!.message).toMatch(/names an app configured with API keys/);
}

let key: SigningKey;
let jwks: JwksServer;
beforeAll(async () => {
  key = await signingKey('removed-1');
  jwks = await startJwksServer([key]);
});
afterAll(() => jwks?.stop());

describe('an app configured with keys, then removed, with a provider that accepts any app name (*)', () => {
  it("after the reload that removes shop, a * token named shop is still refused and reads nothing of shop's", async () => {
    const file = path.join(tempDataDir('removed-app-'), 'apps.yaml');
    fs.writeFileSync(file, apps(true));
    const t = await startJwtGateway(jwks, { GATEWAY_APPS_FILE: file });
    try {
      const id = await shopsVerification(t);
      const token = await sign(key, { claims: { azp: 'shop' } });
      await expectRefused(t, token, id);

      fs.writeFileSync(file, apps(false));
      expect(await reload(t)).toBe(200);
      expect((await t.graphql(READ, { id }, { key: SHOP })).status).toBe(401);
      await expectRefused(t, token, id);

      // A name never configured with keys is still *'s, and reads nothing of shop's.
      const portal = await t.graphql(READ, { id }, { key: await sign(key, { claims: { azp: 'portal' } }) });
      expect(portal.errors).toBeUndefined();
      expect(portal.data).toEqual({ node: null });
    } finally {
      await t.close();
    }
  });

  it('after a restart without shop, on the same database, the * token named shop is refused; shop=shop hands it over', async () => {
    const dir = tempDataDir('removed-app-restart-');
    const file = path.join(dir, 'apps.yaml');
    fs.writeFileSync(file, apps(true));
    const env = { DATA_DIR: dir, GATEWAY_APPS_FILE: file };
    const first = await startJwtGateway(jwks, env);
    const id = await shopsVerification(first);
    await first.close();

    fs.writeFileSync(file, apps(false));
    const token = await sign(key, { claims: { azp: 'shop' } });
    const without = await startJwtGateway(jwks, env);
    await expectRefused(without, token, id);
    const portal = await without.graphql(READ, { id }, { key: await sign(key, { claims: { azp: 'portal' } }) });
    expect(portal.data).toEqual({ node: null });
    await without.close();

    // The operator's way to move shop from keys to JWTs: said, not fallen into.
    for (const AUTH_APPS of ['shop=shop,*', 'shop-client=shop,*']) {
      const moved = await startJwtGateway(jwks, { ...env, AUTH_APPS });
      const claim = AUTH_APPS.split('=')[0]!;
      const res = await moved.graphql(READ, { id }, { key: await sign(key, { claims: { azp: claim } }) });
      expect(res.errors, AUTH_APPS).toBeUndefined();
      expect(res.data, AUTH_APPS).toEqual({ node: { id } });
      await moved.close();
    }
  });
});

describe('replicas on PostgreSQL', () => {
  let pg: TestPostgres;
  beforeAll(async () => {
    pg = await startPostgres();
  }, 120_000);
  afterAll(() => pg?.stop());

  it('a replica that never had shop configured refuses * its name once another replica recorded it (at its start or at its next reload)', async () => {
    const shared = {
      DATABASE_URL: await pg.createDatabase('removed_key_app_names'),
      TOKEN_ENCRYPTION_KEY: 'b'.repeat(64),
      AUTH_JWKS_URL: jwks.url,
      AUTH_ISSUER: 'https://idp.example.test/realms/acme',
      AUTH_AUDIENCE: 'gateway',
      AUTH_APPS: '*',
    };
    const without = path.join(tempDataDir('replica-b-'), 'apps.yaml');
    fs.writeFileSync(without, apps(false));
    const withShop = path.join(tempDataDir('replica-a-'), 'apps.yaml');
    fs.writeFileSync(withShop, apps(true));
    // B starts first: shop is nobody's yet.
    const b = await startTestGateway({ ...shared, GATEWAY_APPS_FILE: without });
    try {
      const a = await startTestGateway({ ...shared, GATEWAY_APPS_FILE: withShop });
      try {
        const id = await shopsVerification(a);
        const token = await sign(key, { claims: { azp: 'shop' } });
        await expectRefused(a, token, id);
        // B's reload reads what A recorded, though B's own files never named shop.
        expect(await reload(b)).toBe(200);
        await expectRefused(b, token, id);
        // A replica started now reads it at its start.
        const c = await startTestGateway({ ...shared, GATEWAY_APPS_FILE: without });
        try {
          await expectRefused(c, token, id);
        } finally {
          await c.close();
        }
      } finally {
        await a.close();
      }
    } finally {
      await b.close();
    }
  }, 120_000);
});
