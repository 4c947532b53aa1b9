// What a JWT app accepted through AUTH_APPS `*` created is owned by its name (`app:<name>`): a key app configured
// later under that name would read it, and the JWT app would then be refused as a configured name. So `*` records each
// name it accepts before it serves it, and a key app of such a name stops the start and is refused by a reload
// (nothing changes), unless AUTH_APPS says they are one app (`<name>=<name>`), on SQLite and across PostgreSQL
// replicas (docs/apps-and-security.md).
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ConfigError } from '../../src/errors.js';
import { startTestGateway, tempDataDir, type TestGateway } from '../helpers/gateway.js';
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
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';

const PORTAL = 'portal-key-0123456789abcdef';
const SRE = 'sre-key-0123456789abcdef';
const CRM = 'crm-key-0123456789abcdef';
const REGISTER = `mutation { registerVerification(input: { workflowId: "wf-kyc", applicant: { lastName: "Petrova" } }) {
  verification { id }
} }`;
/** A store-only read of the verification (node), so that a restarted gateway's new sandbox does not matter. */
const READ = 'query($id: ID!) { node(id: $id) { id } }';
const TAKEN =
  /GATEWAY_APPS_FILE: the app portal \(GATEWAY_APPS_FILE\) configured with keys has the name of a JWT app an identity provider accepted through AUTH_APPS \* before.*portal=portal/;

const digest = (key: string) => createHash('sha256').update(key).digest('hex');
/** The apps file: the operator app sre, and the key app portal when `withPortal`. */
const apps = (withPortal: boolean) =>
  [
    'apps:',
    '  - name: sre',
    '    scopes: [operator]',
    `    keys: [{ sha256: ${digest(SRE)} }]`,
    ...(withPortal
      ? ['  - name: portal', '    scopes: [identity:read, identity:write]', `    keys: [{ sha256: ${digest(PORTAL)} }]`]
      : []),
    '',
  ].join('\n');

async function reload(t: TestGateway): Promise<{ status: number; body: { error_description?: string } }> {
  const res = await request(`${t.url}/admin/reload`, { method: 'POST', headers: { authorization: `Bearer ${SRE}` } });
  return { status: res.statusCode, body: (await res.body.json()) as { error_description?: string } };
}

/** Registers a verification with `credential` (a key or a JWT): its id. */
async function registered(t: TestGateway, credential: string): Promise<string> {
  const res = await t.graphql(REGISTER, {}, { key: credential });
  expect(res.errors).toBeUndefined();
  return res.data!.registerVerification.verification.id as string;
}

async function reads(t: TestGateway, credential: string, id: string): Promise<void> {
  const res = await t.graphql(READ, { id }, { key: credential });
  expect(res.errors).toBeUndefined();
  expect(res.data).toEqual({ node: { id } });
}

async function refused(t: TestGateway, credential: string, id: string, message: RegExp): Promise<void> {
  const res = await t.graphql(READ, { id }, { key: credential });
  expect(res.status).toBe(401);
  expect(res.data).toBeUndefined();
  expect(res.errors![0]!.message).toMatch(message);
}

/** The ConfigError a start of `start` stops with. */
async function startRefusal(start: () => Promise<TestGateway>): Promise<ConfigError> {
  const started = await start().then(
    async (t) => {
      await t.close();
      return null;
    },
    (err: unknown) => err,
  );
  expect(started).toBeInstanceOf(ConfigError);
  return started as ConfigError;
}

let key: SigningKey;
let jwks: JwksServer;
beforeAll(async () => {
  key = await signingKey('wildcard-1');
  jwks = await startJwksServer([key]);
});
afterAll(() => jwks?.stop());

