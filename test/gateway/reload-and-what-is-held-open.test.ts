// What a credential holds open across a reload (docs/operations.md, "Reloading the configuration"): one real gateway
// with an apps file (API keys) and AUTH_ISSUERS (two identity providers), both rewritten between steps. Each
// credential holds every kind of stream at once: a graphql-ws subscription, an SSE subscription in each mode (a
// distinct connection, and a reserved stream), a subscriptions/listen stream and a wait_for_events call over MCP.
// A reload that fails ends none of them; one that removes an identity provider ends what its tokens hold, and only that.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { createClient as createSseClient } from 'graphql-sse';
import { request } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';

import { startTestGateway, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import { AUDIENCE, sign, signingKey, startJwksServer, type JwksServer, type SigningKey } from '../helpers/jwt.js';
import { mcpClient, type TestMcpClient } from '../helpers/mcp.js';
import { collect, wsClient, type Collected } from '../helpers/mobile-id.js';
import { subscribers, waitFor } from '../helpers/wait.js';

const SHOP_KEY = 'shop-key-0123456789abcdef';
const SRE_KEY = 'sre-key-0123456789abcdef';
const STAFF_ISSUER = 'https://staff-idp.example.test/realms/staff';
const PARTNER_ISSUER = 'https://partner-idp.example.test/realms/partners';
const DESK_ISSUER = 'https://desk-idp.example.test/realms/desk';
const REGISTER = `mutation { registerVerification(input: { workflowId: "wf-kyc", applicant: { lastName: "Petrova" } }) {
  verification { externalId }
} }`;
const COMPLETED = `subscription($id: ID) { verificationCompleted(externalId: $id) { externalId status } }`;

const digest = (key: string) => createHash('sha256').update(key).digest('hex');
const apps = (shopScopes = 'identity:read, identity:write') =>
  [
    'apps:',
    '  - name: shop',
    `    scopes: [${shopScopes}]`,
    `    keys: [{ sha256: ${digest(SHOP_KEY)} }]`,
    '  - name: sre',
    '    scopes: [operator]',
    `    keys: [{ sha256: ${digest(SRE_KEY)} }]`,
    '',
  ].join('\n');
/** The providers: staff and partner keep their keys in files, desk serves them at a URL (`deskJwks`'s by default). */
const issuers = (o: { staff?: boolean; desk?: { url: string; apps: string } } = {}) =>
  [
    'issuers:',
    `  - issuer: ${DESK_ISSUER}`,
    `    jwksUrl: ${o.desk?.url ?? deskJwks.url}`,
    `    audience: ${AUDIENCE}`,
    `    apps: [${o.desk?.apps ?? 'desk'}]`,
    ...((o.staff ?? true)
      ? [
          `  - issuer: ${STAFF_ISSUER}`,
          '    jwksFile: staff-jwks.json',
          `    audience: ${AUDIENCE}`,
          '    apps: [portal]',
        ]
      : []),
    `  - issuer: ${PARTNER_ISSUER}`,
    '    jwksFile: partner-jwks.json',
    `    audience: ${AUDIENCE}`,
    '    apps: [kiosk]',
    '',
  ].join('\n');

/** Every kind of stream one credential holds open, each on its own verification's result. */
interface Held {
  id: string;
  streams: { ws: Collected; sseDistinct: Collected; sseReserved: Collected };
  listen: { closed: Promise<unknown> };
  updated: string[];
  wait: Promise<Awaited<ReturnType<TestMcpClient['call']>>>;
  close(): Promise<void>;
}

let t: TestGateway;
let dir: string;
let staffKey: SigningKey;
let partnerKey: SigningKey;
let deskKey: SigningKey;
let deskJwks: JwksServer;

async function reload(): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await request(`${t.url}/admin/reload`, {
    method: 'POST',
    headers: { authorization: `Bearer ${SRE_KEY}` },
  });
  return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> };
}

