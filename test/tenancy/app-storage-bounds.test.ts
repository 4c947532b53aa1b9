// What one app's own credentials can make the gateway store is bounded per app (docs/decisions/051): two apps over
// real HTTP, the sandbox upstreams, SQLite on disk. Each bound refuses the app past it, says why to the operator
// (quarantine, metric), and leaves the other app untouched.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { generateKeyPair, SignJWT } from 'jose';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';

import { migrationProvider } from '../../src/store/migrations.js';
import { gatewaysPerTest, type TestGateway } from '../helpers/gateway.js';
import { postNotification, QUERY } from '../helpers/mobile-id.js';

const SHOP = 'storage-shop-key-0123456789';
const CRM = 'storage-crm-key-9876543210';
const OPS = 'storage-ops-key-5555555555';
const KEYS = { GATEWAY_API_KEYS: `shop:${SHOP},crm:${CRM}`, OPERATOR_API_KEYS: `ops:${OPS}` };
const ISSUE = `mutation { issueMobileIdNotificationToken { token } }`;
const CREATE = `mutation($input: CreateIdentificationInput!) { createIdentification(input: $input) { identification { id workflowId callbackUrl } } }`;
const CALLBACK_URL = `query($w: String!) { identificationCallbackUrl(workflowId: $w) }`;

const start = gatewaysPerTest();

async function tokenOf(gw: TestGateway, key: string): Promise<string> {
  const res = await gw.graphql(ISSUE, {}, { key });
  expect(res.errors).toBeUndefined();
  return res.data!.issueMobileIdNotificationToken.token as string;
}

/** A failure notification: the smallest one the webhook stores. */
const failure = (authReqId: string, extra: Record<string, unknown> = {}) => ({
  auth_req_id: authReqId,
  error: 'access_denied',
  error_description: 'Client timeout',
  ...extra,
});

async function metric(gw: TestGateway, name: string, labels: Record<string, string>): Promise<number> {
  const text = await (await request(`${gw.url}/metrics`)).body.text();
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && want.every((w) => l.includes(w)));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

