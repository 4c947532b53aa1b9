// A webhook that the store could not write was answered 503 and stored nothing: it uses up nothing of its app's
// storage bound (APP_EVENTS_STORED), so the sender's retries during the fault cannot turn the retry that comes once
// the disk is back into a 429 "bound reached" (a mobile-ID notification refused so is lost: its sender does not
// retry a 429). The fault is real: this process's file-size limit is 0, so every SQLite write fails.
import { generateKeyPair, SignJWT } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';

import { fileSizeLimitUnavailable, whileFilesCannotGrow } from '../helpers/faults.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { postNotification, storedEvents } from '../helpers/mobile-id.js';

const KEY = 'bounded-app-key-0123456789';
const ATTEMPTS = 3;
const unavailable = fileSizeLimitUnavailable();

const started: TestGateway[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((g) => g.close()));
});

async function gateway(env: Record<string, string> = {}): Promise<TestGateway> {
  const gw = await startTestGateway({
    ...env,
    GATEWAY_API_KEYS: `shop:${KEY}`,
    APP_EVENTS_STORED: '2',
    SANDBOX_CALLBACK_DELAY_MS: '600000',
  });
  started.push(gw);
  return gw;
}

describe.skipIf(unavailable !== null)(
  `webhooks refused with 503 while SQLite cannot be written${unavailable ? ` (skipped: ${unavailable})` : ''}`,
  () => {
    it("leave a mobile-ID notification on an app's token its whole storage bound", async () => {
      const gw = await gateway();
      const issued = await gw.graphql(
        `mutation { issueMobileIdNotificationToken(ttlSeconds: 3600) { token } }`,
        {},
        { key: KEY },
      );
      const token = issued.data!.issueMobileIdNotificationToken.token as string;
      const body = { auth_req_id: 'bounded-1', error: 'access_denied', error_description: 'client timeout' };
      await whileFilesCannotGrow(async () => {
        for (let i = 0; i < ATTEMPTS; i++) expect((await postNotification(gw, body, { token })).status).toBe(503);
      });
      const retry = await postNotification(gw, body, { token });
      expect(retry.status, retry.text).toBe(204);
      expect(await storedEvents(gw, 'bounded-1')).toHaveLength(1);
    });

    it('leave a notification kept pending verification (the JWKS unreachable) its whole storage bound', async () => {
      // Nothing listens on port 1 of loopback: the JWKS cannot be fetched, so a success is kept pending.
      const gw = await gateway({
        MOBILEID_JWKS_URL: 'http://127.0.0.1:1/jwks',
        SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
      });
      const issued = await gw.graphql(
        `mutation { issueMobileIdNotificationToken(ttlSeconds: 3600) { token } }`,
        {},
        { key: KEY },
      );
      const token = issued.data!.issueMobileIdNotificationToken.token as string;
      const { privateKey } = await generateKeyPair('ES256');
      const now = Math.floor(Date.now() / 1000);
      const idToken = await new SignJWT({ sub: 'pcr-1', acr: '3', iat: now, exp: now + 300 })
        .setProtectedHeader({ alg: 'ES256', kid: 'op-1' })
        .sign(privateKey);
      const body = {
        auth_req_id: 'bounded-pending-1',
        access_token: 'at-1',
        token_type: 'Bearer',
        id_token: idToken,
        expires_in: 3600,
      };
      await whileFilesCannotGrow(async () => {
        for (let i = 0; i < ATTEMPTS; i++) expect((await postNotification(gw, body, { token })).status).toBe(503);
      });
      const retry = await postNotification(gw, body, { token });
      expect(retry.status, retry.text).toBe(204);
    });

    it("leave a verification callback to an app's address its whole storage bound", async () => {
      const gw = await gateway();
      const reg = await gw.graphql(
        `mutation { registerVerification(input: { workflowId: "wf", applicant: { lastName: "X" } }) { verification { externalId } } }`,
        {},
        { key: KEY },
      );
      const id = reg.data!.registerVerification.verification.externalId as string;
      const url = gw.gateway.sandbox.verification!.verifications().find((v) => v.externalId === id)!.callbackUrl!;
      const send = () =>
        fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ status: 'done' }),
        });
      await whileFilesCannotGrow(async () => {
        for (let i = 0; i < ATTEMPTS; i++) expect((await send()).status).toBe(503);
      });
      const retry = await send();
      expect(retry.status, await retry.text()).toBe(204);
    });
  },
);
