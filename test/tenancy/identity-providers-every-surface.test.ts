// Tenancy across identity providers (docs/apps-and-security.md, "Several identity providers" and "What an app can and
// cannot learn about another"): two providers of AUTH_ISSUERS (one naming its client `billing`, one accepting any app
// name) and two API-key apps on one gateway. What each app created reads, for each of the others (one of them named
// like billing in another case), as an id that does not exist, on every GraphQL transport and through MCP; a stream
// resumed from a cursor another app's stream handed out (graphql-ws `after`, SSE Last-Event-ID, MCP's
// wait_for_events) replays none of that app's events; an agent's plan is unknown to them; /metrics names apps, never a
// token or a client id.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { createClient as createSseClient } from 'graphql-sse';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import { subscribe } from '../helpers/identity.js';
import {
  EVERY_APP_SCOPE,
  sign,
  signingKey,
  startJwksServer,
  type JwksServer,
  type SigningKey,
} from '../helpers/jwt.js';
import { mcpClientsPerTest, textOf } from '../helpers/mcp.js';
import { wsClient } from '../helpers/mobile-id.js';
import { operationOver, type Transport } from '../helpers/operation.js';
import { deliveredEverywhere, postCompletion } from '../helpers/resumable.js';
import { createdBy, NOTHING, READ, REGISTER } from '../helpers/tenancy.js';
import { waitFor } from '../helpers/wait.js';

const ENTRA = 'https://login.microsoftonline.com/5c1e0f4a-idp-one/v2.0';
const KEYCLOAK = 'https://keycloak.example.test/realms/partners';
const BILLING_CLIENT_ID = '0e6b1c2d-7a8f-4b3c-9d0e-1f2a3b4c5d6e';
const SHOP = 'key-idp-surface-shop-0123456789';
const CRM = 'key-idp-surface-crm-9876543210';

let entraKey: SigningKey;
let keycloakKey: SigningKey;
let jwks: JwksServer;
let gw: TestGateway;
/** Each app's credential: a token of its provider, or its key. */
const as: Record<string, string> = {};
const connect = mcpClientsPerTest();

beforeAll(async () => {
  entraKey = await signingKey('idp-one-kid', 'RS256');
  keycloakKey = await signingKey('idp-two-kid', 'ES256');
  jwks = await startJwksServer([entraKey]);
  const dir = tempDataDir('idp-surface-');
  fs.writeFileSync(path.join(dir, 'partners-jwks.json'), JSON.stringify({ keys: [keycloakKey.publicJwk] }));
  const file = path.join(dir, 'issuers.yaml');
  fs.writeFileSync(
    file,
    [
      'issuers:',
      `  - issuer: ${ENTRA}`,
      `    jwksUrl: ${jwks.url}`,
      '    audience: gateway-one',
      '    appClaim: azp',
      `    apps: ["${BILLING_CLIENT_ID}=billing"]`,
      `  - issuer: ${KEYCLOAK}`,
      '    jwksFile: partners-jwks.json',
      '    audience: [gateway-two]',
      '    apps: ["*"]',
      '',
    ].join('\n'),
  );
  gw = await startTestGateway({
    AUTH_ISSUERS: file,
    GATEWAY_API_KEYS: `shop:${SHOP},crm:${CRM}`,
    SANDBOX_CALLBACK_DELAY_MS: '600000',
    MCP_MUTATIONS: 'approve',
  });
  const scope = `openid ${EVERY_APP_SCOPE}`;
  as.billing = await sign(entraKey, { iss: ENTRA, aud: 'gateway-one', claims: { azp: BILLING_CLIENT_ID, scope } });
  as.portal = await sign(keycloakKey, { iss: KEYCLOAK, aud: 'gateway-two', claims: { azp: 'portal', scope } });
  as.Billing = await sign(keycloakKey, { iss: KEYCLOAK, aud: 'gateway-two', claims: { azp: 'Billing', scope } });
  as.shop = SHOP;
  as.crm = CRM;
  for (const [name, credential] of Object.entries(as)) {
    const ping = await gw.graphql('{ __typename }', undefined, { key: credential });
    expect(ping.errors, name).toBeUndefined();
  }
}, 60_000);
afterAll(async () => {
  await gw?.close();
  await jwks?.stop();
});

/** Ids of the same kinds that nothing holds. */
const unknownIds = () => {
  const id = randomUUID();
  return { v: [`customer-${id}`], vid: randomUUID(), i: id, m: `auth-${id}`, p: randomUUID() };
};

