// The name an identity provider's entry lists (bare `billing`, or `<claim value>=billing`) is its data's owner
// (`app:billing`), and stays so after the listing is removed: a provider that accepts any app name (`*`) never takes
// it, neither after the reload of AUTH_ISSUERS that removes it nor after a restart with another AUTH_APPS, on SQLite
// and across PostgreSQL replicas (docs/decisions/058). An entry that lists the name hands it over on purpose.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import { AUDIENCE, sign, signingKey, startJwksServer, type JwksServer, type SigningKey } from '../helpers/jwt.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';

const SRE = 'sre-key-0123456789abcdef';
const sha256Hex = (key: string) => createHash('sha256').update(key).digest('hex');
const A = 'https://corp.example.test/v2.0';
const B = 'https://partners.example.test/realms/partners';
const REGISTER = `mutation { registerVerification(input: { workflowId: "wf-kyc", applicant: { lastName: "Petrova" } }) {
  verification { id }
} }`;
/** A store-only read of the verification (node), so that a restarted gateway's new sandbox does not matter. */
const READ = 'query($id: ID!) { node(id: $id) { id } }';

let ka: SigningKey, kb: SigningKey, ja: JwksServer, jb: JwksServer;
beforeAll(async () => {
  ka = await signingKey('a-1');
  kb = await signingKey('b-1');
  ja = await startJwksServer([ka]);
  jb = await startJwksServer([kb]);
});
afterAll(async () => {
  await ja?.stop();
  await jb?.stop();
});

/** AUTH_ISSUERS: provider A with `aApps`, provider B with `bApps`. */
const issuers = (aApps: string, bApps: string) =>
  [
    'issuers:',
    `  - issuer: ${A}`,
    `    jwksUrl: ${ja.url}`,
    `    audience: ${AUDIENCE}`,
    `    apps: [${aApps}]`,
    `  - issuer: ${B}`,
    `    jwksUrl: ${jb.url}`,
    `    audience: ${AUDIENCE}`,
    `    apps: [${bApps}]`,
    '',
  ].join('\n');

/** A data directory with the issuers file and an apps file holding the operator app sre (for /admin/reload). */
function files(prefix: string, aApps: string, bApps: string): { dir: string; issuersFile: string; appsFile: string } {
  const dir = tempDataDir(prefix);
  const issuersFile = path.join(dir, 'issuers.yaml');
  fs.writeFileSync(issuersFile, issuers(aApps, bApps));
  const appsFile = path.join(dir, 'apps.yaml');
  fs.writeFileSync(
    appsFile,
    `apps:\n  - name: sre\n    scopes: [operator]\n    keys: [{ sha256: ${sha256Hex(SRE)} }]\n`,
  );
  return { dir, issuersFile, appsFile };
}

async function reload(t: TestGateway): Promise<number> {
  const res = await request(`${t.url}/admin/reload`, { method: 'POST', headers: { authorization: `Bearer ${SRE}` } });
  await res.body.dump();
  return res.statusCode;
}

/** Registers a verification with `token`: its id. */
async function registered(t: TestGateway, token: string): Promise<string> {
  const res = await t.graphql(REGISTER, {}, { key: token });
  expect(res.errors).toBeUndefined();
  return res.data!.registerVerification.verification.id as string;
}

async function expectRefused(t: TestGateway, token: string, id: string, message: RegExp): Promise<void> {
  const res = await t.graphql(READ, { id }, { key: token });
  expect(res.status).toBe(401);
  expect(res.data).toBeUndefined();
  expect(res.errors![0]!.message).toMatch(message);
}

async function configuredNameRefusals(t: TestGateway): Promise<number> {
  const metrics = await (await request(`${t.url}/metrics`)).body.text();
  return Number(/^gateway_jwt_refusals_total\{reason="configured_name"\} (\d+)$/m.exec(metrics)?.[1] ?? 0);
}

const LISTED_BEFORE = /names an app configured with API keys or listed by an identity provider .*before/;

