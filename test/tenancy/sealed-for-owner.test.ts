// What is personal is stored only sealed, and sealed for its owner (docs/decisions/050): two apps over real HTTP,
// the sandbox upstreams, SQLite on disk; the database is read (and tampered with) as a thief or an insider would.
import { request } from 'undici';
import { describe, expect, it } from 'vitest';

import { createLogger } from '../../src/logger.js';
import { loadSecretBox, sealingContext } from '../../src/secret.js';
import { gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';
import { postNotification } from '../helpers/mobile-id.js';

const SHOP = 'sealed-shop-key-0123456789';
const CRM = 'sealed-crm-key-9876543210';
const KEYS = { GATEWAY_API_KEYS: `shop:${SHOP},crm:${CRM}` };
const ISSUE = `mutation { issueMobileIdNotificationToken { token } }`;
const READ = `query($id: String!) { mobileIdAuthentication(authReqId: $id) { ... on MobileIdAuthenticated { subject accessToken idToken otherFields } ... on MobileIdAuthenticationFailed { otherFields } } }`;

const start = gatewaysPerTest();

async function tokenOf(gw: TestGateway, key: string): Promise<string> {
  const res = await gw.graphql(ISSUE, {}, { key });
  expect(res.errors).toBeUndefined();
  return res.data!.issueMobileIdNotificationToken.token as string;
}

/** Every text column of every row of a table, as one string (what a copy of the database shows). */
async function dump(gw: TestGateway, table: 'events' | 'resources' | 'idempotency_records'): Promise<string> {
  return JSON.stringify(await gw.gateway.services.store.db.selectFrom(table).selectAll().execute());
}

async function post(url: string, body: unknown): Promise<number> {
  const res = await request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  await res.body.text();
  return res.statusCode;
}

/** Stores `payload` as shop's notification for `authReqId`, as an earlier release wrote it, and reads it back. */
async function storedThenRead(gw: Awaited<ReturnType<typeof start>>, authReqId: string, payload: object) {
  await gw.gateway.services.events.log.append({
    kind: 'mobile-id',
    key: authReqId,
    dedupeKey: `mobile-id@app:shop:${authReqId}`,
    payload,
    scope: 'app:shop',
  });
  return gw.graphql<{ mobileIdAuthentication: unknown }>(READ, { id: authReqId }, { key: SHOP });
}

describe('sealed for their owner', () => {
  it("a mobile-ID success's subject and unknown fields are stored only sealed, and the app reads them back", async () => {
    const gw = await start(KEYS);
    const sub = 'subscriber-37255512345';
    const n = await gw.gateway.sandbox.mobileId!.buildNotification({ authReqId: 'sealed-sub', sub });
    const body = { ...n.body, msisdn_hint: '+37255512345', refresh_token: 'refresh-secret-value' };
    expect((await postNotification(gw, body, { token: await tokenOf(gw, SHOP) })).status).toBe(204);

    const stored = await dump(gw, 'events');
    for (const clear of [sub, '+37255512345', 'refresh-secret-value', n.body.access_token as string])
      expect(stored).not.toContain(clear);
    const read = await gw.graphql(READ, { id: 'sealed-sub' }, { key: SHOP });
    expect(read.errors).toBeUndefined();
    expect(read.data!.mobileIdAuthentication).toMatchObject({
      subject: sub,
      otherFields: { msisdn_hint: '+37255512345', refresh_token: 'refresh-secret-value' },
    });
  });

  it("a sealed token copied into another app's row for the same auth_req_id does not open there", async () => {
    const gw = await start(KEYS);
    const shopN = await gw.gateway.sandbox.mobileId!.buildNotification({ authReqId: 'same-id' });
    const crmN = await gw.gateway.sandbox.mobileId!.buildNotification({ authReqId: 'same-id' });
    expect((await postNotification(gw, shopN.body, { token: await tokenOf(gw, SHOP) })).status).toBe(204);
    expect((await postNotification(gw, crmN.body, { token: await tokenOf(gw, CRM) })).status).toBe(204);

    // Someone who can write the database moves shop's sealed values into crm's event of the same auth_req_id.
    const db = gw.gateway.services.store.db;
    const rows = await db
      .selectFrom('events')
      .select(['seq', 'scope', 'payload'])
      .where('key', '=', 'same-id')
      .execute();
    const shopRow = rows.find((r) => r.scope === 'app:shop')!;
    const crmRow = rows.find((r) => r.scope === 'app:crm')!;
    const moved = {
      ...JSON.parse(crmRow.payload),
      accessToken: JSON.parse(shopRow.payload).accessToken,
      idToken: JSON.parse(shopRow.payload).idToken,
      sealedPersonal: JSON.parse(shopRow.payload).sealedPersonal,
    };
    await db
      .updateTable('events')
      .set({ payload: JSON.stringify(moved) })
      .where('seq', '=', crmRow.seq)
      .execute();

    const read = await gw.graphql(READ, { id: 'same-id' }, { key: CRM });
    expect(JSON.stringify(read)).not.toContain(shopN.body.access_token as string);
    expect(JSON.stringify(read)).not.toContain(shopN.body.id_token as string);
    expect(read.errors?.[0]?.extensions?.code).toBe('INTERNAL_SERVER_ERROR');
    // shop's own result is untouched.
    expect((await gw.graphql(READ, { id: 'same-id' }, { key: SHOP })).data!.mobileIdAuthentication.accessToken).toBe(
      shopN.body.access_token,
    );
  });

  it('notifications stored before owners were bound (version 1: subject in clear, contexts without the owner) are read as before', async () => {
    const gw = await start(KEYS);
    const box = loadSecretBox({
      key: undefined,
      dataDir: gw.dataDir,
      shared: false,
      logger: createLogger({ level: 'silent' }),
    });
    const authReqId = 'stored-long-ago';
    const payload = {
      v: 1,
      outcome: 'success',
      authReqId,
      tokenType: 'Bearer',
      accessToken: box.seal('old-access-token', `${authReqId}\u0000access_token`),
      idToken: box.seal('old.id.token', `${authReqId}\u0000id_token`),
      expiresIn: 3600,
      expiresAt: Date.now() + 3_600_000,
      claims: { sub: 'old-subject', acr: '2', amr: null, iss: null, aud: [], exp: null, iat: null, authReqId: null },
      verifiedWith: null,
      jwksUri: null,
      leadingKycMatch: null,
      correlationId: null,
      extra: { plain: 'as sent' },
      sealedExtra: { refresh_token: box.seal(JSON.stringify('old-refresh'), `${authReqId}\u0000extra:refresh_token`) },
    };
    const read = await storedThenRead(gw, authReqId, payload);
    expect(read.errors).toBeUndefined();
    expect(read.data!.mobileIdAuthentication).toEqual({
      subject: 'old-subject',
      accessToken: 'old-access-token',
      idToken: 'old.id.token',
      otherFields: { plain: 'as sent', refresh_token: 'old-refresh' },
    });
  });

  it('notifications stored with the id_token sealed apart from the subject (version 2) are read as before', async () => {
    const gw = await start(KEYS);
    const box = loadSecretBox({
      key: undefined,
      dataDir: gw.dataDir,
      shared: false,
      logger: createLogger({ level: 'silent' }),
    });
    const authReqId = 'stored-before-v3';
    const context = (field: string) => sealingContext('mobile-id', 'app:shop', authReqId, field);
    const payload = {
      v: 2,
      outcome: 'success',
      authReqId,
      tokenType: 'Bearer',
      accessToken: box.seal('v2-access-token', context('access_token')),
      idToken: box.seal('v2.id.token', context('id_token')),
      expiresIn: 3600,
      expiresAt: Date.now() + 3_600_000,
      claims: { sub: null, acr: '2', amr: null, iss: null, aud: [], exp: null, iat: null, authReqId: null },
      sealedPersonal: box.seal(JSON.stringify({ sub: 'v2-subject', fields: { kept: 'field' } }), context('personal')),
      verifiedWith: null,
      jwksUri: null,
      leadingKycMatch: null,
      correlationId: null,
      extra: {},
      sealedExtra: {},
      droppedExtra: null,
    };
    const read = await storedThenRead(gw, authReqId, payload);
    expect(read.errors).toBeUndefined();
    expect(read.data!.mobileIdAuthentication).toEqual({
      subject: 'v2-subject',
      accessToken: 'v2-access-token',
      idToken: 'v2.id.token',
      otherFields: { kept: 'field' },
    });
  });

  it("an identification's applicantExternalId, redirectUrl and callback bodies are stored only sealed, and only its app reads them", async () => {
    const gw = await start(KEYS);
    const created = await gw.graphql(
      `mutation($input: CreateIdentificationInput!) { createIdentification(input: $input) { identification { id callbackUrl } } }`,
      {
        input: {
          workflowId: 'wf-sealed',
          applicantExternalId: 'applicant-4711',
          redirectUrl: 'https://shop.example/return/jane',
        },
      },
      { key: SHOP },
    );
    expect(created.errors).toBeUndefined();
    const link = created.data!.createIdentification.identification as { id: string; callbackUrl: string };
    expect(
      await post(link.callbackUrl, { identificationId: link.id, status: 'APPROVED', person: { name: 'Jane Doe' } }),
    ).toBe(204);

    const stored = (await dump(gw, 'resources')) + (await dump(gw, 'idempotency_records')) + (await dump(gw, 'events'));
    for (const clear of ['applicant-4711', 'shop.example/return/jane', 'Jane Doe']) expect(stored).not.toContain(clear);
    const read = await gw.graphql(
      `query($id: ID!) { identification(id: $id) { applicantExternalId redirectUrl status completion { payload } } }`,
      { id: link.id },
      { key: SHOP },
    );
    expect(read.data!.identification).toEqual({
      applicantExternalId: 'applicant-4711',
      redirectUrl: 'https://shop.example/return/jane',
      status: 'APPROVED',
      completion: { payload: { identificationId: link.id, status: 'APPROVED', person: { name: 'Jane Doe' } } },
    });
    expect(
      (await gw.graphql(`query($id: ID!) { identification(id: $id) { id } }`, { id: link.id }, { key: CRM })).data!
        .identification,
    ).toBeNull();
  });

  it('a verification callback body is stored only sealed, and read back whole', async () => {
    // The simulated platform would call back on its own after this delay: the test's callback is the only one.
    const gw = await start({ ...KEYS, SANDBOX_CALLBACK_DELAY_MS: '600000' });
    const res = await gw.graphql(
      `mutation($input: RegisterVerificationInput!) { registerVerification(input: $input) { verification { id } } }`,
      { input: { workflowId: 'wf-kyc', applicant: { lastName: 'Ivanova' }, externalId: 'v-sealed' } },
      { key: SHOP },
    );
    expect(res.errors).toBeUndefined();
    const url = gw.gateway.sandbox.verification!.verifications().find((v) => v.callbackUrl)!.callbackUrl!;
    const body = { status: 'COMPLETED', data: { decision: 'APPROVED', document: 'passport-X1234567' } };
    expect(await post(url, body)).toBe(204);
    expect(await dump(gw, 'events')).not.toContain('passport-X1234567');
    const read = await gw.graphql(
      `query($id: ID!) { node(id: $id) { ... on Verification { completion { externalId status payload } } } }`,
      { id: res.data!.registerVerification.verification.id },
      { key: SHOP },
    );
    expect(read.errors).toBeUndefined();
    expect(read.data!.node.completion).toEqual({ externalId: 'v-sealed', status: 'COMPLETED', payload: body });
  });
});
