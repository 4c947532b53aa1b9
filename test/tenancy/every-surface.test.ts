// Tenancy at every seam (docs/apps-and-security.md, "What an app can and cannot learn about another"): what one app
// created that holds personal data reads, for another app, exactly as an id that does not exist, on every transport
// that reaches it: POST /graphql on the direct path and on Apollo's, GET, graphql-ws, SSE in both modes; subscriptions
// resumed from a cursor (`after`, Last-Event-ID) replay none of another app's events; and another app's reserved SSE
// stream is a token that names no stream. MCP's surfaces: test/tenancy/mcp-surfaces.test.ts.
import { randomUUID } from 'node:crypto';
import { createClient as createSseClient } from 'graphql-sse';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { subscribe } from '../helpers/identity.js';
import { wsClient } from '../helpers/mobile-id.js';
import { operationOver, type Transport } from '../helpers/operation.js';
import { cursorNow, deliveredEverywhere, postCompletion } from '../helpers/resumable.js';
import { createdBy, NOTHING, READ, REGISTER } from '../helpers/tenancy.js';
import { waitFor } from '../helpers/wait.js';

const A = 'key-surface-app-a-0123456789';
const B = 'key-surface-app-b-9876543210';
const KEYS = { GATEWAY_API_KEYS: `${A},${B}`, SANDBOX_CALLBACK_DELAY_MS: '600000' };

const PROGRESS = `subscription($id: ID!) { provisioningProgress(id: $id) { id state } }`;

/** Ids of the same kinds that nothing holds. */
const unknownIds = () => {
  const id = randomUUID();
  return { v: [`customer-${id}`], vid: randomUUID(), i: id, m: `auth-${id}`, p: randomUUID() };
};

describe.each([
  { path: 'the direct path', options: {}, transports: ['post', 'get', 'ws', 'sse', 'sse-single'] as Transport[] },
  { path: "Apollo's path", options: { testing: { directPath: false } }, transports: ['post'] as Transport[] },
])("another app's personal data reads as an unknown id, POST /graphql on $path", ({ options, transports }) => {
  let gw: TestGateway;
  let owned: Record<string, unknown>;
  beforeAll(async () => {
    gw = await startTestGateway(KEYS, options);
    owned = await createdBy(gw, A, { workflowId: 'wf-surface', project: 'surface', cidr: '10.61.0.0/24' });
    const mine = await gw.graphql(READ, owned, { key: A });
    expect(mine.errors).toBeUndefined();
    expect(Object.values(mine.data!).flat()).not.toContain(null);
  }, 60_000);
  afterAll(() => gw?.close());

  it.each(transports)('over %s: null for each kind, the answer of an unknown id byte for byte', async (transport) => {
    const theirs = await operationOver(transport, gw, B, { query: READ, variables: owned });
    const unknown = await operationOver(transport, gw, B, { query: READ, variables: unknownIds() });
    expect(theirs.data).toEqual(NOTHING);
    expect(theirs.raw).toBe(unknown.raw);
  });

  it.each(transports.filter((t) => t !== 'post' && t !== 'get'))(
    "over %s, provisioningProgress of another app's provisioning ends with an unknown id's NOT_FOUND",
    async (transport) => {
      const id = owned.p as string;
      const unknownId = randomUUID();
      const theirs = await operationOver(transport, gw, B, { query: PROGRESS, variables: { id } });
      const unknown = await operationOver(transport, gw, B, { query: PROGRESS, variables: { id: unknownId } });
      expect(theirs.raw).toContain('NOT_FOUND');
      expect(theirs.raw.replaceAll(id, '<id>')).toBe(unknown.raw.replaceAll(unknownId, '<id>'));
    },
  );
});