/** Registers a verification with `credential`, and opens every kind of stream on its result with it. */
async function holdOpen(credential: string): Promise<Held> {
  const registered = await t.graphql(REGISTER, {}, { key: credential });
  expect(registered.errors).toBeUndefined();
  const id = registered.data!.registerVerification.verification.externalId as string;
  const ws = wsClient(t, { key: credential });
  const sse = [false, true].map((singleConnection) =>
    createSseClient({
      url: `${t.url}/graphql/stream`,
      singleConnection,
      retryAttempts: 0,
      headers: { authorization: `Bearer ${credential}` },
    }),
  );
  const mcp = await mcpClient(t, { key: credential });
  const streams = {
    ws: collect(ws, COMPLETED, { id }),
    sseDistinct: collect(sse[0]!, COMPLETED, { id }),
    sseReserved: collect(sse[1]!, COMPLETED, { id }),
  };
  const uri = `identity://verifications/${id}`;
  const updated: string[] = [];
  mcp.client.setNotificationHandler('notifications/resources/updated', (n) => void updated.push(n.params.uri));
  const listen = await mcp.client.listen({ resourceSubscriptions: [uri] });
  const waitingBefore = subscribers(t, 'verification', null);
  const cursor = (await mcp.call('wait_for_events', { kinds: ['verification'], timeoutSeconds: 0 })).structuredContent!
    .cursor as string;
  const wait = mcp.call('wait_for_events', { cursor, kinds: ['verification'], timeoutSeconds: 300 });
  await waitFor(() => subscribers(t, 'verification', id) === 4, 20_000, 'every stream listening');
  await waitFor(() => subscribers(t, 'verification', null) > waitingBefore, 20_000, 'the wait listening');
  return {
    id,
    streams,
    listen,
    updated,
    wait,
    async close() {
      for (const s of Object.values(streams)) s.stop();
      await ws.dispose();
      for (const c of sse) c.dispose();
      await mcp.close();
    },
  };
}

const ended = (s: Collected) => s.completed() || s.errors.length > 0;

/** Every stream `held` holds received its verification's result, and none ended. */
async function expectAllReceive(held: Held): Promise<void> {
  await t.gateway.sandbox.verification!.complete(held.id);
  const streams = Object.values(held.streams);
  await waitFor(() => streams.every((s) => s.results.length > 0 || ended(s)), 20_000, 'each stream to receive');
  for (const s of streams) {
    expect(s.errors).toEqual([]);
    expect(s.results.map((r) => r.data?.verificationCompleted?.externalId)).toEqual([held.id]);
  }
  const waited = await held.wait;
  expect(waited.isError).toBeFalsy();
  expect((waited.structuredContent!.events as { key: string }[]).map((e) => e.key)).toEqual([held.id]);
  await waitFor(() => held.updated.length > 0, 20_000, 'the listen stream notified');
  expect(held.updated).toEqual([`identity://verifications/${held.id}`]);
}

beforeAll(async () => {
  dir = tempDataDir('held-open-');
  staffKey = await signingKey('staff-1');
  partnerKey = await signingKey('partner-1');
  deskKey = await signingKey('desk-1');
  deskJwks = await startJwksServer([deskKey]);
  fs.writeFileSync(path.join(dir, 'staff-jwks.json'), JSON.stringify({ keys: [staffKey.publicJwk] }));
  fs.writeFileSync(path.join(dir, 'partner-jwks.json'), JSON.stringify({ keys: [partnerKey.publicJwk] }));
  fs.writeFileSync(path.join(dir, 'apps.yaml'), apps());
  fs.writeFileSync(path.join(dir, 'issuers.yaml'), issuers());
  t = await startTestGateway({
    GATEWAY_APPS_FILE: path.join(dir, 'apps.yaml'),
    AUTH_ISSUERS: path.join(dir, 'issuers.yaml'),
    SANDBOX_CALLBACK_DELAY_MS: '600000',
  });
});
afterAll(async () => {
  await t?.close();
  await deskJwks?.stop();
});
beforeEach(async () => {
  fs.writeFileSync(path.join(dir, 'apps.yaml'), apps());
  fs.writeFileSync(path.join(dir, 'issuers.yaml'), issuers());
  expect((await reload()).status).toBe(200);
});

