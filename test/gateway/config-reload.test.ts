// Configuration that reloads without a restart (docs/decisions/057): POST /admin/reload (and SIGHUP, which calls the
// same reload: test/gateway/config-reload-sighup.test.ts) reads GATEWAY_APPS_FILE, AUTH_JWKS_FILE, MOBILEID_JWKS_FILE
// and the trusted-documents manifest again, all or nothing. One real gateway; the files are rewritten between steps.
import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { createClient as createSseClient } from 'graphql-sse';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { request } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';

import { M } from '../helpers/cloud.js';
import { namedPipe } from '../helpers/fifo.js';
import { startTestGateway, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import {
  AUDIENCE,
  ISSUER,
  sign as signAs,
  signingKey,
  testClock,
  type SigningKey,
  type TokenOptions,
} from '../helpers/jwt.js';
import { mcpClient } from '../helpers/mcp.js';
import { collect, postNotification, QUERY, SUBSCRIPTION, wsClient } from '../helpers/mobile-id.js';
import { subscribers, waitFor } from '../helpers/wait.js';

const OLD_KEY = 'shop-key-old-0123456789abcdef';
const NEW_KEY = 'shop-key-new-0123456789abcdef';
const SRE_KEY = 'sre-key-0123456789abcdef';
const NOTIFY = 'operator-notification-token';
const MOBILE_ISSUER = 'https://mobileid.operator.example';
const MOBILE_CLIENT = 'sp-client-1';
const TYPENAME = 'query Typename { __typename }';
const PROJECTS = 'query Projects { projects(first: 1) { id } }';

/** A token of the JWT app `portal` (shop and sre are apps of the apps file, which a JWT does not take). */
const sign = (key: SigningKey, options: TokenOptions = {}) =>
  signAs(key, { ...options, claims: { azp: 'portal', ...options.claims } });
const digest = (key: string) => createHash('sha256').update(key).digest('hex');
const appsFile = (shopKeys: string[], shopScopes = 'cloud:read, cloud:write, mobile-id:read') =>
  [
    'apps:',
    '  - name: shop',
    `    scopes: [${shopScopes}]`,
    '    keys:',
    ...shopKeys.map((k) => `      - sha256: ${digest(k)}`),
    '  - name: sre',
    '    scopes: [operator, cloud:read]',
    '    keys:',
    `      - sha256: ${digest(SRE_KEY)}`,
    '',
  ].join('\n');
const manifestOf = (documents: string[]) =>
  JSON.stringify(
    Object.fromEntries(documents.map((d) => [`sha256:${createHash('sha256').update(d).digest('hex')}`, d])),
    null,
    2,
  );
const idOf = (document: string) => `sha256:${createHash('sha256').update(document).digest('hex')}`;

/** The mobile identity service's signing key and notifications signed with it. */
async function mobileOperator(kid: string) {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const jwks = { keys: [{ ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' }] };
  return {
    jwks,
    async notification(authReqId: string) {
      const accessToken = randomBytes(24).toString('base64url');
      const now = Math.floor(Date.now() / 1000);
      const idToken = await new SignJWT({
        iss: MOBILE_ISSUER,
        aud: MOBILE_CLIENT,
        sub: 'pcr-123',
        iat: now,
        exp: now + 300,
        at_hash: createHash('sha256').update(accessToken).digest().subarray(0, 16).toString('base64url'),
        'urn:openid:params:jwt:claim:auth_req_id': authReqId,
      })
        .setProtectedHeader({ alg: 'ES256', kid })
        .sign(privateKey);
      return {
        auth_req_id: authReqId,
        access_token: accessToken,
        token_type: 'Bearer',
        id_token: idToken,
        expires_in: 3600,
      };
    },
  };
}

async function reload(t: TestGateway, key = SRE_KEY) {
  const res = await request(`${t.url}/admin/reload`, {
    method: 'POST',
    headers: key ? { authorization: `Bearer ${key}` } : {},
  });
  return { status: res.statusCode, headers: res.headers, body: (await res.body.json()) as Record<string, any> };
}

async function reloadsCounted(t: TestGateway): Promise<{ ok: number; failed: number }> {
  const text = await (await request(`${t.url}/metrics`)).body.text();
  const count = (result: string) =>
    Number(new RegExp(`^gateway_config_reloads_total\\{result="${result}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
  return { ok: count('ok'), failed: count('failed') };
}

describe('configuration that reloads without a restart', () => {
  let dir: string;
  let files: { apps: string; jwks: string; mobileJwks: string; manifest: string };
  let jwtKey: SigningKey;
  let mobile: Awaited<ReturnType<typeof mobileOperator>>;
  let t: TestGateway;
  /** The gateway's variables (the files' paths among them): another gateway started on the same files. */
  let env: Record<string, string>;
  const jwks = (...keys: SigningKey[]) => JSON.stringify({ keys: keys.map((k) => k.publicJwk) }, null, 2);
  const status = async (key: string, query = TYPENAME) => (await t.graphql(query, undefined, { key })).status;

  /** The files as the gateway started with them. */
  const writeStartFiles = () => {
    fs.writeFileSync(files.apps, appsFile([OLD_KEY]));
    fs.writeFileSync(files.jwks, jwks(jwtKey));
    fs.writeFileSync(files.mobileJwks, JSON.stringify(mobile.jwks, null, 2));
    fs.writeFileSync(files.manifest, manifestOf([TYPENAME]));
  };

  beforeAll(async () => {
    dir = tempDataDir('reload-');
    files = {
      apps: path.join(dir, 'apps.yaml'),
      jwks: path.join(dir, 'jwks.json'),
      mobileJwks: path.join(dir, 'mobile-jwks.json'),
      manifest: path.join(dir, 'persisted-documents.json'),
    };
    jwtKey = await signingKey('idp-1');
    mobile = await mobileOperator('op-1');
    writeStartFiles();
    env = {
      GATEWAY_APPS_FILE: files.apps,
      AUTH_JWKS_FILE: files.jwks,
      AUTH_ISSUER: ISSUER,
      AUTH_AUDIENCE: AUDIENCE,
      AUTH_APPS: '*',
      SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
      MOBILEID_NOTIFICATION_TOKENS: `shop:${NOTIFY}`,
      MOBILEID_JWKS_FILE: files.mobileJwks,
      MOBILEID_ISSUER: MOBILE_ISSUER,
      MOBILEID_CLIENT_ID: MOBILE_CLIENT,
      TRUSTED_DOCUMENTS: 'allow',
      TRUSTED_DOCUMENTS_MANIFEST: files.manifest,
    };
    t = await startTestGateway(env);
  });
  afterAll(() => t.close());
  // Each test starts from the files the gateway started with, read again.
  beforeEach(async () => {
    writeStartFiles();
    expect((await reload(t)).status).toBe(200);
  });

  it('a key digest rotated in the apps file: after the reload the old key is refused and the new one admitted', async () => {
    expect(await status(OLD_KEY)).toBe(200);
    expect(await status(NEW_KEY)).toBe(401);
    fs.writeFileSync(files.apps, appsFile([NEW_KEY]));
    const res = await reload(t);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      reloaded: true,
      files: expect.arrayContaining([files.apps, files.jwks, files.mobileJwks, files.manifest]),
    });
    expect(await status(OLD_KEY)).toBe(401);
    expect(await status(NEW_KEY)).toBe(200);
    // The operator's list of apps is the reloaded one too.
    const apps = await t.graphql('{ apps { name keys } }', undefined, { key: SRE_KEY });
    expect(apps.errors).toBeUndefined();
    expect(apps.data!.apps).toEqual(expect.arrayContaining([{ name: 'shop', keys: 1 }]));
  });

  it('a key added to the apps file grants the scopes the file gives it, from the reload on', async () => {
    fs.writeFileSync(
      files.apps,
      appsFile([OLD_KEY, NEW_KEY]).replace('scopes: [operator, cloud:read]', 'scopes: [operator]'),
    );
    expect((await reload(t)).status).toBe(200);
    expect(await status(OLD_KEY)).toBe(200);
    expect(await status(NEW_KEY)).toBe(200);
    // sre lost cloud:read: its read of the projects is refused now.
    const res = await t.graphql(PROJECTS, undefined, { key: SRE_KEY });
    expect(res.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
  });

  it('a rotated AUTH_JWKS_FILE: after the reload a token of the new key is admitted and one of the removed key refused', async () => {
    const next = await signingKey('idp-2');
    const before = await sign(jwtKey);
    expect(await status(before)).toBe(200);
    expect(await status(await sign(next))).toBe(401);
    fs.writeFileSync(files.jwks, jwks(next));
    expect((await reload(t)).status).toBe(200);
    expect(await status(await sign(next))).toBe(200);
    // Even the token verified (and cached) before the reload: its key is gone.
    expect(await status(before)).toBe(401);
  });

  it('a new trusted-documents manifest: after the reload its new document runs by id and a removed one is not found', async () => {
    const byId = async (document: string) => {
      const res = await request(`${t.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${OLD_KEY}` },
        body: JSON.stringify({ documentId: idOf(document) }),
      });
      return (await res.body.json()) as { data?: unknown; errors?: { extensions: { code: string } }[] };
    };
    expect((await byId(TYPENAME)).data).toEqual({ __typename: 'Query' });
    expect((await byId(PROJECTS)).errors?.[0]?.extensions.code).toBe('PERSISTED_QUERY_NOT_FOUND');
    fs.writeFileSync(files.manifest, manifestOf([PROJECTS]));
    expect((await reload(t)).status).toBe(200);
    expect((await byId(PROJECTS)).data).toEqual({ projects: expect.any(Array) });
    expect((await byId(TYPENAME)).errors?.[0]?.extensions.code).toBe('PERSISTED_QUERY_NOT_FOUND');
  });

  describe('a large trusted-documents manifest: a reload parses and validates only its new and changed documents', () => {
    // Fifty documents, each its own text, keyed by its sha256 as the client preset keys them; one by a name (an id
    // that is no hash), so that its text can change under the same id.
    const DOCUMENTS = Array.from({ length: 50 }, (_, i) => `query Projects${i} { projects(first: ${i + 1}) { id } }`);
    const NAMED = 'query Named { projects(first: 1) { name } }';
    const write = (documents: string[], named: string | null = NAMED) =>
      fs.writeFileSync(
        files.manifest,
        JSON.stringify(
          { ...Object.fromEntries(documents.map((d) => [idOf(d), d])), ...(named === null ? {} : { Named: named }) },
          null,
          2,
        ),
      );
    const byId = async (documentId: string, g = t) => {
      const res = await request(`${g.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${OLD_KEY}` },
        body: JSON.stringify({ documentId }),
      });
      const body = (await res.body.json()) as { data?: unknown; errors?: { extensions: { code: string } }[] };
      return body.errors?.[0]?.extensions.code ?? (body.data ? 'ran' : 'nothing');
    };
    const byHash = async (text: string, g = t) => {
      const sha256Hash = createHash('sha256').update(text).digest('hex');
      const res = await request(`${g.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${OLD_KEY}` },
        body: JSON.stringify({ extensions: { persistedQuery: { version: 1, sha256Hash } } }),
      });
      const body = (await res.body.json()) as { data?: unknown; errors?: { extensions: { code: string } }[] };
      return body.errors?.[0]?.extensions.code ?? (body.data ? 'ran' : 'nothing');
    };
    /** The trusted documents of the last reload's log line: how many, and how many were parsed and validated. */
    const lastReload = (g = t) =>
      g
        .logs()
        .split('\n')
        .filter((l) => l.includes('configuration reloaded'))
        .map((l) => JSON.parse(l) as { trustedDocuments?: { documents: number; prepared: number } })
        .at(-1)?.trustedDocuments;

    beforeEach(async () => {
      write(DOCUMENTS);
      expect((await reload(t)).status).toBe(200);
      expect(lastReload()).toEqual({ documents: 51, prepared: 51 });
    });

    it('an unchanged manifest is not parsed or validated again, and its documents still run', async () => {
      expect((await reload(t)).status).toBe(200);
      expect(lastReload()).toEqual({ documents: 51, prepared: 0 });
      expect((await reload(t)).status).toBe(200);
      expect(lastReload()).toEqual({ documents: 51, prepared: 0 });
      expect(await byId(idOf(DOCUMENTS[7]!))).toBe('ran');
      expect(await byId('Named')).toBe('ran');
    });

    it('a changed document and an added one are the two prepared; each runs its new text', async () => {
      const added = 'query Added { projects(first: 2) { createdAt } }';
      const changed = 'query Named { projects(first: 1) { description } }';
      write([...DOCUMENTS, added], changed);
      expect((await reload(t)).status).toBe(200);
      expect(lastReload()).toEqual({ documents: 52, prepared: 2 });
      expect(await byId(idOf(added))).toBe('ran');
      expect(await byId('Named')).toBe('ran');
      // The manifest knows Named's new text by its sha256 (Apollo's persisted query), and its old text no more.
      expect(await byHash(changed)).toBe('ran');
      expect(await byHash(NAMED)).toBe('PERSISTED_QUERY_NOT_FOUND');
    });

    it('TRUSTED_DOCUMENTS_RELOAD_REUSE=false checks every document again, and admits exactly what reuse admits', async () => {
      const plain = await startTestGateway({ ...env, TRUSTED_DOCUMENTS_RELOAD_REUSE: 'false' });
      try {
        const added = 'query Added { projects(first: 2) { createdAt } }';
        const changed = 'query Named { projects(first: 1) { description } }';
        write([...DOCUMENTS.slice(1), added], changed);
        expect((await reload(t)).status).toBe(200);
        expect((await reload(plain)).status).toBe(200);
        expect(lastReload()).toEqual({ documents: 51, prepared: 2 });
        expect(lastReload(plain)).toEqual({ documents: 51, prepared: 51 });
        const ids = [...DOCUMENTS, added].map(idOf).concat('Named');
        const admitted = async (g: TestGateway) => Promise.all(ids.map((id) => byId(id, g)));
        const byText = async (g: TestGateway) => Promise.all([changed, NAMED].map((text) => byHash(text, g)));
        expect(await admitted(plain)).toEqual(await admitted(t));
        expect(await byText(plain)).toEqual(await byText(t));
        expect(await byId(idOf(DOCUMENTS[0]!), plain)).toBe('PERSISTED_QUERY_NOT_FOUND');
      } finally {
        await plain.close();
      }
    });

    it('a removed document is no longer admitted; the others are kept unparsed', async () => {
      write(DOCUMENTS.slice(1), null);
      expect((await reload(t)).status).toBe(200);
      expect(lastReload()).toEqual({ documents: 49, prepared: 0 });
      expect(await byId(idOf(DOCUMENTS[0]!))).toBe('PERSISTED_QUERY_NOT_FOUND');
      expect(await byId('Named')).toBe('PERSISTED_QUERY_NOT_FOUND');
      expect(await byId(idOf(DOCUMENTS[1]!))).toBe('ran');
    });

    it.each([
      ['a new document that is not valid', () => ({ Bad: 'query Bad { projects { nosuchfield } }' }), 'not valid'],
      // The text of a running document under the hash of another: refused as ever, reused text or not.
      ['an id that is not the sha256 of its text', () => ({ [idOf(DOCUMENTS[1]!)]: DOCUMENTS[0]! }), 'not the sha256'],
    ])(
      '%s fails the reload (422, file and line) and the running documents stay admitted',
      async (_name, entry, said) => {
        const documents = DOCUMENTS.filter((_d, i) => i !== 1);
        fs.writeFileSync(
          files.manifest,
          JSON.stringify({ ...Object.fromEntries(documents.map((d) => [idOf(d), d])), ...entry() }, null, 2),
        );
        const res = await reload(t);
        expect(res.status).toBe(422);
        expect(res.body).toMatchObject({ variable: 'TRUSTED_DOCUMENTS_MANIFEST', file: files.manifest, line: 51 });
        expect(res.body.error_description).toContain(said);
        expect(await byId(idOf(DOCUMENTS[1]!))).toBe('ran');
        expect(await byId('Named')).toBe('ran');
        // The next good reload reuses what runs: the failed one swapped nothing in.
        write(DOCUMENTS);
        expect((await reload(t)).status).toBe(200);
        expect(lastReload()).toEqual({ documents: 51, prepared: 0 });
      },
    );
  });

  it('a rotated MOBILEID_JWKS_FILE: after the reload an id_token signed by the new key verifies', async () => {
    const next = await mobileOperator('op-2');
    expect((await postNotification(t, await next.notification('rotated-before'), { token: NOTIFY })).status).not.toBe(
      204,
    );
    fs.writeFileSync(files.mobileJwks, JSON.stringify(next.jwks));
    expect((await reload(t)).status).toBe(200);
    expect((await postNotification(t, await next.notification('rotated-after'), { token: NOTIFY })).status).toBe(204);
    const read = await t.graphql(QUERY, { id: 'rotated-after' }, { key: OLD_KEY });
    expect(read.data!.mobileIdAuthentication).toMatchObject({ idTokenVerified: true, subject: 'pcr-123' });
  });

  it('JSON files that begin with a byte-order mark (as Windows editors write them) reload as they read', async () => {
    const BOM = '\ufeff';
    const next = await signingKey('idp-bom');
    const operator = await mobileOperator('op-bom');
    fs.writeFileSync(files.jwks, BOM + jwks(next));
    fs.writeFileSync(files.mobileJwks, BOM + JSON.stringify(operator.jwks));
    fs.writeFileSync(files.manifest, BOM + manifestOf([PROJECTS]));
    const res = await reload(t);
    expect(res.body).toMatchObject({ reloaded: true });
    expect(await status(await sign(next))).toBe(200);
    expect((await postNotification(t, await operator.notification('bom-after'), { token: NOTIFY })).status).toBe(204);
    const byId = await request(`${t.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${OLD_KEY}` },
      body: JSON.stringify({ documentId: idOf(PROJECTS) }),
    });
    expect(await byId.body.json()).toEqual({ data: { projects: expect.any(Array) } });
  });

  /** A JWKS whose one key is `jwk`, and the line of its member `at` (or of the key, which begins on line 3). */
  const jwksWith = (jwk: Record<string, unknown>, at?: string) => {
    const text = JSON.stringify({ keys: [jwk] }, null, 2);
    return { text, line: at ? text.split('\n').findIndex((l) => l.trimStart().startsWith(`"${at}"`)) + 1 : 3 };
  };
  const keyFiles: Array<[string, string, () => Promise<{ text: string; line: number; secret: string | null }>]> = [
    [
      'a private key',
      'AUTH_JWKS_FILE',
      async () => {
        const { privateKey } = await generateKeyPair('ES256', { extractable: true });
        const jwk = { ...(await exportJWK(privateKey)), kid: 'idp-private', alg: 'ES256' };
        return { ...jwksWith(jwk, 'd'), secret: jwk.d! };
      },
    ],
    [
      'a symmetric key',
      'MOBILEID_JWKS_FILE',
      async () => {
        const k = randomBytes(32).toString('base64url');
        return { ...jwksWith({ kty: 'oct', kid: 'op-hmac', k }), secret: k };
      },
    ],
    [
      'an RSA key too small to verify with',
      'AUTH_JWKS_FILE',
      async () => {
        const { publicKey } = generateKeyPairSync('rsa', { modulusLength: 1024 });
        return { ...jwksWith({ ...publicKey.export({ format: 'jwk' }), kid: 'idp-small' }), secret: null };
      },
    ],
    [
      'two keys of one kid, either of which a token of that kid would match',
      'MOBILEID_JWKS_FILE',
      async () => {
        const keys = await Promise.all(
          [1, 2].map(async () => {
            const { publicKey } = await generateKeyPair('ES256', { extractable: true });
            return { ...(await exportJWK(publicKey)), kid: 'op-rotated', alg: 'ES256' };
          }),
        );
        const text = JSON.stringify({ keys }, null, 2);
        const lines = text.split('\n');
        const line = lines.findIndex((l, i) => l.includes('"kid"') && i > lines.findIndex((m) => m.includes('"kid"')));
        return { text, line: line + 1, secret: null };
      },
    ],
    [
      'a key that is not one',
      'MOBILEID_JWKS_FILE',
      async () => ({ ...jwksWith({ kty: 'EC', kid: 'op-broken', crv: 'P-256' }), secret: null }),
    ],
  ];
  it.each(keyFiles)(
    'a JWKS file holding %s is refused by the reload naming %s and the line, and never echoes the key',
    async (what, variable, make) => {
      const { text, line, secret } = await make();
      const file = variable === 'AUTH_JWKS_FILE' ? files.jwks : files.mobileJwks;
      fs.writeFileSync(file, text);
      const res = await reload(t);
      expect(res.status).toBe(422);
      expect(res.body).toMatchObject({ error: 'reload_failed', variable, file, line });
      if (secret !== null) {
        expect(JSON.stringify(res.body)).not.toContain(secret);
        expect(t.logs()).not.toContain(secret);
      }
      // The running keys are the ones before.
      expect(await status(await sign(jwtKey))).toBe(200);
      expect(
        (await postNotification(t, await mobile.notification(`kept-${what.replace(/\W/g, '-')}`), { token: NOTIFY }))
          .status,
      ).toBe(204);
    },
  );

  it('an emptied apps file is refused as empty, and the running apps are kept', async () => {
    fs.writeFileSync(files.apps, '# emptied by mistake\n');
    const res = await reload(t);
    expect(res.body).toMatchObject({
      error: 'reload_failed',
      variable: 'GATEWAY_APPS_FILE',
      file: files.apps,
      line: 1,
    });
    expect(res.body.error_description).toContain(`${files.apps} line 1: the file is empty (or holds only comments)`);
    expect(await status(OLD_KEY)).toBe(200);
  });

  // Parsed, YAML takes about 75 times its text in memory: a 24 MB file ran the gateway out of heap and ended it. Read
  // whole before its size was checked, a file far past any real one (the wrong path, a dump) was held in memory twice
  // over by the reload meant to change nothing, and past ~512 MiB refused as "cannot be read: ERR_STRING_TOO_LONG".
  it.each([
    [
      'over 1 MiB is refused before it is parsed',
      () => fs.writeFileSync(files.apps, appsFile([NEW_KEY]) + `# ${'x'.repeat(98)}\n`.repeat(11_000)),
    ],
    [
      'far past any real one (1 GiB) is refused unread',
      () => {
        // Sparse: the good file, then zeros that take no room on disk.
        fs.writeFileSync(files.apps, appsFile([NEW_KEY]));
        fs.truncateSync(files.apps, 1024 ** 3);
      },
    ],
  ])('an apps file %s, with the words of the bound, and the running apps are kept', async (_name, write) => {
    write();
    const counted = await reloadsCounted(t);
    const res = await reload(t);
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({
      error: 'reload_failed',
      variable: 'GATEWAY_APPS_FILE',
      file: files.apps,
      line: 1,
    });
    expect(res.body.error_description).toContain(`${files.apps} line 1: the file is larger than 1 MiB`);
    expect(await reloadsCounted(t)).toEqual({ ok: counted.ok, failed: counted.failed + 1 });
    expect(await status(OLD_KEY)).toBe(200);
    expect(await status(NEW_KEY)).toBe(401);
  });

  // Far past any real file (a JWKS is a few KB, 20,000 documents make a manifest of ~9 MiB), valid JSON all the same:
  // the good file padded with whitespace, which the reload without a bound would have parsed and applied.
  const oversized: Array<[string, () => string, () => string, string, number]> = [
    ['AUTH_JWKS_FILE', () => files.jwks, () => jwks(jwtKey), '1 MiB', 1024 * 1024],
    ['MOBILEID_JWKS_FILE', () => files.mobileJwks, () => JSON.stringify(mobile.jwks), '1 MiB', 1024 * 1024],
    ['TRUSTED_DOCUMENTS_MANIFEST', () => files.manifest, () => manifestOf([PROJECTS]), '32 MiB', 32 * 1024 * 1024],
  ];
  it.each(oversized)(
    'a %s over its bound is refused before it is parsed, and the running configuration is kept',
    async (variable, file, good, bound, bytes) => {
      const text = good();
      fs.writeFileSync(file(), text + ' '.repeat(bytes + 1 - Buffer.byteLength(text)));
      const counted = await reloadsCounted(t);
      const res = await reload(t);
      expect(res.status).toBe(422);
      expect(res.body).toMatchObject({ error: 'reload_failed', variable, file: file(), line: 1 });
      expect(res.body.error_description).toContain(
        `${file()} line 1: the file is larger than ${bound} (${bytes} bytes)`,
      );
      expect(await reloadsCounted(t)).toEqual({ ok: counted.ok, failed: counted.failed + 1 });
      // The running manifest is the one before; at the bound exactly the file is read.
      const byId = (document: string) =>
        request(`${t.url}/graphql`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${OLD_KEY}` },
          body: JSON.stringify({ documentId: idOf(document) }),
        }).then((r) => r.body.json());
      expect(await byId(TYPENAME)).toEqual({ data: { __typename: 'Query' } });
      fs.writeFileSync(file(), text + ' '.repeat(bytes - Buffer.byteLength(text)));
      expect((await reload(t)).status).toBe(200);
    },
  );

  /** Good changes to the apps, JWKS and manifest files (a new key, a JWT key `kid`, another document): that key. */
  const writeGoodChanges = async (kid: string): Promise<SigningKey> => {
    const next = await signingKey(kid);
    fs.writeFileSync(files.apps, appsFile([NEW_KEY]));
    fs.writeFileSync(files.jwks, jwks(next));
    fs.writeFileSync(files.manifest, manifestOf([PROJECTS]));
    return next;
  };

  /** The configuration running is the one before `writeGoodChanges`: the old key, the old JWT key, the old manifest. */
  const expectRunningAsBefore = async (next: SigningKey): Promise<void> => {
    expect(await status(OLD_KEY)).toBe(200);
    expect(await status(NEW_KEY)).toBe(401);
    expect(await status(await sign(jwtKey))).toBe(200);
    expect(await status(await sign(next))).toBe(401);
    const byId = await request(`${t.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${OLD_KEY}` },
      body: JSON.stringify({ documentId: idOf(TYPENAME) }),
    });
    expect(await byId.body.json()).toEqual({ data: { __typename: 'Query' } });
  };

  // Read as a file, a named pipe held the reload, and the event loop with it, until a writer came and went (the pipe's
  // writer here comes at once and writes nothing, so the old reading said the file was empty); a folder was said as
  // "cannot be read (EISDIR)". Each is refused unread, the good changes to the other files applied neither.
  const swapped: Array<[string, () => string]> = [
    ['GATEWAY_APPS_FILE', () => files.apps],
    ['AUTH_JWKS_FILE', () => files.jwks],
    ['MOBILEID_JWKS_FILE', () => files.mobileJwks],
    ['TRUSTED_DOCUMENTS_MANIFEST', () => files.manifest],
  ];
  it.each(
    swapped.flatMap(([variable, file]) =>
      (['a named pipe', 'a folder'] as const).map((kind) => [variable, kind, file] as const),
    ),
  )(
    '%s replaced by %s: the reload is refused at once, naming the variable and the path, and nothing changes',
    async (variable, kind, file) => {
      const next = await writeGoodChanges('idp-4');
      fs.rmSync(file());
      const pipe = kind === 'a named pipe' ? namedPipe(file()) : null;
      if (!pipe) fs.mkdirSync(file());
      try {
        const counted = await reloadsCounted(t);
        const res = await reload(t);
        expect(res.status).toBe(422);
        expect(res.body).toMatchObject({ error: 'reload_failed', variable, file: file(), line: null });
        expect(res.body.error_description).toContain(`${file()}: is not a file (a folder, a pipe or a device)`);
        expect(await reloadsCounted(t)).toEqual({ ok: counted.ok, failed: counted.failed + 1 });
        await expectRunningAsBefore(next);
      } finally {
        if (pipe) pipe.remove();
        else fs.rmSync(file(), { recursive: true });
      }
    },
  );

  it.each([
    [
      'whose text is one string (a path pasted in)',
      '/etc/gateway/apps.yaml\n',
      1,
      'the file is a string where an object is expected',
    ],
    [
      'whose scopes are one string',
      `apps:\n  - name: shop\n    scopes: cloud:read\n    keys: [{ sha256: ${digest(NEW_KEY)} }]\n`,
      3,
      'apps.0.scopes is a string where an array is expected',
    ],
  ] as const)('an apps file %s is refused in words, and the running apps are kept', async (_name, text, line, said) => {
    fs.writeFileSync(files.apps, text);
    const res = await reload(t);
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: 'reload_failed', variable: 'GATEWAY_APPS_FILE', file: files.apps, line });
    expect(res.body.error_description).toContain(`${files.apps} line ${line}: ${said} (the running configuration`);
    expect(await status(OLD_KEY)).toBe(200);
  });

  const broken: Array<[string, () => string, string, number]> = [
    ['GATEWAY_APPS_FILE', () => files.apps, 'apps:\n  - name: shop\n    scopes: [cloud:read\n', 4],
    [
      'GATEWAY_APPS_FILE',
      () => files.apps,
      `apps:\n  - name: shop\n    scopes: [cloud:teleport]\n    keys:\n      - sha256: ${digest(NEW_KEY)}\n`,
      3,
    ],
    ['AUTH_JWKS_FILE', () => files.jwks, '{\n  "keys": [\n    { "kty": "EC" },\n  ]\n}\n', 4],
    ['MOBILEID_JWKS_FILE', () => files.mobileJwks, '{\n  "keys": [\n    "not a key"\n  ]\n}\n', 3],
    ['TRUSTED_DOCUMENTS_MANIFEST', () => files.manifest, '{\n  "a": "query { __typename }",\n  "b": "query {"\n}\n', 3],
    // JSON.parse would keep the second of two members of one name: the id would run what the reader does not see.
    [
      'TRUSTED_DOCUMENTS_MANIFEST',
      () => files.manifest,
      `{\n  "Typename": ${JSON.stringify(TYPENAME)},\n  "Projects": ${JSON.stringify(PROJECTS)},\n  "Projects": ${JSON.stringify(TYPENAME)}\n}\n`,
      4,
    ],
    ['AUTH_JWKS_FILE', () => files.jwks, '{\n  "keys": [],\n  "keys": []\n}\n', 3],
    // Deeper than the scanner's stack: a RangeError named no variable and no file.
    ['MOBILEID_JWKS_FILE', () => files.mobileJwks, `{\n  "keys":\n${'['.repeat(20_000)}${']'.repeat(20_000)}\n}\n`, 3],
  ];
  it.each(broken)(
    'a broken %s changes nothing: the reload answers 422 with the file and line, logs them, and counts the failure',
    async (variable, file, text, line) => {
      // Good changes to every other file, which must not be applied either.
      const next = await writeGoodChanges('idp-3');
      fs.writeFileSync(file(), text);
      const counted = await reloadsCounted(t);

      const res = await reload(t);
      expect(res.status).toBe(422);
      expect(res.body).toMatchObject({ error: 'reload_failed', variable, file: file(), line });
      expect(res.body.error_description).toContain(`${file()} line ${line}`);
      expect(await reloadsCounted(t)).toEqual({ ok: counted.ok, failed: counted.failed + 1 });
      const logged = t
        .logs()
        .split('\n')
        .filter((l) => l.includes('configuration reload refused'))
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .at(-1);
      expect(logged).toMatchObject({ level: 50, trigger: 'POST /admin/reload', variable, file: file(), line });

      // The running configuration is the one before: the old key, the old JWT key, the old manifest.
      await expectRunningAsBefore(next);
      expect(
        (
          await postNotification(t, await mobile.notification(`still-${variable}-${line}-${text.length}`), {
            token: NOTIFY,
          })
        ).status,
      ).toBe(204);
    },
  );

  it('POST /admin/reload refuses an app without the operator scope (403) and a caller without valid credentials (401), and reloads nothing', async () => {
    fs.writeFileSync(files.apps, appsFile([NEW_KEY]));
    const counted = await reloadsCounted(t);
    const app = await reload(t, OLD_KEY);
    expect(app.status).toBe(403);
    expect(app.body.error).toBe('insufficient_scope');
    expect(app.headers['www-authenticate']).toMatch(/insufficient_scope/);
    // A JWT app without the operator scope (none is in AUTH_OPERATOR_APPS) is refused the same way.
    expect((await reload(t, await sign(jwtKey, { claims: { scope: 'operator cloud:read' } }))).status).toBe(403);
    expect((await reload(t, '')).status).toBe(401);
    expect((await reload(t, 'not-a-key')).status).toBe(401);
    expect(await reloadsCounted(t)).toEqual(counted);
    expect(await status(OLD_KEY)).toBe(200);
    expect(await status(NEW_KEY)).toBe(401);
  });

  it('a creation in flight when a reload removes its key finishes under the configuration it started with, as its app', async () => {
    // The cloud upstream holds the creation's call: it is past authentication, in flight, by construction.
    const held = t.gateway.sandbox.cloud!.faults.hold();
    const inFlight = t.graphql(M.project, { input: { name: 'in-flight' } }, { key: OLD_KEY });
    try {
      await expect.poll(() => held.arrived(), { timeout: 20_000 }).toBeGreaterThan(0);
      fs.writeFileSync(files.apps, appsFile([NEW_KEY]));
      expect((await reload(t)).status).toBe(200);
      expect(await status(OLD_KEY)).toBe(401);
    } finally {
      held.release();
    }
    const res = await inFlight;
    expect(res.errors).toBeUndefined();
    const id = res.data!.createProject.project.id as string;
    // Created as the app shop, whose new key reads it.
    const read = await t.graphql('query($id: ID!) { project(id: $id) { name } }', { id }, { key: NEW_KEY });
    expect(read.data).toEqual({ project: { name: 'in-flight' } });
  });

  it('a WebSocket connection whose key a reload removed is closed 4403, its subscription with it, and a creation with the key sends nothing; a kept key keeps running', async () => {
    fs.writeFileSync(files.apps, appsFile([OLD_KEY, NEW_KEY]));
    expect((await reload(t)).status).toBe(200);
    const removed = wsClient(t, { key: OLD_KEY });
    const kept = wsClient(t, { key: NEW_KEY });
    try {
      const run = (client: typeof removed, query = TYPENAME) =>
        new Promise<any>((resolve, reject) => {
          let result: unknown;
          client.subscribe({ query }, { next: (v) => (result = v), error: reject, complete: () => resolve(result) });
        });
      const ended = (client: typeof removed) => {
        let closed: { code?: number; reason?: string } | undefined;
        client.subscribe(
          { query: SUBSCRIPTION, variables: { id: `held-open-${Math.random()}` } },
          { next: () => {}, error: (e) => (closed = e as typeof closed), complete: () => {} },
        );
        return () => closed;
      };
      const removedEnd = ended(removed);
      const keptEnd = ended(kept);
      expect(await run(removed)).toEqual({ data: { __typename: 'Query' } });
      expect(await run(kept)).toEqual({ data: { __typename: 'Query' } });
      fs.writeFileSync(files.apps, appsFile([NEW_KEY]));
      expect((await reload(t)).status).toBe(200);
      // The removed key's connection ends: 4403, naming the reload; the kept key's goes on.
      const closed = await waitFor(() => removedEnd(), 20_000, "the removed key's connection to close");
      expect(closed.code).toBe(4403);
      expect(closed.reason).toMatch(/configuration was reloaded/);
      expect(await run(kept)).toEqual({ data: { __typename: 'Query' } });
      expect(keptEnd()).toBeUndefined();
      // A creation with the removed key, on a new connection, is refused and sends nothing.
      const projectsBefore = t.gateway.sandbox.cloud!.projects().length;
      const again = wsClient(t, { key: OLD_KEY });
      try {
        await expect(
          run(
            again,
            'mutation { createProject(input: { name: "after-removal", description: "" }) { project { id } } }',
          ),
        ).rejects.toMatchObject({ code: 4403 });
      } finally {
        await again.dispose();
      }
      expect(t.gateway.sandbox.cloud!.projects().length).toBe(projectsBefore);
    } finally {
      await removed.dispose();
      await kept.dispose();
    }
  });

  for (const singleConnection of [false, true]) {
    it(`an SSE subscription whose key a reload removed ends with a last result naming the reload and gets no later event; a kept key's keeps receiving (${singleConnection ? 'single-connection' : 'distinct-connections'} mode)`, async () => {
      fs.writeFileSync(files.apps, appsFile([OLD_KEY, NEW_KEY]));
      expect((await reload(t)).status).toBe(200);
      const sse = (key: string) =>
        createSseClient({
          url: `${t.url}/graphql/stream`,
          singleConnection,
          retryAttempts: 0,
          headers: { authorization: `Bearer ${key}` },
        });
      const removedClient = sse(OLD_KEY);
      const keptClient = sse(NEW_KEY);
      const removedId = `sse-removed-${Math.random()}`;
      const keptId = `sse-kept-${Math.random()}`;
      const removed = collect(removedClient, SUBSCRIPTION, { id: removedId });
      const kept = collect(keptClient, SUBSCRIPTION, { id: keptId });
      try {
        await waitFor(
          () => subscribers(t, 'mobile-id', removedId) === 1 && subscribers(t, 'mobile-id', keptId) === 1,
          20_000,
          'both subscriptions listening',
        );
        fs.writeFileSync(files.apps, appsFile([NEW_KEY]));
        expect((await reload(t)).status).toBe(200);
        // The removed key's subscription ends: its last result says why, then `complete`.
        await waitFor(
          () => removed.completed() || removed.errors.length > 0,
          20_000,
          "the removed key's subscription to end",
        );
        expect(removed.errors).toEqual([]);
        expect(removed.completed()).toBe(true);
        expect(removed.results).toEqual([
          {
            errors: [
              {
                message: expect.stringMatching(/\(the configuration was reloaded\): the subscription has ended/),
                extensions: { code: 'UNAUTHENTICATED' },
              },
            ],
          },
        ]);
        await waitFor(() => subscribers(t, 'mobile-id', removedId) === 0, 20_000, 'the removed subscription to leave');
        // A result for each after the reload: only the kept key's subscription receives one.
        const notify = async (id: string) =>
          expect((await postNotification(t, await mobile.notification(id), { token: NOTIFY })).status).toBe(204);
        await notify(removedId);
        await notify(keptId);
        await waitFor(() => kept.results.length > 0, 20_000, "the kept key's result");
        expect(kept.results[0].data.mobileIdAuthentication).toMatchObject({ idTokenVerified: true });
        expect(kept.errors).toEqual([]);
        expect(removed.results).toHaveLength(1);
      } finally {
        removed.stop();
        kept.stop();
        removedClient.dispose();
        keptClient.dispose();
      }
    });
  }

  /** The last result of a subscription whose app a reload took `mobile-id:read` from. */
  const forbiddenNow = {
    message: expect.stringMatching(/needs the scope mobile-id:read.*the configuration was reloaded/),
    extensions: { code: 'FORBIDDEN', field: 'Subscription.mobileIdAuthentication', scope: 'mobile-id:read' },
  };
  /** Ticks often enough to see the subscription that keeps running receive after the reload. */
  const TICKING = 'subscription { heartbeat(intervalMs: 10, count: 1000) }';

  /**
   * The three ways a subscription runs: graphql-ws, where an `error` message ends that operation alone (the client's
   * sink gets its errors); SSE in either mode, where the subscription gets a last result, then `complete`.
   */
  const SCOPED_TRANSPORTS = [
    { name: 'its WebSocket connection, with FORBIDDEN', transport: 'ws' },
    {
      name: 'SSE, with a last FORBIDDEN result (distinct-connections mode)',
      transport: 'sse',
      singleConnection: false,
    },
    { name: 'SSE, with a last FORBIDDEN result (single-connection mode)', transport: 'sse', singleConnection: true },
  ] as const;

  for (const mode of SCOPED_TRANSPORTS) {
    it(`a reload that takes a scope from an app ends only the subscription that needs it, over ${mode.name}; the other keeps receiving`, async () => {
      const client =
        mode.transport === 'ws'
          ? wsClient(t, { key: OLD_KEY })
          : createSseClient({
              url: `${t.url}/graphql/stream`,
              singleConnection: mode.singleConnection,
              retryAttempts: 0,
              headers: { authorization: `Bearer ${OLD_KEY}` },
            });
      const id = `${mode.transport}-scoped-${Math.random()}`;
      const scoped = collect(client, SUBSCRIPTION, { id });
      const ticking = collect(client, TICKING, {});
      try {
        await waitFor(
          () => subscribers(t, 'mobile-id', id) === 1 && ticking.results.length > 0,
          20_000,
          'both subscriptions running',
        );
        fs.writeFileSync(files.apps, appsFile([OLD_KEY], 'cloud:read, cloud:write'));
        expect((await reload(t)).status).toBe(200);
        await waitFor(() => scoped.completed() || scoped.errors.length > 0, 20_000, 'the scoped subscription to end');
        const ended = mode.transport === 'ws' ? [[forbiddenNow]] : [{ errors: [forbiddenNow] }];
        expect(mode.transport === 'ws' ? scoped.errors : scoped.results).toEqual(ended);
        expect(mode.transport === 'ws' ? scoped.results : scoped.errors).toEqual([]);
        await waitFor(() => subscribers(t, 'mobile-id', id) === 0, 20_000, 'the forbidden subscription to leave');
        // The connection and its other subscription go on; the ended one gets nothing more.
        const seen = ticking.results.length;
        expect((await postNotification(t, await mobile.notification(id), { token: NOTIFY })).status).toBe(204);
        await waitFor(() => ticking.results.length > seen + 2, 20_000, 'the admitted subscription to keep receiving');
        expect(ticking.errors).toEqual([]);
        expect(ticking.completed()).toBe(false);
        expect(mode.transport === 'ws' ? scoped.results : scoped.errors).toEqual([]);
        expect(mode.transport === 'ws' ? scoped.errors : scoped.results).toEqual(ended);
      } finally {
        scoped.stop();
        ticking.stop();
        await client.dispose();
      }
    });
  }

  it("an MCP wait_for_events call and a subscriptions/listen stream whose key a reload removed end (the call UNAUTHENTICATED with its cursor); a kept key's get the next event", async () => {
    fs.writeFileSync(files.apps, appsFile([OLD_KEY, NEW_KEY]));
    expect((await reload(t)).status).toBe(200);
    const removed = await mcpClient(t, { key: OLD_KEY });
    const kept = await mcpClient(t, { key: NEW_KEY });
    try {
      const wait = async (c: typeof removed) => {
        const start = await c.call('wait_for_events', { kinds: ['mobile-id'], timeoutSeconds: 0 });
        const cursor = start.structuredContent!.cursor as string;
        return c.call('wait_for_events', { cursor, kinds: ['mobile-id'], timeoutSeconds: 300 });
      };
      const id = `mcp-kept-${Math.random()}`;
      const uri = `mobileid://authentications/${id}`;
      const updated = { removed: [] as string[], kept: [] as string[] };
      for (const [c, seen] of [
        [removed, updated.removed],
        [kept, updated.kept],
      ] as const)
        c.client.setNotificationHandler('notifications/resources/updated', (n) => void seen.push(n.params.uri));
      const removedListen = await removed.client.listen({ resourceSubscriptions: [uri] });
      await kept.client.listen({ resourceSubscriptions: [uri] });
      const before = subscribers(t, 'mobile-id');
      const removedWait = wait(removed);
      const keptWait = wait(kept);
      await waitFor(() => subscribers(t, 'mobile-id') >= before + 2, 20_000, 'both calls waiting');
      fs.writeFileSync(files.apps, appsFile([NEW_KEY]));
      expect((await reload(t)).status).toBe(200);
      expect(await removedListen.closed).toBe('remote');
      const ended = await removedWait;
      expect(ended.isError).toBe(true);
      expect(ended.structuredContent).toEqual({
        errors: [
          {
            message: expect.stringMatching(
              /\(the configuration was reloaded\) while waiting; nothing after it was read$/,
            ),
            code: 'UNAUTHENTICATED',
          },
        ],
        cursor: expect.any(String),
      });
      expect((await postNotification(t, await mobile.notification(id), { token: NOTIFY })).status).toBe(204);
      const got = await keptWait;
      expect(got.isError).toBeFalsy();
      expect((got.structuredContent!.events as { key: string }[]).map((e) => e.key)).toEqual([id]);
      await waitFor(() => updated.kept.length > 0, 20_000, "the kept key's listen stream notified");
      expect(updated).toEqual({ removed: [], kept: [uri] });
    } finally {
      await removed.close();
      await kept.close();
    }
  });

  it('a subscriptions/listen stream whose app a reload took mobile-id:read from is no longer told of its mobile-ID results, and stays open; a reload that gives the scope back tells it again', async () => {
    const c = await mcpClient(t, { key: OLD_KEY });
    try {
      const lost = `mcp-lost-${Math.random()}`;
      const back = `mcp-back-${Math.random()}`;
      const uriOf = (id: string) => `mobileid://authentications/${id}`;
      const updated: string[] = [];
      c.client.setNotificationHandler('notifications/resources/updated', (n) => void updated.push(n.params.uri));
      await c.client.listen({ resourceSubscriptions: [uriOf(lost), uriOf(back)] });
      const listening = (n: number) =>
        subscribers(t, 'mobile-id', lost) === n && subscribers(t, 'mobile-id', back) === n;
      await waitFor(() => listening(1), 20_000, 'the stream to listen');
      fs.writeFileSync(files.apps, appsFile([OLD_KEY], 'cloud:read, cloud:write'));
      expect((await reload(t)).status).toBe(200);
      // As a stream opened now would: the resources its app may no longer read are never signalled (no oracle).
      await waitFor(() => listening(0), 20_000, 'the stream to stop listening to mobile-ID results');
      expect((await postNotification(t, await mobile.notification(lost), { token: NOTIFY })).status).toBe(204);
      fs.writeFileSync(files.apps, appsFile([OLD_KEY]));
      expect((await reload(t)).status).toBe(200);
      await waitFor(() => listening(1), 20_000, 'the stream to listen again');
      expect((await postNotification(t, await mobile.notification(back), { token: NOTIFY })).status).toBe(204);
      await waitFor(() => updated.includes(uriOf(back)), 20_000, 'the stream signalled');
      expect(updated).toEqual([uriOf(back)]);
    } finally {
      await c.close();
    }
  });

  it('an MCP wait_for_events call whose app a reload took mobile-id:read from ends FORBIDDEN naming the scope, with its cursor: the mobile-ID result logged then is not handed out, and is read from that cursor once the scope is back', async () => {
    const c = await mcpClient(t, { key: OLD_KEY });
    try {
      const start = await c.call('wait_for_events', { timeoutSeconds: 0 });
      const before = subscribers(t, 'mobile-id');
      // Without kinds: every kind its scopes allow when it was called, mobile-ID results among them.
      const waiting = c.call('wait_for_events', { cursor: start.structuredContent!.cursor, timeoutSeconds: 300 });
      await waitFor(() => subscribers(t, 'mobile-id') > before, 20_000, 'the call waiting');
      fs.writeFileSync(files.apps, appsFile([OLD_KEY], 'cloud:read, cloud:write'));
      expect((await reload(t)).status).toBe(200);
      await waitFor(() => subscribers(t, 'mobile-id') === before, 20_000, 'the call to stop waiting');
      const id = `mcp-wait-lost-${Math.random()}`;
      expect((await postNotification(t, await mobile.notification(id), { token: NOTIFY })).status).toBe(204);
      const ended = await waiting;
      const message =
        'mobile-id events need the scope mobile-id:read, which this app no longer holds (the configuration was reloaded) while waiting; nothing after it was read';
      expect(ended.isError).toBe(true);
      expect(ended.structuredContent).toEqual({
        errors: [{ message, code: 'FORBIDDEN', scope: 'mobile-id:read' }],
        cursor: expect.any(String),
      });
      // From its cursor the result is read once the scope is back, not before: nothing was missed.
      const cursor = ended.structuredContent!.cursor as string;
      const mobileIds = async () => c.call('wait_for_events', { cursor, kinds: ['mobile-id'], timeoutSeconds: 0 });
      expect((await mobileIds()).structuredContent).toMatchObject({ code: 'FORBIDDEN', scope: 'mobile-id:read' });
      fs.writeFileSync(files.apps, appsFile([OLD_KEY]));
      expect((await reload(t)).status).toBe(200);
      const read = await mobileIds();
      expect((read.structuredContent!.events as { key: string }[]).map((e) => e.key)).toEqual([id]);
    } finally {
      await c.close();
    }
  });
});

describe('a reload while a WebSocket connection is being authenticated', () => {
  it('a JWT verified under the configuration before the reload does not keep its connection when the reload refuses its app', async () => {
    const first = await signingKey('idp-before');
    const rotated = await signingKey('idp-rotated');
    // The identity provider: serves its keys at once, or holds its answers while `held` is set.
    const keys = [first.publicJwk];
    let held: Array<() => void> | null = null;
    let requests = 0;
    const provider = http.createServer((_req, res) => {
      requests += 1;
      const answer = () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys }));
      if (held) held.push(answer);
      else answer();
    });
    await new Promise<void>((resolve) => provider.listen(0, '127.0.0.1', resolve));
    const clock = testClock();
    const apps = path.join(tempDataDir('reload-race-'), 'apps.yaml');
    fs.writeFileSync(apps, appsFile([OLD_KEY]));
    const t = await startTestGateway(
      {
        GATEWAY_APPS_FILE: apps,
        AUTH_JWKS_URL: `http://127.0.0.1:${(provider.address() as AddressInfo).port}/keys`,
        AUTH_ISSUER: ISSUER,
        AUTH_AUDIENCE: AUDIENCE,
        AUTH_APPS: '*',
      },
      { testing: { clock: clock.now } },
    );
    const client = wsClient(t, { key: await sign(rotated) });
    try {
      // The keys fetched by another JWT app: one of portal's would make portal a name `*` accepted, which no reload may
      // then give to a key app.
      expect(
        (await t.graphql(TYPENAME, undefined, { key: await sign(first, { claims: { azp: 'warm-up' } }) })).status,
      ).toBe(200);
      // The token's kid is rotated in: its verification waits for the provider's held answer.
      clock.advance(5 * 60_000);
      keys.push(rotated.publicJwk);
      held = [];
      const outcome = new Promise<unknown>((resolve) => {
        client.subscribe({ query: TYPENAME }, { next: resolve, error: resolve, complete: () => {} });
      });
      await waitFor(() => requests === 2 || undefined, 20_000, 'the verification to wait for the JWKS');
      // Meanwhile the apps file gives the name portal to an app with keys: a JWT no longer takes it.
      fs.writeFileSync(
        apps,
        `${appsFile([OLD_KEY])}  - name: portal\n    scopes: [cloud:read]\n    keys:\n      - sha256: ${digest(NEW_KEY)}\n`,
      );
      expect((await reload(t)).status).toBe(200);
      for (const answer of held) answer();
      held = null;
      const { code, reason } = (await outcome) as { code?: number; reason?: string };
      // The verification under the configuration before the reload is the first of portal's under `*`: it finds the
      // name configured on the database by the reload, and refuses it there, before any swap is to be judged again
      // (a name `*` accepted once can no longer be given to a key app: docs/apps-and-security.md). A close reason is
      // cut at 123 bytes.
      expect({ code, reason }).toEqual({
        code: 4403,
        reason: expect.stringMatching(
          /^Forbidden: the JWT's azp claim names an app configured with API keys or listed by an identity provider/,
        ),
      });
    } finally {
      await client.dispose();
      await t.close();
      await new Promise<void>((resolve) => provider.close(() => resolve()));
    }
  });
});

describe('a reload after which the JWKS URL cannot be fetched', () => {
  it("closes a JWT's WebSocket 1013 and ends its SSE subscription UPSTREAM_UNAVAILABLE: the keys are unreachable, the token is not refused", async () => {
    const key = await signingKey('idp-reachable');
    // The provider the gateway starts with, and the one the reload names, which answers every fetch 503.
    const serve = (answer: (res: http.ServerResponse) => void) => {
      const server = http.createServer((_req, res) => answer(res));
      return new Promise<http.Server>((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
    };
    const reachable = await serve((res) =>
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [key.publicJwk] })),
    );
    const down = await serve((res) => res.writeHead(503).end());
    const urlOf = (server: http.Server) => `http://127.0.0.1:${(server.address() as AddressInfo).port}/keys`;
    const dir = tempDataDir('reload-jwks-down-');
    const issuers = path.join(dir, 'issuers.yaml');
    const issuersWith = (server: http.Server) =>
      `issuers:\n  - issuer: ${ISSUER}\n    jwksUrl: ${urlOf(server)}\n    audience: ${AUDIENCE}\n    apps: ["*"]\n`;
    fs.writeFileSync(issuers, issuersWith(reachable));
    const t = await startTestGateway({ AUTH_ISSUERS: issuers, OPERATOR_API_KEYS: `sre:${SRE_KEY}` });
    const jwt = await sign(key);
    const ws = wsClient(t, { key: jwt });
    const sse = createSseClient({
      url: `${t.url}/graphql/stream`,
      singleConnection: false,
      retryAttempts: 0,
      headers: { authorization: `Bearer ${jwt}` },
    });
    const HEARTBEAT = 'subscription { heartbeat(intervalMs: 60000, count: 1000) }';
    try {
      let closed: { code?: number; reason?: string } | undefined;
      ws.on('closed', (event) => (closed = event as typeof closed));
      const overWs = collect(ws, HEARTBEAT, {});
      const overSse = collect(sse, HEARTBEAT, {});
      // Each has its first beat: both are open, authenticated with the reachable keys.
      await waitFor(() => overWs.results.length > 0 && overSse.results.length > 0, 20_000, 'the first beats');
      fs.writeFileSync(issuers, issuersWith(down));
      expect((await reload(t)).status).toBe(200);
      await waitFor(() => closed, 20_000, 'the WebSocket to close');
      expect(closed!.code).toBe(1013);
      expect(closed!.reason).toMatch(
        /^Try again later \(the configuration was reloaded\): the identity provider's keys/,
      );
      await waitFor(() => overSse.completed() || overSse.errors.length > 0, 20_000, 'the SSE subscription to end');
      expect(overSse.results.at(-1)).toEqual({
        errors: [
          {
            message: expect.stringMatching(
              /\(the configuration was reloaded\): the subscription has ended; subscribe again later$/,
            ),
            extensions: { code: 'UPSTREAM_UNAVAILABLE' },
          },
        ],
      });
    } finally {
      await ws.dispose();
      sse.dispose();
      await t.close();
      for (const server of [reachable, down]) await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