describe('subscriptions resumed from a cursor replay none of another app’s events', () => {
  const KEYED = `subscription($id: ID, $after: String) { verificationCompleted(externalId: $id, after: $after) { externalId payload } }`;
  let gw: TestGateway;
  const externalId = `customer-${randomUUID()}`;
  /** The callback address of each app's verification of `externalId`, and the id the upstream knows it by. */
  const callbacks = new Map<string, { url: string; sentId: string }>();
  let before: string;

  beforeAll(async () => {
    gw = await startTestGateway(KEYS);
    // Both apps use one externalId, so one event key: only the owner check tells their events apart.
    for (const key of [A, B]) {
      const input = { workflowId: 'wf-kyc', applicant: { lastName: 'Ivanova' }, externalId };
      const res = await gw.graphql(REGISTER, { input }, { key });
      expect(res.errors).toBeUndefined();
      const sentId = res.data!.registerVerification.verification.id as string;
      const url = gw.gateway.sandbox.verification!.verifications().find((v) => v.externalId === sentId)!.callbackUrl!;
      callbacks.set(key, { url, sentId });
    }
    before = cursorNow(gw);
    for (const n of ['a1', 'a2']) await postCompletion(callbacks.get(A)!.url, callbacks.get(A)!.sentId, n);
    await deliveredEverywhere(gw);
  });
  afterAll(() => gw?.close());

  /** B's own event, posted once `started` (each subscription B holds) is listening: each must get it first. */
  async function ownEventFirst(started: Array<{ first: () => unknown }>, listening: () => boolean): Promise<void> {
    await waitFor(listening, 20_000, "B's subscriptions listening");
    await postCompletion(callbacks.get(B)!.url, callbacks.get(B)!.sentId, 'b1');
    for (const s of started) {
      const first = (await waitFor(s.first, 20_000, "B's own event")) as { payload: { n: string } };
      expect(first).toMatchObject({ externalId, payload: { n: 'b1' } });
    }
  }

  it('over graphql-ws, with after: keyed and over every id; the owner resuming from the same cursor gets its own', async () => {
    const client = wsClient(gw, { key: B });
    const owner = wsClient(gw, { key: A });
    try {
      const own = subscribe(owner, KEYED, { id: externalId, after: before });
      await waitFor(() => own.received.length === 2, 20_000, "the owner's replay");
      expect(own.received.map((r) => r.verificationCompleted.payload.n)).toEqual(['a1', 'a2']);
      const keyed = subscribe(client, KEYED, { id: externalId, after: before });
      const every = subscribe(client, KEYED, { after: before });
      await ownEventFirst(
        [keyed, every].map((s) => ({ first: () => s.received[0]?.verificationCompleted })),
        () => gw.gateway.services.events.bus.subscribers('verification') >= 3,
      );
      expect([...keyed.errors, ...every.errors]).toEqual([]);
    } finally {
      await Promise.all([client.dispose(), owner.dispose()]);
    }
  });

  it('over SSE, with after and with Last-Event-ID: keyed and over every id', async () => {
    const received: unknown[][] = [[], [], []];
    const resumes: Array<{ variables: Record<string, unknown>; headers: Record<string, string> }> = [
      { variables: { id: externalId, after: before }, headers: {} },
      { variables: { after: before }, headers: {} },
      { variables: {}, headers: { 'last-event-id': before } },
    ];
    const clients = resumes.map(({ variables, headers }, i) => {
      const client = createSseClient({
        url: `${gw.url}/graphql/stream`,
        singleConnection: false,
        retryAttempts: 0,
        headers: { authorization: `Bearer ${B}`, ...headers },
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
      await ownEventFirst(
        received.map((r) => ({ first: () => r[0] })),
        () => gw.gateway.services.events.bus.subscribers('verification') >= 3,
      );
    } finally {
      for (const c of clients) c.dispose();
    }
  });
});

describe("another app's reserved SSE stream", () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway(KEYS);
  });
  afterAll(() => gw?.close());

  const TOKEN = 'x-graphql-event-stream-token';
  /** One request to /graphql/stream with `token`, as B: what B can observe of it, the token itself left out. */
  async function asB(method: string, token: string): Promise<{ status: number; type: unknown; body: string }> {
    const query = encodeURIComponent('{ __typename }');
    const res = await request(
      `${gw.url}/graphql/stream${method === 'GET' ? `?query=${query}` : method === 'DELETE' ? '?operationId=x' : ''}`,
      {
        method: method as 'GET',
        headers: {
          authorization: `Bearer ${B}`,
          [TOKEN]: token,
          accept: method === 'GET' ? 'text/event-stream' : method === 'PUT' ? 'text/plain' : 'application/json',
          ...(method === 'POST' ? { 'content-type': 'application/json' } : {}),
        },
        ...(method === 'POST'
          ? { body: JSON.stringify({ query: '{ __typename }', extensions: { operationId: 'x' } }) }
          : {}),
      },
    );
    const body = (await res.body.text()).replaceAll(token, '<token>');
    return { status: res.statusCode, type: res.headers['content-type'], body };
  }

  it.each(['POST', 'DELETE', 'GET'])(
    "%s with another app's stream token is answered as with a token that names no stream",
    async (method) => {
      const put = await request(`${gw.url}/graphql/stream`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${A}` },
      });
      expect(put.statusCode).toBe(201);
      const theirs = await put.body.text();

      const answered = await asB(method, theirs);
      expect(answered).toEqual(await asB(method, randomUUID()));

      // The owner's stream is as it was: A still adds an operation to it.
      const own = await request(`${gw.url}/graphql/stream`, {
        method: 'POST',
        headers: { authorization: `Bearer ${A}`, 'content-type': 'application/json', [TOKEN]: theirs },
        body: JSON.stringify({ query: '{ __typename }', extensions: { operationId: 'mine' } }),
      });
      expect(own.statusCode).toBe(202);
      await own.body.text();
    },
  );

  it("PUT with another app's stream token reserves a new stream under a new token, as with any other token", async () => {
    const put = await request(`${gw.url}/graphql/stream`, { method: 'PUT', headers: { authorization: `Bearer ${A}` } });
    const theirs = await put.body.text();
    const answered = await asB('PUT', theirs);
    const unknown = await asB('PUT', randomUUID());
    for (const a of [answered, unknown]) {
      expect(a).toMatchObject({ status: 201, type: 'text/plain; charset=utf-8' });
      expect(a.body).toMatch(/^[0-9a-f-]{36}$/);
    }
  });
});

describe("webhooks: an app's own callback address names none of another app's identifications", () => {
  it("a callback to B's address of a workflow A uses too, naming A's identification, is an unknown id's 404, and A's identification is unchanged", async () => {
    const gw = await startTestGateway(KEYS);
    try {
      const IDENTIFY_SHARED = `mutation { createIdentification(input: { workflowId: "wf-shared" }) { identification { id } } }`;
      const theirs = (await gw.graphql(IDENTIFY_SHARED, {}, { key: A })).data!.createIdentification.identification.id;
      expect((await gw.graphql(IDENTIFY_SHARED, {}, { key: B })).errors).toBeUndefined();
      const address = (await gw.graphql('{ identificationCallbackUrl(workflowId: "wf-shared") }', {}, { key: B })).data!
        .identificationCallbackUrl as string;
      const post = async (id: string) => {
        const res = await request(address, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ identificationId: id, status: 'COMPLETED' }),
        });
        const body = (await res.body.text()).replaceAll(id, '<id>');
        return { status: res.statusCode, type: res.headers['content-type'], body };
      };
      const answered = await post(theirs as string);
      expect(answered.status).toBe(404);
      expect(answered).toEqual(await post(randomUUID()));
      const completion = await gw.graphql(
        'query($id: ID!) { identification(id: $id) { completion { status } } }',
        { id: theirs },
        { key: A },
      );
      expect(completion.data).toEqual({ identification: { completion: null } });
    } finally {
      await gw.close();
    }
  });
});