describe('a reload that fails (422 reload_failed)', () => {
  it('ends nothing a key or a token holds open, on any transport, though the files also remove the key and the provider', async () => {
    const staffToken = await sign(staffKey, { iss: STAFF_ISSUER, claims: { azp: 'portal' } });
    const held = [await holdOpen(SHOP_KEY), await holdOpen(staffToken)];
    try {
      // Good changes that would end all of it, beside a bad file: none may be applied.
      fs.writeFileSync(path.join(dir, 'issuers.yaml'), issuers({ staff: false }));
      fs.writeFileSync(path.join(dir, 'apps.yaml'), apps('identity:read, identity:teleport'));
      const res = await reload();
      expect(res.status).toBe(422);
      expect(res.body).toMatchObject({ error: 'reload_failed', variable: 'GATEWAY_APPS_FILE' });
      expect((await t.graphql('{ __typename }', {}, { key: SHOP_KEY })).status).toBe(200);
      expect((await t.graphql('{ __typename }', {}, { key: staffToken })).status).toBe(200);
      for (const h of held) expect(Object.values(h.streams).map(ended)).toEqual([false, false, false]);
      for (const h of held) await expectAllReceive(h);
    } finally {
      for (const h of held) await h.close();
    }
  });
});

describe('a reload that removes an identity provider', () => {
  it("ends what its tokens hold open on every transport before their next event; another provider's token and a key keep theirs", async () => {
    const staffToken = await sign(staffKey, { iss: STAFF_ISSUER, claims: { azp: 'portal' } });
    const partnerToken = await sign(partnerKey, { iss: PARTNER_ISSUER, claims: { azp: 'kiosk' } });
    const removed = await holdOpen(staffToken);
    const kept = [await holdOpen(partnerToken), await holdOpen(SHOP_KEY)];
    try {
      fs.writeFileSync(path.join(dir, 'issuers.yaml'), issuers({ staff: false }));
      expect((await reload()).status).toBe(200);
      expect((await t.graphql('{ __typename }', {}, { key: staffToken })).status).toBe(401);

      const streams = Object.values(removed.streams);
      await waitFor(() => streams.every(ended), 20_000, "the removed provider's streams to end");
      expect(removed.streams.ws.errors).toEqual([
        expect.objectContaining({ code: 4403, reason: expect.stringMatching(/configuration was reloaded/) }),
      ]);
      for (const s of [removed.streams.sseDistinct, removed.streams.sseReserved])
        expect(s.results).toEqual([
          {
            errors: [
              expect.objectContaining({
                message: expect.stringMatching(/\(the configuration was reloaded\): the subscription has ended/),
                extensions: { code: 'UNAUTHENTICATED' },
              }),
            ],
          },
        ]);
      const waited = await removed.wait;
      expect(waited.structuredContent).toMatchObject({
        errors: [{ code: 'UNAUTHENTICATED' }],
        cursor: expect.any(String),
      });
      expect(await removed.listen.closed).toBe('remote');
      await waitFor(() => subscribers(t, 'verification', removed.id) === 0, 20_000, 'the ended streams to leave');

      // Its verification's result reaches none of them; the kept credentials' streams each receive theirs.
      await t.gateway.sandbox.verification!.complete(removed.id);
      for (const h of kept) await expectAllReceive(h);
      expect(streams.map((s) => s.results.filter((r) => r.data))).toEqual([[], [], []]);
      expect(removed.updated).toEqual([]);
    } finally {
      await removed.close();
      for (const h of kept) await h.close();
    }
  });
});

