// A reload swaps the configuration atomically (docs/operations.md, Reloading the configuration): one request sees the
// configuration before it or the one after, never a mix. A JWT's verification can wait (its identity provider's keys
// fetched); a reload that swaps meanwhile must not leave the request authenticated under the old apps and admitted
// under the new trusted documents.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';

import { gatewaysPerTest, tempDataDir } from '../helpers/gateway.js';
import { AUDIENCE, ISSUER, sign, signingKey, startJwksServer, testClock } from '../helpers/jwt.js';
import { waitFor } from '../helpers/wait.js';

const start = gatewaysPerTest();
const SRE_KEY = 'sre-key-0123456789abcdef';
const PORTAL_KEY = 'portal-key-0123456789abcdef';
const TYPENAME = 'query Typename { __typename }';
const OTHER = 'query Other { __typename }';

const digest = (text: string) => createHash('sha256').update(text).digest('hex');
const idOf = (document: string) => `sha256:${digest(document)}`;
const manifestOf = (documents: string[]) =>
  JSON.stringify(Object.fromEntries(documents.map((d) => [idOf(d), d])), null, 2);
/** The operator's app, and (`portal`) an app with keys named as the JWTs' azp: a JWT no longer takes that name. */
const appsFile = (portal: boolean) =>
  [
    'apps:',
    '  - name: sre',
    '    scopes: [operator, cloud:read]',
    '    keys:',
    `      - sha256: ${digest(SRE_KEY)}`,
    ...(portal
      ? ['  - name: portal', '    scopes: [cloud:read]', '    keys:', `      - sha256: ${digest(PORTAL_KEY)}`]
      : []),
    '',
  ].join('\n');

describe('a reload while a request over HTTP is being authenticated', () => {
  it('the request runs under the configuration before the reload or the one after, never the apps of one and the documents of the other', async () => {
    const first = await signingKey('idp-first');
    const rotated = await signingKey('idp-rotated');
    const jwks = await startJwksServer([first]);
    const clock = testClock();
    const dir = tempDataDir('reload-auth-');
    const apps = path.join(dir, 'apps.yaml');
    const manifest = path.join(dir, 'persisted-documents.json');
    fs.writeFileSync(apps, appsFile(false));
    fs.writeFileSync(manifest, manifestOf([TYPENAME]));
    const gw = await start(
      {
        GATEWAY_APPS_FILE: apps,
        AUTH_JWKS_URL: jwks.url,
        AUTH_ISSUER: ISSUER,
        AUTH_AUDIENCE: AUDIENCE,
        AUTH_APPS: '*',
        TRUSTED_DOCUMENTS: 'enforce',
        TRUSTED_DOCUMENTS_MANIFEST: manifest,
      },
      { testing: { clock: clock.now } },
    );
    const byId = async (token: string, document: string) => {
      const res = await request(`${gw.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({ documentId: idOf(document) }),
      });
      const body = (await res.body.json()) as { data?: unknown; errors?: { extensions?: { code?: string } }[] };
      return { status: res.statusCode, data: body.data ?? null, code: body.errors?.[0]?.extensions?.code ?? null };
    };
    const reload = async () =>
      (await request(`${gw.url}/admin/reload`, { method: 'POST', headers: { authorization: `Bearer ${SRE_KEY}` } }))
        .statusCode;

    try {
      const portal = { claims: { azp: 'portal' } };
      // Before the reload: a JWT app is answered so, and the manifest does not hold OTHER. Another app than portal: a
      // token of portal's would make it a name `*` accepted, which no reload may then give to a key app.
      const before = await byId(await sign(first, { claims: { azp: 'warm-up' } }), OTHER);
      expect(before).toMatchObject({ data: null, code: 'PERSISTED_QUERY_NOT_FOUND' });

      // A token of a rotated kid: its verification waits for the provider's held answer.
      clock.advance(5 * 60_000);
      jwks.keys.push(rotated);
      jwks.hold();
      const fetched = jwks.requests;
      const token = await sign(rotated, portal);
      const during = byId(token, OTHER);
      await waitFor(() => jwks.requests > fetched, 20_000, 'the verification to wait for the JWKS');

      // Meanwhile the files change: portal becomes an app with keys (a JWT no longer takes its name), and the manifest
      // holds OTHER.
      fs.writeFileSync(apps, appsFile(true));
      fs.writeFileSync(manifest, manifestOf([TYPENAME, OTHER]));
      expect(await reload()).toBe(200);
      jwks.release();
      const answered = await during;

      // After the reload: the same request is refused, its app's name taken by an app with keys.
      const after = await byId(token, OTHER);
      expect(after.data).toBeNull();
      expect(after.status).not.toBe(200);
      // Neither configuration runs OTHER for this token: the request in flight must not either.
      expect(answered.data).toBeNull();
      expect([before, after].map(({ status, code }) => ({ status, code }))).toContainEqual({
        status: answered.status,
        code: answered.code,
      });
    } finally {
      jwks.release();
      await jwks.stop();
    }
  });
});