describe('what an app of one identity provider created, read by the other apps', () => {
  const owned: Record<string, Record<string, unknown>> = {};
  beforeAll(async () => {
    owned.billing = await createdBy(gw, as.billing!, {
      workflowId: 'wf-idp-b',
      project: 'idp-b',
      cidr: '10.71.0.0/24',
    });
    owned.shop = await createdBy(gw, as.shop!, { workflowId: 'wf-idp-s', project: 'idp-s', cidr: '10.72.0.0/24' });
    for (const owner of ['billing', 'shop']) {
      const mine = await gw.graphql(READ, owned[owner], { key: as[owner]! });
      expect(mine.errors, owner).toBeUndefined();
      expect(Object.values(mine.data!).flat(), owner).not.toContain(null);
    }
  }, 60_000);

  const cases = (['post', 'get', 'ws', 'sse', 'sse-single'] as Transport[]).flatMap((transport) => [
    ...['portal', 'Billing', 'shop', 'crm'].map((reader) => ({ owner: 'billing', reader, transport })),
    ...['billing', 'portal', 'Billing'].map((reader) => ({ owner: 'shop', reader, transport })),
  ]);
  it.each(cases)("$owner's, read by $reader over $transport: an unknown id's answer byte for byte", async (c) => {
    const theirs = await operationOver(c.transport, gw, as[c.reader]!, { query: READ, variables: owned[c.owner] });
    const unknown = await operationOver(c.transport, gw, as[c.reader]!, { query: READ, variables: unknownIds() });
    expect(theirs.data).toEqual(NOTHING);
    expect(theirs.raw).toBe(unknown.raw);
  });

  it("through MCP: billing's verification, identification and provisioning read by another provider's app as unknown ones", async () => {
    const uris = {
      verification: `identity://verifications/${(owned.billing!.v as string[])[0]}`,
      identification: `identity://identifications/${owned.billing!.i}`,
      provisioning: `cloud://provisionings/${owned.billing!.p}`,
    };
    const owner = await connect(gw, { key: as.billing! });
    for (const [kind, uri] of Object.entries(uris)) {
      expect((await owner.client.readResource({ uri })).contents[0]!.uri, kind).toBe(uri);
      for (const reader of ['portal', 'Billing', 'shop']) {
        const other = await connect(gw, { key: as[reader]! });
        const failed = (u: string) =>
          other.client.readResource({ uri: u }).then(
            () => 'read',
            (e: Error & { code?: number }) => `${e.code} ${e.message}`,
          );
        const id = uri.split('/').pop()!;
        const unknownId = kind === 'verification' ? `customer-${randomUUID()}` : randomUUID();
        const theirs = (await failed(uri)).replaceAll(id, '<id>');
        expect(theirs, `${kind} as ${reader}`).toMatch(/not found/i);
        expect(theirs).toBe((await failed(uri.replace(id, unknownId))).replaceAll(unknownId, '<id>'));
      }
    }
  });
});