describe('a reload after which a held token is checked against keys still being fetched', () => {
  it('delivers nothing to what the token holds open meanwhile, and ends it when the new configuration refuses it', async () => {
    // The provider moved its keys to a new address, and the same reload takes the app desk off its apps: a token's
    // check awaits the new address's first answer, which is held here.
    const moved = await startJwksServer([deskKey]);
    try {
      const deskToken = await sign(deskKey, { iss: DESK_ISSUER, claims: { azp: 'desk' } });
      const removed = await holdOpen(deskToken);
      const kept = await holdOpen(SHOP_KEY);
      try {
        moved.hold();
        fs.writeFileSync(path.join(dir, 'issuers.yaml'), issuers({ desk: { url: moved.url, apps: 'kiosk-desk' } }));
        expect((await reload()).status).toBe(200);
        await waitFor(() => moved.requests > 0, 20_000, 'the check to await the moved keys');
        // An event for what the token holds, while its check is pending: delivered by the key's streams only.
        await t.gateway.sandbox.verification!.complete(removed.id);
        await expectAllReceive(kept);
        moved.release();
        const streams = Object.values(removed.streams);
        await waitFor(() => streams.every(ended), 20_000, "the refused token's streams to end");
        expect(streams.map((s) => s.results.filter((r) => r.data))).toEqual([[], [], []]);
        expect((await removed.wait).structuredContent).toMatchObject({ errors: [{ code: 'UNAUTHENTICATED' }] });
        expect(await removed.listen.closed).toBe('remote');
        expect(removed.updated).toEqual([]);
      } finally {
        moved.release();
        await removed.close();
        await kept.close();
      }
    } finally {
      await moved.stop();
    }
  });

  it('holds back what reaches a token meanwhile, in order, and delivers it once the new configuration accepts the token', async () => {
    // The provider moved its keys, and the app desk stays on its apps: the token is accepted once the keys come.
    const moved = await startJwksServer([deskKey]);
    try {
      const deskToken = await sign(deskKey, { iss: DESK_ISSUER, claims: { azp: 'desk' } });
      const accepted = await holdOpen(deskToken);
      const kept = await holdOpen(SHOP_KEY);
      let waited = false;
      void accepted.wait.then(() => (waited = true));
      try {
        moved.hold();
        fs.writeFileSync(path.join(dir, 'issuers.yaml'), issuers({ desk: { url: moved.url, apps: 'desk' } }));
        expect((await reload()).status).toBe(200);
        await waitFor(() => moved.requests > 0, 20_000, 'the check to await the moved keys');
        // Its event, while its check is pending, then the key's: the key's streams receive theirs, the token's nothing.
        await t.gateway.sandbox.verification!.complete(accepted.id);
        await expectAllReceive(kept);
        const streams = Object.values(accepted.streams);
        expect(streams.map((s) => s.results)).toEqual([[], [], []]);
        expect(streams.map(ended)).toEqual([false, false, false]);
        expect(accepted.updated).toEqual([]);
        expect(waited).toBe(false);

        moved.release();
        await waitFor(() => streams.every((s) => s.results.length > 0), 20_000, "the token's streams to receive");
        for (const s of streams) {
          expect(s.errors).toEqual([]);
          expect(s.results.map((r) => r.data?.verificationCompleted?.externalId)).toEqual([accepted.id]);
        }
        // One event, with one cursor wherever it went.
        expect(new Set(streams.map((s) => s.results[0]!.extensions?.cursor)).size).toBe(1);
        const page = (await accepted.wait).structuredContent!;
        expect((page.events as { key: string }[]).map((e) => e.key)).toEqual([accepted.id]);
        await waitFor(() => accepted.updated.length > 0, 20_000, 'the listen stream notified');
        expect(accepted.updated).toEqual([`identity://verifications/${accepted.id}`]);
        expect(streams.map(ended)).toEqual([false, false, false]);
      } finally {
        moved.release();
        await accepted.close();
        await kept.close();
      }
    } finally {
      await moved.stop();
    }
  });
});