describe('a name an identity provider listed, then no longer lists, with a provider that accepts any app name (*)', () => {
  it("AUTH_ISSUERS: after the reload where A stops listing billing, B's * token named billing is refused and reads nothing of billing's", async () => {
    const f = files('removed-jwt-issuers-', 'billing, crm', '"*"');
    const t = await startTestGateway({ DATA_DIR: f.dir, AUTH_ISSUERS: f.issuersFile, GATEWAY_APPS_FILE: f.appsFile });
    try {
      const id = await registered(t, await sign(ka, { iss: A, claims: { azp: 'billing' } }));
      const partner = await sign(kb, { iss: B, claims: { azp: 'billing' } });
      await expectRefused(t, partner, id, /another identity provider of AUTH_ISSUERS signs in/);

      fs.writeFileSync(f.issuersFile, issuers('crm', '"*"'));
      expect(await reload(t)).toBe(200);
      const before = await configuredNameRefusals(t);
      await expectRefused(t, partner, id, LISTED_BEFORE);
      expect(await configuredNameRefusals(t)).toBe(before + 1);

      // A name never listed is still *'s, and reads nothing of billing's.
      const portal = await t.graphql(READ, { id }, { key: await sign(kb, { iss: B, claims: { azp: 'portal' } }) });
      expect(portal.errors).toBeUndefined();
      expect(portal.data).toEqual({ node: null });

      // The operator's way to move billing to B: B lists it, and B's token then is billing, with its data.
      for (const [bApps, azp] of [
        ['"*", billing', 'billing'],
        ['"*", "billing-client=billing"', 'billing-client'],
      ] as const) {
        fs.writeFileSync(f.issuersFile, issuers('crm', bApps));
        expect(await reload(t), bApps).toBe(200);
        const res = await t.graphql(READ, { id }, { key: await sign(kb, { iss: B, claims: { azp } }) });
        expect(res.errors, bApps).toBeUndefined();
        expect(res.data, bApps).toEqual({ node: { id } });
      }
    } finally {
      await t.close();
    }
  });

  it('AUTH_APPS: after a restart without `billing-client=billing`, on the same database, the * token named billing is refused', async () => {
    const dir = tempDataDir('removed-jwt-apps-');
    const env = { DATA_DIR: dir, AUTH_JWKS_URL: ja.url, AUTH_ISSUER: A, AUTH_AUDIENCE: AUDIENCE };
    const first = await startTestGateway({ ...env, AUTH_APPS: 'billing-client=billing,*' });
    const id = await registered(first, await sign(ka, { iss: A, claims: { azp: 'billing-client' } }));
    const named = await sign(ka, { iss: A, claims: { azp: 'billing' } });
    await expectRefused(first, named, id, /AUTH_APPS gives to another claim value/);
    await first.close();

    const second = await startTestGateway({ ...env, AUTH_APPS: '*' });
    try {
      await expectRefused(second, named, id, LISTED_BEFORE);
      expect(await configuredNameRefusals(second)).toBe(1);
    } finally {
      await second.close();
    }

    // Listed bare, the name is handed over on purpose.
    const moved = await startTestGateway({ ...env, AUTH_APPS: 'billing,*' });
    try {
      const res = await moved.graphql(READ, { id }, { key: named });
      expect(res.errors).toBeUndefined();
      expect(res.data).toEqual({ node: { id } });
    } finally {
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

  it("a replica whose files never listed billing refuses B's * its name once another replica recorded it (at its start or at its next reload)", async () => {
    const database = await pg.createDatabase('removed_jwt_app_names');
    const replica = (prefix: string, aApps: string) => {
      const f = files(prefix, aApps, '"*"');
      return {
        DATABASE_URL: database,
        TOKEN_ENCRYPTION_KEY: 'b'.repeat(64),
        AUTH_ISSUERS: f.issuersFile,
        GATEWAY_APPS_FILE: f.appsFile,
      };
    };
    const without = replica('replica-b-', 'crm');
    // B starts first: billing is nobody's yet.
    const b = await startTestGateway(without);
    try {
      const a = await startTestGateway(replica('replica-a-', 'billing, crm'));
      try {
        const id = await registered(a, await sign(ka, { iss: A, claims: { azp: 'billing' } }));
        const partner = await sign(kb, { iss: B, claims: { azp: 'billing' } });
        // B's reload reads what A recorded, though B's own files never listed billing.
        expect(await reload(b)).toBe(200);
        await expectRefused(b, partner, id, LISTED_BEFORE);
        // A replica started now reads it at its start.
        const c = await startTestGateway(without);
        try {
          await expectRefused(c, partner, id, LISTED_BEFORE);
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