describe("a stream resumed from a cursor another app's stream handed out", () => {
  const KEYED = `subscription($id: ID, $after: String) { verificationCompleted(externalId: $id, after: $after) { externalId payload } }`;
  const externalId = `customer-${randomUUID()}`;
  /** The callback address of each app's verification of `externalId`, and the id the upstream knows it by. */
  const callbacks = new Map<string, { url: string; sentId: string }>();
  /** The cursor billing's own stream handed out with its first event, before its second. */
  let theirCursor: string;

  beforeAll(async () => {
    // billing and portal (two providers) use one externalId, so one event key: only the owner check tells them apart.
    for (const app of ['billing', 'portal']) {
      const input = { workflowId: 'wf-kyc', applicant: { lastName: 'Ivanova' }, externalId };
      const res = await gw.graphql(REGISTER, { input }, { key: as[app]! });
      expect(res.errors).toBeUndefined();
      const sentId = res.data!.registerVerification.verification.id as string;
      const url = gw.gateway.sandbox.verification!.verifications().find((v) => v.externalId === sentId)!.callbackUrl!;
      callbacks.set(app, { url, sentId });
    }
    const client = wsClient(gw, { key: as.billing! });
    try {
      const events: string[] = [];
      client.subscribe(
        { query: KEYED, variables: { id: externalId } },
        {
          next: (v) => void events.push((v.extensions as { cursor: string }).cursor),
          error: () => undefined,
          complete: () => undefined,
        },
      );
      await waitFor(() => gw.gateway.services.events.bus.subscribers('verification') >= 1, 20_000, 'billing listening');
      await postCompletion(callbacks.get('billing')!.url, callbacks.get('billing')!.sentId, 'b1');
      await waitFor(() => events.length === 1, 20_000, "billing's first event");
      theirCursor = events[0]!;
    } finally {
      await client.dispose();
    }
    await postCompletion(callbacks.get('billing')!.url, callbacks.get('billing')!.sentId, 'b2');
    await deliveredEverywhere(gw);
  }, 60_000);

  it('billing resuming from its own cursor gets its second event (the cursor is one that replays)', async () => {
    const client = wsClient(gw, { key: as.billing! });
    try {
      const own = subscribe(client, KEYED, { id: externalId, after: theirCursor });
      await waitFor(() => own.received.length === 1, 20_000, "billing's replay");
      expect(own.received[0].verificationCompleted.payload.n).toBe('b2');
    } finally {
      await client.dispose();
    }
  });

  it("portal (another provider) over graphql-ws (after) and SSE in both forms (after, Last-Event-ID) with billing's cursor gets only its own event", async () => {
    const ws = wsClient(gw, { key: as.portal! });
    const received: unknown[][] = [[], [], []];
    const keyed = subscribe(ws, KEYED, { id: externalId, after: theirCursor });
    const every = subscribe(ws, KEYED, { after: theirCursor });
    const resumes: Array<{ variables: Record<string, unknown>; headers: Record<string, string> }> = [
      { variables: { id: externalId, after: theirCursor }, headers: {} },
      { variables: {}, headers: { 'last-event-id': theirCursor } },
      { variables: { id: externalId }, headers: { 'last-event-id': theirCursor } },
    ];
    const sse = resumes.map(({ variables, headers }, i) => {
      const client = createSseClient({
        url: `${gw.url}/graphql/stream`,
        singleConnection: false,
        retryAttempts: 0,
        headers: { authorization: `Bearer ${as.portal}`, ...headers },
      });
      client.subscribe(
        { query: KEYED, variables },
        {
          next: (v) => void received[i]!.push((v.data as any)?.verificationCompleted ?? v),
          error: (e) => void received[i]!.push(e),
          complete: () => undefined,
        },
      );
      return client;
    });
    try {
      await waitFor(() => gw.gateway.services.events.bus.subscribers('verification') >= 5, 20_000, 'portal listening');
      await postCompletion(callbacks.get('portal')!.url, callbacks.get('portal')!.sentId, 'p1');
      const firsts = [
        () => keyed.received[0]?.verificationCompleted,
        () => every.received[0]?.verificationCompleted,
        ...received.map((r) => () => r[0]),
      ];
      for (const first of firsts)
        expect(await waitFor(first, 20_000, "portal's own event")).toMatchObject({ externalId, payload: { n: 'p1' } });
      expect([...keyed.errors, ...every.errors]).toEqual([]);
    } finally {
      for (const c of sse) c.dispose();
      await ws.dispose();
    }
  });

  it("MCP wait_for_events with billing's cursor returns portal's own events only", async () => {
    const other = await connect(gw, { key: as.portal! });
    const events = (await other.call('wait_for_events', { cursor: theirCursor, timeoutSeconds: 0 })).structuredContent!
      .events as { uri: string }[];
    expect(events.map((e) => e.uri)).toEqual([`identity://verifications/${externalId}`]);
    const owner = await connect(gw, { key: as.billing! });
    const own = (await owner.call('wait_for_events', { cursor: theirCursor, timeoutSeconds: 0 })).structuredContent!
      .events as { uri: string }[];
    expect(own.map((e) => e.uri)).toEqual([`identity://verifications/${externalId}`]);
  });

  it('/metrics names each app, never a token, a key or a client id', async () => {
    const text = await (await request(`${gw.url}/metrics`)).body.text();
    for (const [name, credential] of Object.entries(as)) {
      expect(text, name).not.toContain(credential);
      expect(text, name).not.toContain(credential.split('.')[2] ?? credential);
    }
    expect(text).not.toContain(BILLING_CLIENT_ID);
    expect(text).toMatch(/app="billing"/);
    expect(text).toMatch(/app="portal"/);
  });
});

describe("an agent's plan, asked of by another provider's app", () => {
  it("execute_plan and node(id) name billing's plan as they name a plan that does not exist", async () => {
    const agent = await connect(gw, { key: as.billing! });
    const planned = await agent.call('create_identification', { input: { workflowId: 'wf-idp-plan' } });
    expect(planned.isError, textOf(planned)).toBeFalsy();
    const plan = planned.structuredContent!.planId as string;
    const unknown = randomUUID();
    for (const reader of ['portal', 'Billing', 'shop']) {
      const other = await connect(gw, { key: as[reader]! });
      const run = async (id: string) => textOf(await other.call('execute_plan', { planId: id })).replaceAll(id, '<id>');
      expect(await run(plan), reader).toBe(await run(unknown));
      const read = async (id: string) =>
        JSON.stringify(
          await gw.graphql('query($id: ID!) { node(id: $id) { id } }', { id }, { key: as[reader]! }),
        ).replaceAll(id, '<id>');
      expect(await read(plan), reader).toBe(await read(unknown));
    }
  });
});
