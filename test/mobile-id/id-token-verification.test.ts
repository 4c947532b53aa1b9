import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';

import { startTestGateway, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import { postNotification, QUERY, storedEvents } from '../helpers/mobile-id.js';

const started: Array<{ close(): Promise<void> }> = [];
async function gateway(env: Record<string, string> = {}): Promise<TestGateway> {
  const gw = await startTestGateway(env);
  started.push(gw);
  return gw;
}
afterEach(async () => {
  await Promise.all(started.splice(0).map((g) => g.close()));
});

const API_KEY = 'app-key-1';
const NOTIFY = 'operator-notification-token';
const ISSUER = 'https://mobileid.operator.example';
const CLIENT_ID = 'sp-client-1';

/** An operator's signing key, its JWKS, and notifications signed with it (independent of the sandbox). */
async function operator(kid = 'op-key-1') {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const jwks = { keys: [{ ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' }] };
  const sign = (claims: Record<string, unknown>, key: CryptoKey = privateKey) =>
    new SignJWT(claims).setProtectedHeader({ alg: 'ES256', kid }).sign(key);
  async function notification(authReqId: string, claims: Record<string, unknown> = {}) {
    const accessToken = randomBytes(24).toString('base64url');
    const now = Math.floor(Date.now() / 1000);
    const all: Record<string, unknown> = {
      iss: ISSUER,
      aud: CLIENT_ID,
      sub: 'pcr-123',
      acr: '3',
      amr: ['SIM_PIN'],
      iat: now,
      exp: now + 300,
      at_hash: createHash('sha256').update(accessToken).digest().subarray(0, 16).toString('base64url'),
      'urn:openid:params:jwt:claim:auth_req_id': authReqId,
      ...claims,
    };
    for (const [k, v] of Object.entries(all)) if (v === undefined) delete all[k];
    return {
      auth_req_id: authReqId,
      access_token: accessToken,
      token_type: 'Bearer',
      id_token: await sign(all),
      expires_in: 3600,
    };
  }
  return { jwks, sign, notification, privateKey };
}

/** An HTTP server on loopback that counts its requests and answers with `body`. */
async function countingServer(body: unknown = { keys: [] }) {
  const hits: string[] = [];
  const server = http.createServer((req, res) => {
    hits.push(req.url ?? '');
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  const s = {
    url: `http://127.0.0.1:${port}`,
    host: `127.0.0.1:${port}`,
    hits,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
  started.push(s);
  return s;
}

function tamper(jwt: string): string {
  const [h, p, sig] = jwt.split('.');
  const bytes = Buffer.from(sig!, 'base64url');
  bytes[5] = bytes[5]! ^ 0xff;
  return `${h}.${p}.${bytes.toString('base64url')}`;
}

describe('id_token verification with the sandbox JWKS (CIBA §10.3.1)', () => {
  it('accepts a correctly signed id_token and marks it verified', async () => {
    const gw = await gateway();
    const n = await gw.gateway.sandbox.mobileId!.buildNotification({ authReqId: 'ok' });
    expect((await postNotification(gw, n.body)).status).toBe(204);
    const a = (await gw.graphql(QUERY, { id: 'ok' })).data!.mobileIdAuthentication;
    expect(a).toMatchObject({ idTokenVerified: true, idToken: n.body.id_token });
  });

  it.each([
    [
      'a tampered signature',
      async (sb: any) => {
        const n = await sb.buildNotification({ authReqId: 'case' });
        n.body.id_token = tamper(n.body.id_token);
        return n.body;
      },
      /signature is not valid/,
    ],
    [
      'a claims part swapped after signing',
      async (sb: any) => {
        const n = await sb.buildNotification({ authReqId: 'case' });
        const [h, , s] = n.body.id_token.split('.');
        const forged = JSON.parse(Buffer.from(n.body.id_token.split('.')[1], 'base64url').toString());
        forged.sub = 'someone-else';
        n.body.id_token = `${h}.${Buffer.from(JSON.stringify(forged)).toString('base64url')}.${s}`;
        return n.body;
      },
      /signature is not valid/,
    ],
    [
      'an auth_req_id claim of another request',
      async (sb: any) =>
        (
          await sb.buildNotification({
            authReqId: 'case',
            claims: { 'urn:openid:params:jwt:claim:auth_req_id': 'another' },
          })
        ).body,
      /auth_req_id claim does not equal/,
    ],
    [
      'an at_hash of another access token',
      async (sb: any) =>
        (
          await sb.buildNotification({
            authReqId: 'case',
            claims: { at_hash: createHash('sha256').update('other').digest().subarray(0, 16).toString('base64url') },
          })
        ).body,
      /at_hash does not match/,
    ],
    [
      'an access token other than the one at_hash covers',
      async (sb: any) =>
        (await sb.buildNotification({ authReqId: 'case', fields: { access_token: 'substituted-token' } })).body,
      /at_hash does not match/,
    ],
    [
      'an expired id_token',
      async (sb: any) =>
        (await sb.buildNotification({ authReqId: 'case', claims: { exp: Math.floor(Date.now() / 1000) - 3600 } })).body,
      /expired/,
    ],
    [
      'another audience',
      async (sb: any) => (await sb.buildNotification({ authReqId: 'case', claims: { aud: 'someone-else' } })).body,
      /aud/,
    ],
    [
      'another issuer',
      async (sb: any) =>
        (await sb.buildNotification({ authReqId: 'case', claims: { iss: 'https://evil.example' } })).body,
      /iss/,
    ],
  ])('refuses %s with 400 and stores nothing', async (_name, make, reason) => {
    const gw = await gateway();
    const body = await make(gw.gateway.sandbox.mobileId!);
    const res = await postNotification(gw, body);
    expect(res.status).toBe(400);
    expect(res.json).toEqual({ error: 'invalid_request', error_description: expect.stringMatching(reason) });
    expect(await storedEvents(gw)).toEqual([]);
  });

  it('never delivers an id_token signed by a key that is not in the fetched JWKS: kept pending (a rotation may not be published yet), then refused', async () => {
    const gw = await gateway();
    const sb = gw.gateway.sandbox.mobileId!;
    const stranger = await operator();
    const n = await sb.buildNotification({ authReqId: 'stranger' });
    const claims = JSON.parse(Buffer.from(String(n.body.id_token).split('.')[1]!, 'base64url').toString());
    n.body.id_token = await stranger.sign(claims);
    const res = await postNotification(gw, n.body);
    expect(res.status).toBe(204);
    expect(await storedEvents(gw)).toEqual([]);
    let refused = 0;
    for (let i = 1; i <= 4; i++)
      refused += (await gw.gateway.services.mobileId.verifyPending(Date.now() + i * 600_000)).refused;
    expect(refused).toBe(1);
    expect(await storedEvents(gw)).toEqual([]);
    expect((await gw.graphql(QUERY, { id: 'stranger' })).data!.mobileIdAuthentication).toBeNull();
  });
});

describe('id_token verification with a configured JWKS', () => {
  async function configured(op: Awaited<ReturnType<typeof operator>>, extra: Record<string, string> = {}) {
    const dir = tempDataDir();
    const file = path.join(dir, 'jwks.json');
    fs.writeFileSync(file, JSON.stringify(op.jwks));
    return gateway({
      DATA_DIR: dir,
      GATEWAY_API_KEYS: API_KEY,
      SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
      MOBILEID_NOTIFICATION_TOKENS: `other-token,${NOTIFY}`,
      MOBILEID_JWKS_FILE: file,
      MOBILEID_ISSUER: ISSUER,
      MOBILEID_CLIENT_ID: CLIENT_ID,
      ...extra,
    });
  }

  it('verifies against MOBILEID_JWKS_FILE with MOBILEID_ISSUER and MOBILEID_CLIENT_ID', async () => {
    const op = await operator();
    const gw = await configured(op);
    expect(gw.gateway.sandbox.mobileId).toBeNull();
    const body = await op.notification('real-1');
    expect((await postNotification(gw, body, { token: NOTIFY })).status).toBe(204);
    const q = await gw.graphql(QUERY, { id: 'real-1' }, { key: API_KEY });
    expect(q.data!.mobileIdAuthentication).toMatchObject({
      idTokenVerified: true,
      subject: 'pcr-123',
      acr: '3',
      issuer: ISSUER,
      accessToken: body.access_token,
    });

    const tampered = await op.notification('real-2');
    tampered.id_token = tamper(tampered.id_token);
    expect((await postNotification(gw, tampered, { token: NOTIFY })).status).toBe(400);
    const wrongClaim = await op.notification('real-3', { 'urn:openid:params:jwt:claim:auth_req_id': 'real-4' });
    expect((await postNotification(gw, wrongClaim, { token: NOTIFY })).status).toBe(400);
    expect((await storedEvents(gw)).map((e) => e.key)).toEqual(['real-1']);
  });

  it('verifies against MOBILEID_JWKS_URL, and while the JWKS cannot be loaded acknowledges with 204 and keeps the notification pending, out of the event log', async () => {
    const op = await operator();
    const jwks = await countingServer(op.jwks);
    const gw = await gateway({
      GATEWAY_API_KEYS: API_KEY,
      SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
      MOBILEID_NOTIFICATION_TOKENS: NOTIFY,
      MOBILEID_JWKS_URL: `${jwks.url}/jwks`,
      MOBILEID_ISSUER: ISSUER,
      MOBILEID_CLIENT_ID: CLIENT_ID,
    });
    expect((await postNotification(gw, await op.notification('url-1'), { token: NOTIFY })).status).toBe(204);
    expect(jwks.hits).toEqual(['/jwks']);

    const down = await gateway({
      GATEWAY_API_KEYS: API_KEY,
      SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
      MOBILEID_NOTIFICATION_TOKENS: NOTIFY,
      MOBILEID_JWKS_URL: 'http://127.0.0.1:1/jwks',
      MOBILEID_ISSUER: ISSUER,
      MOBILEID_CLIENT_ID: CLIENT_ID,
    });
    const res = await postNotification(down, await op.notification('url-2'), { token: NOTIFY });
    expect(res.status).toBe(204);
    expect(await storedEvents(down)).toEqual([]);
    expect((await down.graphql(QUERY, { id: 'url-2' }, { key: API_KEY })).data!.mobileIdAuthentication).toBeNull();
  });

  it('only decodes the id_token when no JWKS is configured, and says so', async () => {
    const op = await operator();
    const gw = await gateway({
      GATEWAY_API_KEYS: API_KEY,
      SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
      MOBILEID_NOTIFICATION_TOKENS: NOTIFY,
    });
    const body = await op.notification('decoded');
    expect((await postNotification(gw, body, { token: NOTIFY })).status).toBe(204);
    const a = (await gw.graphql(QUERY, { id: 'decoded' }, { key: API_KEY })).data!.mobileIdAuthentication;
    expect(a).toMatchObject({ idTokenVerified: false, subject: 'pcr-123', acr: '3', amr: ['SIM_PIN'] });
  });
});

describe('JWKS addresses in a notification body', () => {
  it('records jwks_uri and jwks_endpoint without fetching them', async () => {
    const gw = await gateway();
    const trap = await countingServer();
    const n = await gw.gateway.sandbox.mobileId!.buildNotification({
      authReqId: 'jwks-trap',
      fields: { jwks_uri: `${trap.url}/encryption-keys`, jwks_endpoint: `${trap.url}/signing-keys` },
    });
    expect((await postNotification(gw, n.body)).status).toBe(204);
    const a = (await gw.graphql(QUERY, { id: 'jwks-trap' })).data!.mobileIdAuthentication;
    expect(a.jwksUri).toBe(`${trap.url}/encryption-keys`);
    expect(a.otherFields.jwks_endpoint).toBe(`${trap.url}/signing-keys`);
    expect(trap.hits).toEqual([]);
  });

  it('never verifies a signature with a jwks_uri or jwks_endpoint from the body, even from a host the removed MOBILEID_JWKS_ALLOWED_HOSTS names', async () => {
    const op = await operator();
    const allowed = await countingServer(op.jwks);
    const gw = await gateway({
      GATEWAY_API_KEYS: API_KEY,
      SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
      MOBILEID_NOTIFICATION_TOKENS: NOTIFY,
      MOBILEID_ISSUER: ISSUER,
      MOBILEID_CLIENT_ID: CLIENT_ID,
      MOBILEID_JWKS_ALLOWED_HOSTS: allowed.host,
    });
    const body = {
      ...(await op.notification('body-keys')),
      jwks_uri: `${allowed.url}/jwks`,
      jwks_endpoint: `${allowed.url}/jwks`,
    };
    expect((await postNotification(gw, body, { token: NOTIFY })).status).toBe(204);
    expect(allowed.hits).toEqual([]);
    const a = (await gw.graphql(QUERY, { id: 'body-keys' }, { key: API_KEY })).data!.mobileIdAuthentication;
    expect(a.idTokenVerified).toBe(false);
    expect(a.idTokenChecks.signature).toBe('NOT_CHECKED');
    expect(a.jwksUri).toBe(`${allowed.url}/jwks`);

    // A forged id_token is not made acceptable by pointing jwks_uri at the forger's own keys.
    const forger = await operator('forger');
    const forgerKeys = await countingServer(forger.jwks);
    const configured = await gateway({
      GATEWAY_API_KEYS: API_KEY,
      SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
      MOBILEID_NOTIFICATION_TOKENS: NOTIFY,
      MOBILEID_JWKS_FILE: (() => {
        const file = path.join(tempDataDir(), 'jwks.json');
        fs.writeFileSync(file, JSON.stringify(op.jwks));
        return file;
      })(),
      MOBILEID_ISSUER: ISSUER,
      MOBILEID_CLIENT_ID: CLIENT_ID,
      MOBILEID_JWKS_ALLOWED_HOSTS: forgerKeys.host,
    });
    const forged = {
      ...(await forger.notification('forged')),
      jwks_uri: `${forgerKeys.url}/jwks`,
      jwks_endpoint: `${forgerKeys.url}/jwks`,
    };
    const res = await postNotification(configured, forged, { token: NOTIFY });
    expect(res.status).toBe(400);
    expect(res.json.error_description).toMatch(/no key of the JWKS matches/);
    expect(forgerKeys.hits).toEqual([]);
    expect(await storedEvents(configured)).toEqual([]);
  });
});
