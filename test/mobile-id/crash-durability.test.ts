import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';

import { tempDataDir } from '../helpers/gateway.js';
import { QUERY } from '../helpers/mobile-id.js';
import { gatewayProcesses } from '../helpers/process.js';

const startProcess = gatewayProcesses();

describe('durability of acknowledged notifications', () => {
  it('loses nothing when the gateway is killed with SIGKILL right after its 204', async () => {
    const dir = tempDataDir();
    const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
    const jwksFile = path.join(dir, 'operator-jwks.json');
    fs.writeFileSync(
      jwksFile,
      JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256' }] }),
    );
    const env = {
      DATA_DIR: dir,
      GATEWAY_API_KEYS: 'app-key',
      SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
      MOBILEID_NOTIFICATION_TOKENS: 'notify-token',
      MOBILEID_JWKS_FILE: jwksFile,
      MOBILEID_ISSUER: 'https://operator.example',
      MOBILEID_CLIENT_ID: 'sp',
    };

    const accessToken = randomBytes(24).toString('base64url');
    const now = Math.floor(Date.now() / 1000);
    const idToken = await new SignJWT({
      iss: 'https://operator.example',
      aud: 'sp',
      sub: 'owner-1',
      acr: '2',
      iat: now,
      exp: now + 600,
      at_hash: createHash('sha256').update(accessToken).digest().subarray(0, 16).toString('base64url'),
      'urn:openid:params:jwt:claim:auth_req_id': 'crash-success',
    })
      .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
      .sign(privateKey);
    const notifications = [
      {
        auth_req_id: 'crash-success',
        access_token: accessToken,
        token_type: 'Bearer',
        id_token: idToken,
        expires_in: 3600,
      },
      { auth_req_id: 'crash-failure', error: 'access_denied', error_description: 'client timeout' },
    ];

    const first = await startProcess(env);
    for (const body of notifications) {
      const res = await request(`${first.url}/webhooks/mobile-id`, {
        method: 'POST',
        headers: {
          authorization: 'Bearer notify-token',
          'content-type': 'application/json',
          'x-mobileid-request-id': `rq-${body.auth_req_id}`,
        },
        body: JSON.stringify(body),
      });
      expect(res.statusCode).toBe(204);
      await res.body.dump();
    }
    // At once: no graceful shutdown, no chance to flush anything after the acknowledgement.
    first.child.kill('SIGKILL');
    const [, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((r) =>
      first.child.once('exit', (c, s) => r([c, s])),
    );
    expect(signal).toBe('SIGKILL');

    const second = await startProcess(env);
    const query = async (id: string) => {
      const res = await request(`${second.url}/graphql`, {
        method: 'POST',
        headers: { authorization: 'Bearer app-key', 'content-type': 'application/json' },
        body: JSON.stringify({ query: QUERY, variables: { id } }),
      });
      return ((await res.body.json()) as { data: { mobileIdAuthentication: any } }).data.mobileIdAuthentication;
    };
    expect(await query('crash-success')).toMatchObject({
      __typename: 'MobileIdAuthenticated',
      accessToken,
      idToken,
      subject: 'owner-1',
      idTokenVerified: true,
      requestId: 'rq-crash-success',
    });
    expect(await query('crash-failure')).toMatchObject({
      __typename: 'MobileIdAuthenticationFailed',
      reason: 'CLIENT_TIMEOUT',
      requestId: 'rq-crash-failure',
    });

    // The same notification after the restart is recognised as a duplicate, not a conflict.
    const again = await request(`${second.url}/webhooks/mobile-id`, {
      method: 'POST',
      headers: { authorization: 'Bearer notify-token', 'content-type': 'application/json' },
      body: JSON.stringify(notifications[0]),
    });
    expect(again.statusCode).toBe(204);
    await again.body.dump();
    expect(second.output()).not.toContain(accessToken);
    second.child.kill('SIGTERM');
    await new Promise((r) => second.child.once('exit', r));
    // Two gateway processes start one after the other: on a loaded machine that alone can take most of a minute.
  }, 120_000);
});
