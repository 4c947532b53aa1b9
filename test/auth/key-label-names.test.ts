// A bare key of GATEWAY_API_KEYS is its own owner, named in metrics, logs and approvers' `approves` lists by its label
// (`key-` and 12 hex digits of a keyed digest). No configured or JWT app may take a name of that form: it would share
// the name, and with it whose plans an approver approves, with another owner. Refused at start-up for configured
// names, and as a JWT's app claim over real HTTP.
import fs from 'node:fs';
import path from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { loadConfig } from '../../src/config/index.js';
import { configRefusal, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import {
  sign,
  signingKey,
  startJwksServer,
  startJwtGateway,
  type JwksServer,
  type SigningKey,
} from '../helpers/jwt.js';

const BARE_KEY = 'bare-key-0123456789abcdef';
const LABEL_FORM = 'key-0123456789ab';

describe("a bare key's label is no app's name", () => {
  it('GATEWAY_API_KEYS and OPERATOR_API_KEYS refuse a name:key whose name has the form', () => {
    expect(configRefusal({ GATEWAY_API_KEYS: `${LABEL_FORM}:secret-0123456789` })).toMatch(
      /^GATEWAY_API_KEYS: the app name key-0123456789ab is refused: a bare key's label/,
    );
    expect(configRefusal({ GATEWAY_API_KEYS: BARE_KEY, OPERATOR_API_KEYS: `${LABEL_FORM}:secret-0123456789` })).toMatch(
      /^OPERATOR_API_KEYS: the app name key-0123456789ab is refused/,
    );
    // The message never holds the key.
    expect(configRefusal({ GATEWAY_API_KEYS: `${LABEL_FORM}:secret-0123456789` })).not.toContain('secret-0123456789');
    // Close to the form but not of it: accepted.
    for (const name of ['key-0123456789a', 'key-0123456789abc', 'key-0123456789AB', 'keys-0123456789ab'])
      expect(() => loadConfig({ GATEWAY_API_KEYS: `${name}:secret-0123456789` }), name).not.toThrow();
  });

  it('GATEWAY_APPS_FILE refuses an app of that name, naming the line; approves may still list a label', () => {
    const file = path.join(tempDataDir('key-label-'), 'apps.yaml');
    const digest = 'a'.repeat(64);
    fs.writeFileSync(
      file,
      `apps:\n  - name: ${LABEL_FORM}\n    scopes: [cloud:read]\n    keys: [{ sha256: ${digest} }]\n`,
    );
    expect(configRefusal({ GATEWAY_APPS_FILE: file })).toMatch(
      /apps\.yaml line 2: apps\.0\.name must not be of a bare key's label's form/,
    );
    fs.writeFileSync(
      file,
      `apps:\n  - name: finance\n    scopes: [cloud:approve]\n    approves: [${LABEL_FORM}]\n    keys: [{ sha256: ${digest} }]\n`,
    );
    expect(() => loadConfig({ GATEWAY_APPS_FILE: file, GATEWAY_API_KEYS: BARE_KEY })).not.toThrow();
  });

  it('AUTH_APPS refuses an entry naming it', () => {
    for (const entry of [LABEL_FORM, `client-1=${LABEL_FORM}`])
      expect(
        configRefusal({
          AUTH_JWKS_URL: 'https://idp.example/jwks',
          AUTH_ISSUER: 'https://idp.example',
          AUTH_AUDIENCE: 'gateway',
          AUTH_APPS: entry,
        }),
      ).toMatch(/^AUTH_APPS: entry 1: the app name key-0123456789ab is refused: a bare key's label/);
  });
});

describe("a JWT whose app claim has a bare key's label's form (AUTH_APPS=*)", () => {
  let key: SigningKey;
  let jwks: JwksServer;
  let t: TestGateway;

  beforeAll(async () => {
    key = await signingKey('key-1');
    jwks = await startJwksServer([key]);
    t = await startJwtGateway(jwks, { GATEWAY_API_KEYS: BARE_KEY });
  });
  afterAll(async () => {
    await t.close();
    await jwks.stop();
  });

  it('is refused, counted by reason, and another name is let in', async () => {
    const refused = await t.graphql('{ __typename }', undefined, {
      key: await sign(key, { claims: { azp: LABEL_FORM, scope: 'cloud:read' } }),
    });
    expect(refused.status).toBe(401);
    expect(refused.errors![0]!.extensions!.code).toBe('UNAUTHENTICATED');
    expect(refused.errors![0]!.message).toMatch(/^the JWT's azp claim is refused as an app name: a bare key's label/);
    const metrics = await (await request(`${t.url}/metrics`)).body.text();
    expect(metrics).toMatch(/^gateway_jwt_refusals_total\{reason="app_name"\} 1$/m);
    const other = await t.graphql('{ __typename }', undefined, {
      key: await sign(key, { claims: { azp: 'key-0123456789abc', scope: 'cloud:read' } }),
    });
    expect(other.status).toBe(200);
  });
});