async function rows(
  gw: TestGateway,
  table: 'events' | 'identification_callbacks' | 'notification_tokens',
): Promise<number> {
  const r = await gw.gateway.services.store.db
    .selectFrom(table)
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  return Number(r.n);
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

describe('per-app storage bounds', () => {
  it("an app past its bound of webhook events a minute is refused 429 and quarantined as STORAGE_BOUND, counted on /metrics, while another app's notifications are stored", async () => {
    const gw = await start({ ...KEYS, APP_EVENTS_PER_MINUTE: '5' });
    const shop = await tokenOf(gw, SHOP);
    const crm = await tokenOf(gw, CRM);
    const run = randomUUID().slice(0, 8);
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++)
      statuses.push((await postNotification(gw, failure(`shop-${run}-${i}`), { token: shop })).status);
    expect(statuses).toEqual([204, 204, 204, 204, 204, 429, 429, 429]);
    // A repeat of a stored notification is still acknowledged as the duplicate it is.
    expect((await postNotification(gw, failure(`shop-${run}-0`), { token: shop })).status).toBe(204);
    // The other app has its own bound.
    for (let i = 0; i < 5; i++)
      expect((await postNotification(gw, failure(`crm-${run}-${i}`), { token: crm })).status).toBe(204);

    expect(await gw.graphql(QUERY, { id: `shop-${run}-5` }, { key: SHOP })).toMatchObject({
      data: { mobileIdAuthentication: null },
    });
    const quarantined = await gw.graphql(
      `query { mobileIdRejections(first: 10) { authReqId httpStatus reason description } }`,
      {},
      { key: SHOP },
    );
    expect(quarantined.data!.mobileIdRejections).toHaveLength(3);
    expect(quarantined.data!.mobileIdRejections[0]).toMatchObject({
      authReqId: `shop-${run}-7`,
      httpStatus: 429,
      reason: 'STORAGE_BOUND',
      description: expect.stringContaining('APP_EVENTS_PER_MINUTE'),
    });
    expect(
      await metric(gw, 'gateway_app_storage_refused_total', { app: 'shop', kind: 'events', bound: 'rows-per-minute' }),
    ).toBe(3);
    expect(await metric(gw, 'gateway_app_storage_refused_total', { app: 'crm' })).toBe(0);
    expect(await metric(gw, 'gateway_app_storage_rows', { app: 'shop', kind: 'events' })).toBe(5);
  });

  it("each bound a minute is a minute of the gateway's clock: moved a minute on, the app stores webhook events, tokens and callback addresses again", async () => {
    const clock = { now: Date.now() };
    const gw = await start(
      {
        ...KEYS,
        APP_EVENTS_PER_MINUTE: '1',
        APP_NOTIFICATION_TOKENS_PER_MINUTE: '2',
        APP_CALLBACK_ADDRESSES_PER_MINUTE: '1',
      },
      { testing: { clock: () => clock.now } },
    );
    const token = await tokenOf(gw, SHOP);
    await tokenOf(gw, SHOP);
    expect((await gw.graphql(ISSUE, {}, { key: SHOP })).errors?.[0]?.extensions).toMatchObject({
      bound: 'notification-tokens:rows-per-minute',
    });
    expect((await postNotification(gw, failure('minute-1'), { token })).status).toBe(204);
    expect((await postNotification(gw, failure('minute-1b'), { token })).status).toBe(429);
    expect((await gw.graphql(CREATE, { input: { workflowId: 'wf-m1' } }, { key: SHOP })).errors).toBeUndefined();
    expect(
      (await gw.graphql(CREATE, { input: { workflowId: 'wf-m1b' } }, { key: SHOP })).errors?.[0]?.extensions,
    ).toMatchObject({
      bound: 'callback-addresses:rows-per-minute',
    });

    clock.now += 61_000;
    await tokenOf(gw, SHOP);
    expect((await postNotification(gw, failure('minute-2'), { token })).status).toBe(204);
    expect((await gw.graphql(CREATE, { input: { workflowId: 'wf-m2' } }, { key: SHOP })).errors).toBeUndefined();
  });

  it("repeats and conflicts use up none of an app's bound a minute: what they counted is given back", async () => {
    const gw = await start({ ...KEYS, APP_EVENTS_PER_MINUTE: '3', APP_EVENT_BYTES_PER_MINUTE: '2000' });
    const token = await tokenOf(gw, SHOP);
    expect((await postNotification(gw, failure('repeated'), { token })).status).toBe(204);
    // Three exact repeats (204, nothing stored) and three conflicts (409, nothing stored) of the stored one.
    for (let i = 0; i < 3; i++) {
      expect((await postNotification(gw, failure('repeated'), { token })).status).toBe(204);
      const conflict = await postNotification(gw, failure('repeated', { error_description: `other ${i}` }), { token });
      expect(conflict.status, conflict.text).toBe(409);
    }
    // One event stored this minute, under the bound of 3: two new notifications are stored, the third is refused.
    expect((await postNotification(gw, failure('second'), { token })).status).toBe(204);
    expect((await postNotification(gw, failure('third'), { token })).status).toBe(204);
    const refused = await postNotification(gw, failure('fourth'), { token });
    expect(refused.status).toBe(429);
    expect(refused.text).toContain('APP_EVENTS_PER_MINUTE');
    expect(await rows(gw, 'events')).toBe(3);
  });

  it("repeats of a verification callback use up none of its app's bound a minute", async () => {
    const gw = await start({ ...KEYS, APP_EVENTS_PER_MINUTE: '2', SANDBOX_CALLBACK_DELAY_MS: '600000' });
    const registered = await gw.graphql(
      `mutation($input: RegisterVerificationInput!) { registerVerification(input: $input) { verification { externalId } } }`,
      { input: { workflowId: 'wf-kyc', applicant: { lastName: 'Tamm' } } },
      { key: SHOP },
    );
    expect(registered.errors).toBeUndefined();
    const id = registered.data!.registerVerification.verification.externalId as string;
    const url = gw.gateway.sandbox.verification!.verifications().find((v) => v.externalId === id)!.callbackUrl!;
    expect(await post(url, { status: 'A' })).toBe(204);
    for (let i = 0; i < 3; i++) expect(await post(url, { status: 'A' })).toBe(204);
    // Two events this minute with the second: the repeats counted nothing.
    expect(await post(url, { status: 'B' })).toBe(204);
    expect(await rows(gw, 'events')).toBe(2);
  });

  it('notifications kept pending verification count against the bound of the app a configured token is bound to', async () => {
    // The operator's JWKS is down (503): a notification with a valid token is kept pending, 204.
    const jwks = http.createServer((_req, res) => void res.writeHead(503).end());
    await new Promise<void>((r) => jwks.listen(0, '127.0.0.1', r));
    try {
      const bound = 'bound-shop-notification-token-0123456789';
      const gw = await start({
        ...KEYS,
        APP_EVENTS_PER_MINUTE: '2',
        SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
        MOBILEID_NOTIFICATION_TOKENS: `shop:${bound}`,
        MOBILEID_JWKS_URL: `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks`,
      });
      const { privateKey } = await generateKeyPair('ES256');
      const notification = async (authReqId: string) => {
        const accessToken = randomBytes(24).toString('base64url');
        const at_hash = createHash('sha256').update(accessToken).digest().subarray(0, 16).toString('base64url');
        const idToken = await new SignJWT({ sub: 'pcr-1', acr: '3', at_hash })
          .setProtectedHeader({ alg: 'ES256', kid: 'op-1' })
          .sign(privateKey);
        return {
          auth_req_id: authReqId,
          access_token: accessToken,
          token_type: 'Bearer',
          id_token: idToken,
          expires_in: 3600,
        };
      };
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++)
        statuses.push((await postNotification(gw, await notification(`pending-${i}`), { token: bound })).status);
      expect(statuses).toEqual([204, 204, 429]);
      const pending = await gw.gateway.services.store.db
        .selectFrom('mobile_id_pending')
        .select('auth_req_id')
        .execute();
      expect(pending.map((p) => p.auth_req_id).sort()).toEqual(['pending-0', 'pending-1']);
      const quarantined = await gw.graphql(
        `query { mobileIdRejections(first: 5) { authReqId reason } }`,
        {},
        { key: OPS },
      );
      expect(quarantined.data!.mobileIdRejections).toEqual([{ authReqId: 'pending-2', reason: 'STORAGE_BOUND' }]);
    } finally {
      await new Promise<void>((r) => jwks.close(() => r()));
    }
  });

  it('an app past its bound of bytes stored in all is refused until the purge gives its expired events back', async () => {
    const gw = await start({ ...KEYS, APP_EVENT_BYTES_STORED: '6000', EVENT_RETENTION: '1h' });
    const shop = await tokenOf(gw, SHOP);
    const crm = await tokenOf(gw, CRM);
    const run = randomUUID().slice(0, 8);
    const filler = { note: 'x'.repeat(2000) };
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++)
      statuses.push((await postNotification(gw, failure(`shop-${run}-${i}`, filler), { token: shop })).status);
    expect(statuses.filter((s) => s === 204).length).toBeGreaterThanOrEqual(1);
    expect(statuses.at(-1)).toBe(429);
    expect((await postNotification(gw, failure(`crm-${run}`, filler), { token: crm })).status).toBe(204);
    expect(
      await metric(gw, 'gateway_app_storage_refused_total', { app: 'shop', kind: 'events', bound: 'bytes' }),
    ).toBeGreaterThanOrEqual(1);

    // Past their retention the events are purged, and what they held is the app's again.
    await gw.gateway.services.events.log.purgeExpired(Date.now() + 2 * 3_600_000, {
      kinds: ['mobile-id'],
      release: (scope, n, chars) => gw.gateway.services.storage.release('events', scope, n, chars),
    });
    expect((await postNotification(gw, failure(`shop-${run}-after`, filler), { token: shop })).status).toBe(204);
  });

  it('a 60 KB unknown notification field is not stored: the notification is, with the fields that fit in 4 KiB, and the drop is counted', async () => {
    const gw = await start(KEYS);
    const shop = await tokenOf(gw, SHOP);
    const res = await postNotification(gw, failure('big-extra', { small: 'kept', huge: 'y'.repeat(60_000) }), {
      token: shop,
    });
    expect(res.status).toBe(204);
    const [row] = await gw.gateway.services.store.db
      .selectFrom('events')
      .select(['payload', 'meta'])
      .where('key', '=', 'big-extra')
      .execute();
    expect(row!.payload.length + row!.meta.length).toBeLessThan(2_000);
    const read = await gw.graphql(
      `query { mobileIdAuthentication(authReqId: "big-extra") { ... on MobileIdAuthenticationFailed { otherFields } } }`,
      {},
      { key: SHOP },
    );
    expect(read.data!.mobileIdAuthentication.otherFields).toEqual({ small: 'kept' });
    expect(await metric(gw, 'gateway_webhook_fields_dropped_total', { endpoint: 'mobile-id' })).toBe(1);
  });

  it('a callback body over 8 KiB is kept as its id, status and event kind with _truncated, and counted', async () => {
    const gw = await start(KEYS);
    const created = await gw.graphql(CREATE, { input: { workflowId: 'wf-big-body' } }, { key: SHOP });
    expect(created.errors).toBeUndefined();
    const link = created.data!.createIdentification.identification as { id: string; callbackUrl: string };
    const body = {
      identificationId: link.id,
      status: 'APPROVED',
      event: 'finished',
      documents: 'z'.repeat(1_000_000 - 200),
    };
    expect(await post(link.callbackUrl, body)).toBe(204);
    const [row] = await gw.gateway.services.store.db
      .selectFrom('events')
      .select(['payload', 'meta'])
      .where('kind', '=', 'identification')
      .where('key', '=', link.id)
      .execute();
    expect(row!.payload.length).toBeLessThan(1_000);
    const read = await gw.graphql(
      `query($id: ID!) { identification(id: $id) { status completion { status event payload } } }`,
      { id: link.id },
      { key: SHOP },
    );
    expect(read.data!.identification).toEqual({
      status: 'APPROVED',
      completion: {
        status: 'APPROVED',
        event: 'finished',
        payload: {
          identificationId: link.id,
          status: 'APPROVED',
          event: 'finished',
          _truncated: { bytes: expect.any(Number), keptBytes: 8192 },
        },
      },
    });
    expect(await metric(gw, 'gateway_webhook_fields_dropped_total', { endpoint: 'identification' })).toBe(1);
  });

  it('identificationCallbackUrl stores nothing: 100 queries write no row, the address takes callbacks once an identification of its workflow exists', async () => {
    const gw = await start(KEYS);
    const before = await rows(gw, 'identification_callbacks');
    const urls: string[] = [];
    for (let i = 0; i < 100; i++) {
      const res = await gw.graphql(CALLBACK_URL, { w: `wf-query-${i % 10}` }, { key: i % 2 ? SHOP : CRM });
      expect(res.errors).toBeUndefined();
      urls.push(res.data!.identificationCallbackUrl as string);
    }
    expect(await rows(gw, 'identification_callbacks')).toBe(before);
    // The same address every time, and one per app and workflow.
    expect(new Set(urls).size).toBe(10);

    const url = (await gw.graphql(CALLBACK_URL, { w: 'wf-query-1' }, { key: SHOP })).data!
      .identificationCallbackUrl as string;
    expect(await post(url, { identificationId: 'nothing-yet', status: 'DONE' })).toBe(404);
    const created = await gw.graphql(CREATE, { input: { workflowId: 'wf-query-1' } }, { key: SHOP });
    const link = created.data!.createIdentification.identification as { id: string; callbackUrl: string };
    expect(link.callbackUrl).toBe(url);
    expect(await rows(gw, 'identification_callbacks')).toBe(before + 1);
    expect(await post(url, { identificationId: link.id, status: 'DONE' })).toBe(204);
  });

  it('the upgrade deletes the address rows that only a query wrote, and keeps those of created identifications', async () => {
    const gw = await start(KEYS);
    const created = await gw.graphql(CREATE, { input: { workflowId: 'wf-kept' } }, { key: SHOP });
    expect(created.errors).toBeUndefined();
    const db = gw.gateway.services.store.db;
    // What a query wrote before this release: a row per app and workflow asked for, no identification behind it.
    await db
      .insertInto('identification_callbacks')
      .values([
        { token_hash: 'a'.repeat(64), workflow_id: 'wf-only-asked', created_by: 'app:shop', created_at: 1 },
        { token_hash: 'b'.repeat(64), workflow_id: 'wf-kept', created_by: 'app:crm', created_at: 1 },
      ])
      .execute();
    const migrations = await migrationProvider('sqlite').getMigrations();
    await migrations['011_callback_addresses_of_identifications']!.up(db);
    const left = await db.selectFrom('identification_callbacks').select(['workflow_id', 'created_by']).execute();
    expect(left).toEqual([{ workflow_id: 'wf-kept', created_by: 'app:shop' }]);
    const link = created.data!.createIdentification.identification as { id: string; callbackUrl: string };
    expect(await post(link.callbackUrl, { identificationId: link.id, status: 'DONE' })).toBe(204);
  });

  it('an app past its bound of callback addresses cannot create an identification of a new workflow (RATE_LIMITED, nothing sent upstream), while another app can', async () => {
    const gw = await start({ ...KEYS, APP_CALLBACK_ADDRESSES: '2' });
    for (const w of ['wf-a', 'wf-b', 'wf-a'])
      expect((await gw.graphql(CREATE, { input: { workflowId: w } }, { key: SHOP })).errors).toBeUndefined();
    const sent = (await rows(gw, 'identification_callbacks')) as number;
    const upstreamRequests = gw.gateway.sandbox.identification!.requests.length;
    const refused = await gw.graphql(CREATE, { input: { workflowId: 'wf-c' } }, { key: SHOP });
    expect(gw.gateway.sandbox.identification!.requests.length).toBe(upstreamRequests);
    expect(refused.errors?.[0]?.extensions).toMatchObject({
      code: 'RATE_LIMITED',
      bound: 'callback-addresses:rows',
      limit: 2,
      variable: 'APP_CALLBACK_ADDRESSES',
    });
    expect(await rows(gw, 'identification_callbacks')).toBe(sent);
    const ledger = await gw.gateway.services.store.db
      .selectFrom('resources')
      .select('title')
      .where('kind', '=', 'identification')
      .where('created_by', '=', 'app:shop')
      .execute();
    expect(ledger.map((r) => r.title).sort()).toEqual(['wf-a', 'wf-a', 'wf-b']);
    expect((await gw.graphql(CREATE, { input: { workflowId: 'wf-c' } }, { key: CRM })).errors).toBeUndefined();
  });

  it('an app past its bound of live notification tokens is RATE_LIMITED and stores none, while another app still issues', async () => {
    const gw = await start({ ...KEYS, APP_NOTIFICATION_TOKENS: '3' });
    for (let i = 0; i < 3; i++) await tokenOf(gw, SHOP);
    const before = await rows(gw, 'notification_tokens');
    const refused = await gw.graphql(ISSUE, {}, { key: SHOP });
    expect(refused.errors?.[0]?.extensions).toMatchObject({
      code: 'RATE_LIMITED',
      bound: 'notification-tokens:rows',
      limit: 3,
      variable: 'APP_NOTIFICATION_TOKENS',
    });
    expect(await rows(gw, 'notification_tokens')).toBe(before);
    await tokenOf(gw, CRM);
    expect(
      await metric(gw, 'gateway_app_storage_refused_total', {
        app: 'shop',
        kind: 'notification-tokens',
        bound: 'rows',
      }),
    ).toBe(1);

    // Expired tokens are purged and no longer count.
    await gw.gateway.services.mobileId.purgeExpired(Date.now() + 8 * 86_400_000);
    await tokenOf(gw, SHOP);
  });

  it('the totals are counted from the database at start: a restarted gateway still refuses an app at its bound', async () => {
    const first = await start({ ...KEYS, APP_NOTIFICATION_TOKENS: '2' });
    await tokenOf(first, SHOP);
    await tokenOf(first, SHOP);
    const dataDir = first.dataDir;
    await first.close();
    const again = await start({ ...KEYS, APP_NOTIFICATION_TOKENS: '2', DATA_DIR: dataDir });
    expect((await again.graphql(ISSUE, {}, { key: SHOP })).errors?.[0]?.extensions).toMatchObject({
      code: 'RATE_LIMITED',
    });
    await tokenOf(again, CRM);
  });
});
