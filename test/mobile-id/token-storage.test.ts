import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Client } from 'graphql-ws';
import { afterEach, describe, expect, it } from 'vitest';

import { gatewaysPerTest, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import {
  collect,
  postNotification,
  QUERY,
  storedAccessToken,
  storedEvents,
  SUBSCRIPTION,
  wsClient,
} from '../helpers/mobile-id.js';
import { waitForSubscribers } from '../helpers/wait.js';

// Registered after the gateways' hook, so it runs first: clients go before their gateways.
const gateway = gatewaysPerTest();
const clients: Client[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.dispose()));
});

/** Every byte the store wrote to DATA_DIR (database, WAL), as latin1 text to search. */
function dataDirBytes(dir: string): string {
  return fs
    .readdirSync(dir)
    .filter((f) => f.startsWith('gateway.sqlite'))
    .map((f) => fs.readFileSync(path.join(dir, f)).toString('latin1'))
    .join('\n');
}

describe('mobile-ID tokens at rest and in logs', () => {
  it.each([
    ['ctr1', {}],
    ['gcm1', { SEAL_KEPT_CIPHER: 'false' }],
  ])(
    'stores access_token, id_token and a refresh_token only encrypted (%s), and writes none of them to the log',
    async (format, env) => {
      const gw = await gateway(env);
      const id = 'secret-check';
      const c = wsClient(gw);
      clients.push(c);
      const sub = collect(c, SUBSCRIPTION, { id });
      await waitForSubscribers(gw, 'mobile-id', id);
      const refresh = randomBytes(24).toString('base64url');
      const n = await gw.gateway.sandbox.mobileId!.buildNotification({
        authReqId: id,
        fields: { refresh_token: refresh },
      });
      expect((await postNotification(gw, n.body)).status).toBe(204);
      await sub.done;
      // The subscriber gets them in clear: that is the product.
      const delivered = sub.results[0].data.mobileIdAuthentication;
      expect(delivered.accessToken).toBe(n.body.access_token);
      expect(delivered.idToken).toBe(n.body.id_token);
      expect(delivered.otherFields.refresh_token).toBe(refresh);
      expect((await gw.graphql(QUERY, { id })).data!.mobileIdAuthentication.accessToken).toBe(n.body.access_token);

      const [row] = await storedEvents(gw, id);
      const secrets = [
        String(n.body.access_token),
        String(n.body.id_token),
        String(n.body.id_token).split('.')[2]!,
        refresh,
      ];
      for (const s of secrets) expect(row!.payload).not.toContain(s);
      // Version 4: both tokens sealed with the subject, in one value.
      const stored = JSON.parse(row!.payload);
      expect(stored).toMatchObject({
        v: 4,
        accessToken: null,
        sealedPersonal: expect.stringMatching(new RegExp(`^${format}\\.`)),
      });
      expect(stored).not.toHaveProperty('idToken');
      const onDisk = dataDirBytes(gw.dataDir);
      for (const s of secrets) expect(onDisk).not.toContain(s);
      const logs = gw.logs();
      expect(logs).toContain('mobile-ID notification stored');
      for (const s of secrets) expect(logs).not.toContain(s);
    },
  );

  it('generates the encryption key in DATA_DIR with mode 0600 and keeps using it after a restart', async () => {
    const dir = tempDataDir();
    const first = await gateway({ DATA_DIR: dir });
    const keyFile = path.join(dir, 'token-encryption.key');
    expect(fs.statSync(keyFile).mode & 0o777).toBe(0o600);
    const key = fs.readFileSync(keyFile, 'utf8');
    const n = await first.gateway.sandbox.mobileId!.buildNotification({ authReqId: 'restart' });
    expect((await postNotification(first, n.body)).status).toBe(204);
    await first.close();

    const second = await gateway({ DATA_DIR: dir });
    expect(fs.readFileSync(keyFile, 'utf8')).toBe(key);
    expect((await second.graphql(QUERY, { id: 'restart' })).data!.mobileIdAuthentication.accessToken).toBe(
      n.body.access_token,
    );
  });

  it('reads what it sealed under either SEAL_KEPT_CIPHER after a restart under the other', async () => {
    const dir = tempDataDir();
    const key = randomBytes(32).toString('base64');
    const gcm = await gateway({ DATA_DIR: dir, TOKEN_ENCRYPTION_KEY: key, SEAL_KEPT_CIPHER: 'false' });
    const before = await gcm.gateway.sandbox.mobileId!.buildNotification({ authReqId: 'sealed-gcm' });
    expect((await postNotification(gcm, before.body)).status).toBe(204);
    await gcm.close();

    const kept = await gateway({ DATA_DIR: dir, TOKEN_ENCRYPTION_KEY: key });
    const after = await kept.gateway.sandbox.mobileId!.buildNotification({ authReqId: 'sealed-ctr' });
    expect((await postNotification(kept, after.body)).status).toBe(204);
    const formats = async (gw: TestGateway) =>
      Promise.all(
        ['sealed-gcm', 'sealed-ctr'].map(async (id) =>
          JSON.parse((await storedEvents(gw, id))[0]!.payload).sealedPersonal.slice(0, 5),
        ),
      );
    expect(await formats(kept)).toEqual(['gcm1.', 'ctr1.']);
    for (const [id, n] of [
      ['sealed-gcm', before],
      ['sealed-ctr', after],
    ] as const)
      expect((await kept.graphql(QUERY, { id })).data!.mobileIdAuthentication.idToken).toBe(n.body.id_token);
    await kept.close();

    const back = await gateway({ DATA_DIR: dir, TOKEN_ENCRYPTION_KEY: key, SEAL_KEPT_CIPHER: 'false' });
    for (const [id, n] of [
      ['sealed-gcm', before],
      ['sealed-ctr', after],
    ] as const)
      expect((await back.graphql(QUERY, { id })).data!.mobileIdAuthentication.accessToken).toBe(n.body.access_token);
  });

  it('uses TOKEN_ENCRYPTION_KEY instead of a key file when it is set', async () => {
    const dir = tempDataDir();
    const gw = await gateway({ DATA_DIR: dir, TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64') });
    expect(fs.existsSync(path.join(dir, 'token-encryption.key'))).toBe(false);
    const n = await gw.gateway.sandbox.mobileId!.buildNotification({ authReqId: 'env-key' });
    expect((await postNotification(gw, n.body)).status).toBe(204);
    expect((await gw.graphql(QUERY, { id: 'env-key' })).data!.mobileIdAuthentication.accessToken).toBe(
      n.body.access_token,
    );
  });

  it('sweeps an expired access token that does not open with the key it has (the key changed) once, with a warning', async () => {
    const dir = tempDataDir();
    const first = await gateway({ DATA_DIR: dir, TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64') });
    const n = await first.gateway.sandbox.mobileId!.buildNotification({ authReqId: 'other-key', expiresIn: 1 });
    expect((await postNotification(first, n.body)).status).toBe(204);
    await first.close();

    const second = await gateway(
      { DATA_DIR: dir, TOKEN_ENCRYPTION_KEY: randomBytes(32).toString('base64') },
      // A minute on: the notification's one-second token has expired.
      { testing: { clock: () => Date.now() + 60_000 } },
    );
    const [before] = await storedEvents(second, 'other-key');
    expect(await second.gateway.services.mobileId.purgeExpired()).toMatchObject({ accessTokens: 1 });
    const [row] = await storedEvents(second, 'other-key');
    // Not rewritten (it cannot be), and not looked at again: the next sweep finds nothing.
    expect(row!.payload).toBe(before!.payload);
    expect(row!.secrets_expire_at).toBeNull();
    expect(await second.gateway.services.mobileId.purgeExpired()).toMatchObject({ accessTokens: 0 });
    expect(second.logs()).toContain('an expired access token could not be removed from its stored notification');
    expect(second.logs()).not.toContain(String(n.body.access_token));
  });

  it('removes an access token from storage once its expires_in has passed, keeping the rest of the event', async () => {
    const clock = { now: Date.now() };
    const key = randomBytes(32).toString('base64');
    const gw = await gateway({ TOKEN_ENCRYPTION_KEY: key }, { testing: { clock: () => clock.now } });
    const n = await gw.gateway.sandbox.mobileId!.buildNotification({ authReqId: 'short-lived', expiresIn: 1 });
    const long = await gw.gateway.sandbox.mobileId!.buildNotification({ authReqId: 'long-lived', expiresIn: 3600 });
    expect((await postNotification(gw, n.body)).status).toBe(204);
    expect((await postNotification(gw, long.body)).status).toBe(204);
    expect((await gw.graphql(QUERY, { id: 'short-lived' })).data!.mobileIdAuthentication.accessToken).toBe(
      n.body.access_token,
    );
    const [before] = await storedEvents(gw, 'short-lived');
    expect(storedAccessToken(key, before!)).toBe(n.body.access_token);

    clock.now += 1_100;
    // Past expiry, the token is no longer handed out even before the purge has run.
    expect((await gw.graphql(QUERY, { id: 'short-lived' })).data!.mobileIdAuthentication.accessToken).toBeNull();
    expect(await gw.gateway.services.mobileId.purgeExpired()).toMatchObject({ accessTokens: 1 });

    const [row] = await storedEvents(gw, 'short-lived');
    // Sealed again without it: a fresh ciphertext, which no longer holds the token.
    expect(JSON.parse(row!.payload).sealedPersonal).not.toBe(JSON.parse(before!.payload).sealedPersonal);
    expect(storedAccessToken(key, row!)).toBeNull();
    expect(row!.secrets_expire_at).toBeNull();
    const [other] = await storedEvents(gw, 'long-lived');
    expect(storedAccessToken(key, other!)).toBe(long.body.access_token);
    const a = (await gw.graphql(QUERY, { id: 'short-lived' })).data!.mobileIdAuthentication;
    expect(a).toMatchObject({ accessToken: null, idToken: n.body.id_token, subject: expect.any(String) });
    expect((await gw.graphql(QUERY, { id: 'long-lived' })).data!.mobileIdAuthentication.accessToken).toBe(
      long.body.access_token,
    );

    // A late duplicate of the purged notification is still recognised as the same one.
    expect((await postNotification(gw, n.body)).status).toBe(204);
  });
});