describe('a JWT app accepted through AUTH_APPS *, then a key app of its name, on SQLite', () => {
  it('the reload that adds the key app is refused, a restart with it does not start, and portal=portal makes them one app', async () => {
    const dir = tempDataDir('wildcard-names-');
    const file = path.join(dir, 'apps.yaml');
    fs.writeFileSync(file, apps(false));
    const env = { DATA_DIR: dir, GATEWAY_APPS_FILE: file };
    const token = await sign(key, { claims: { azp: 'portal' } });

    const first = await startJwtGateway(jwks, env);
    let id: string;
    try {
      id = await registered(first, token);

      // (a) The reload is refused (422, naming the app and the way to make them one), and nothing changes: the key is
      // no app's, and the JWT app still reads what it created.
      fs.writeFileSync(file, apps(true));
      const answer = await reload(first);
      expect(answer.status).toBe(422);
      expect(answer.body.error_description).toMatch(TAKEN);
      expect(answer.body.error_description).not.toContain(PORTAL);
      await refused(first, PORTAL, id, /the API key is not valid/);
      await reads(first, token, id);
      expect(first.logs()).toMatch(/configuration reload refused/);
      expect(first.logs()).not.toContain(PORTAL);
    } finally {
      await first.close();
    }

    // (b) A restart with the key app configured does not start, and says why.
    const refusal = await startRefusal(() => startJwtGateway(jwks, env));
    expect(refusal.variable).toBe('GATEWAY_APPS_FILE');
    expect(refusal.message).toMatch(TAKEN);
    expect(refusal.message).not.toContain(PORTAL);

    // The JWT app still reads what it created after that refused start: nothing was recorded for the key app.
    fs.writeFileSync(file, apps(false));
    const again = await startJwtGateway(jwks, env);
    try {
      await reads(again, token, id);
    } finally {
      await again.close();
    }

    // (c) AUTH_APPS portal=portal says they are one app: the gateway starts, and each reads what the other created.
    fs.writeFileSync(file, apps(true));
    const merged = await startJwtGateway(jwks, { ...env, AUTH_APPS: 'portal=portal,*' });
    try {
      await reads(merged, PORTAL, id);
      await reads(merged, token, id);
      await reads(merged, token, await registered(merged, PORTAL));
    } finally {
      await merged.close();
    }
  });

  it('with portal=portal in AUTH_APPS the reload that adds the key app is accepted, and the entry removed later keeps the key app', async () => {
    const dir = tempDataDir('wildcard-names-merge-');
    const file = path.join(dir, 'apps.yaml');
    fs.writeFileSync(file, apps(false));
    const env = { DATA_DIR: dir, GATEWAY_APPS_FILE: file };
    const token = await sign(key, { claims: { azp: 'portal' } });
    // First under `*` alone, then with the entry, on the same database.
    const first = await startJwtGateway(jwks, env);
    const id = await registered(first, token);
    await first.close();
    const t = await startJwtGateway(jwks, { ...env, AUTH_APPS: 'portal=portal,*' });
    try {
      fs.writeFileSync(file, apps(true));
      expect((await reload(t)).status).toBe(200);
      await reads(t, PORTAL, id);
      await reads(t, token, id);
    } finally {
      await t.close();
    }
    // The operator said they are one app: the entry removed later (the app moved from JWTs to keys), the gateway starts,
    // the key app keeps what both created, and `*` no longer takes the name (it is a configured one).
    const after = await startJwtGateway(jwks, env);
    try {
      await reads(after, PORTAL, id);
      await refused(after, token, id, /configured|configur/);
    } finally {
      await after.close();
    }
  });
});

describe('replicas on PostgreSQL', () => {
  let pg: TestPostgres;
  beforeAll(async () => {
    pg = await startPostgres();
  }, 120_000);
  afterAll(() => pg?.stop());

  let shared: Record<string, string>;
  let a: TestGateway;
  beforeAll(async () => {
    shared = {
      DATABASE_URL: await pg.createDatabase('wildcard_app_names'),
      TOKEN_ENCRYPTION_KEY: 'c'.repeat(64),
      AUTH_JWKS_URL: jwks.url,
      AUTH_ISSUER: ISSUER,
      AUTH_AUDIENCE: AUDIENCE,
      AUTH_APPS: '*',
    };
    const without = path.join(tempDataDir('wildcard-replica-a-'), 'apps.yaml');
    fs.writeFileSync(without, apps(false));
    a = await startTestGateway({ ...shared, GATEWAY_APPS_FILE: without });
  }, 120_000);
  afterAll(() => a?.close());

  it("a replica configured with the key app portal does not start once another replica's * accepted portal", async () => {
    const withPortal = path.join(tempDataDir('wildcard-replica-b-'), 'apps.yaml');
    fs.writeFileSync(withPortal, apps(true));
    const token = await sign(key, { claims: { azp: 'portal' } });
    const id = await registered(a, token);
    const refusal = await startRefusal(() => startTestGateway({ ...shared, GATEWAY_APPS_FILE: withPortal }));
    expect(refusal.message).toMatch(TAKEN);
    await reads(a, token, id);
  }, 60_000);

  it('a replica that has not reloaded refuses * a name another replica configured since, and records nothing under it', async () => {
    // B configures the key app crm, never accepted by `*`; A read the configured names at its start, before.
    const crmFile = path.join(tempDataDir('wildcard-replica-c-'), 'apps.yaml');
    const crmApp = [
      '  - name: crm',
      '    scopes: [identity:read, identity:write]',
      `    keys: [{ sha256: ${digest(CRM)} }]`,
      '',
    ];
    fs.writeFileSync(crmFile, apps(false) + crmApp.join('\n'));
    const b = await startTestGateway({ ...shared, GATEWAY_APPS_FILE: crmFile });
    try {
      const id = await registered(b, CRM);
      await refused(
        a,
        await sign(key, { claims: { azp: 'crm' } }),
        id,
        /configured with API keys or listed by an identity provider on this gateway before/,
      );
      // Nothing was recorded as `*`'s: B's reload, which checks its key apps against those names, is accepted.
      expect((await reload(b)).status).toBe(200);
      await reads(b, CRM, id);
    } finally {
      await b.close();
    }
  }, 60_000);
});
