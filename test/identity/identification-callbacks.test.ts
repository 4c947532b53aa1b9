import { randomUUID } from 'node:crypto';
import type { Client } from 'graphql-ws';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { IDENTIFICATION_EVENT_KIND as KIND } from '../../src/identity/completions.js';
import type { IdentificationSandbox } from '../../src/sandbox/identification.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { subscribe, subscriptionsOnBus } from '../helpers/identity.js';
import { wsClient } from '../helpers/mobile-id.js';
import { subscribers, waitFor } from '../helpers/wait.js';

const CREATE = /* GraphQL */ `
  mutation Create($input: CreateIdentificationInput!) {
    createIdentification(input: $input) {
      identification {
        id
        workflowId
        callbackUrl
        status
      }
    }
  }
`;

const COMPLETED = /* GraphQL */ `
  subscription Completed($id: ID) {
    identificationCompleted(id: $id) {
      id
      status
      event
      payload
      receivedAt
      identification {
        id
        workflowId
        status
      }
    }
  }
`;

const CALLBACK_URL = /* GraphQL */ `
  query ($workflowId: String!) {
    identificationCallbackUrl(workflowId: $workflowId)
  }
`;

async function post(url: string, body: string | Buffer, contentType = 'application/json') {
  const res = await request(url, { method: 'POST', headers: { 'content-type': contentType }, body });
  const text = await res.body.text();
  return { status: res.statusCode, body: text ? (JSON.parse(text) as Record<string, unknown>) : undefined };
}

const settled = (t: TestGateway, ...keys: (string | null)[]) => subscriptionsOnBus(t, KIND, ...keys);

async function eventCount(t: TestGateway, id?: string): Promise<number> {
  let q = t.gateway.services.store.db
    .selectFrom('events')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('kind', '=', 'identification');
  if (id) q = q.where('key', '=', id);
  return Number((await q.executeTakeFirstOrThrow()).n);
}

describe('identification completion callbacks as subscription events', () => {
  let t: TestGateway;
  let sandbox: IdentificationSandbox;
  const clients: Client[] = [];
  const client = (key?: string) => {
    const c = wsClient(t, { key });
    clients.push(c);
    return c;
  };
  let n = 0;
  /** A new identification of a workflow of its own (the sandbox's callback address is set per workflow). */
  async function create(key: string, workflowId = `wf-callback-${++n}`) {
    const res = await t.graphql(CREATE, { input: { workflowId } }, { key });
    expect(res.errors).toBeUndefined();
    return res.data!.createIdentification.identification as {
      id: string;
      workflowId: string;
      callbackUrl: string;
      status: string | null;
    };
  }

  beforeAll(async () => {
    t = await startTestGateway({ GATEWAY_API_KEYS: 'key-a,key-b' });
    sandbox = t.gateway.sandbox.identification!;
  });
  // Each test stops its subscriptions: the next starts once they have left the bus (settled counts from none).
  afterEach(() => waitFor(() => subscribers(t, KIND) === 0, 20_000, "the last test's subscriptions to end"));
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.dispose()));
    await t.close();
  });

  it('serves one callback address per API key and workflow under /webhooks/identification/, the same each time, and stores only its hash', async () => {
    const a1 = (await t.graphql(CALLBACK_URL, { workflowId: 'wf-address' }, { key: 'key-a' })).data!
      .identificationCallbackUrl as string;
    const a2 = (await t.graphql(CALLBACK_URL, { workflowId: 'wf-address' }, { key: 'key-a' })).data!
      .identificationCallbackUrl as string;
    const b = (await t.graphql(CALLBACK_URL, { workflowId: 'wf-address' }, { key: 'key-b' })).data!
      .identificationCallbackUrl as string;
    const other = (await t.graphql(CALLBACK_URL, { workflowId: 'wf-address-2' }, { key: 'key-a' })).data!
      .identificationCallbackUrl as string;
    expect(a1).toMatch(new RegExp(`^${t.gateway.publicUrl}/webhooks/identification/[A-Za-z0-9_-]{43}$`));
    expect(a2).toBe(a1);
    expect(new Set([a1, b, other]).size).toBe(3);

    // Asking stores nothing (a query only reads); creating an identification of the workflow stores the token's hash.
    const token = a1.split('/').at(-1)!;
    const addressRows = () =>
      t.gateway.services.store.db
        .selectFrom('identification_callbacks')
        .selectAll()
        .where('workflow_id', 'like', 'wf-address%')
        .execute();
    expect(await addressRows()).toEqual([]);
    expect((await create('key-a', 'wf-address')).callbackUrl).toBe(a1);
    const rows = await addressRows();
    expect(rows).toHaveLength(1);
    expect(JSON.stringify(rows)).not.toContain(token);

    const empty = await t.graphql(CALLBACK_URL, { workflowId: '  ' }, { key: 'key-a' });
    expect(empty.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'workflowId' });
  });

  it('hands out no callback address for a workflow id with a control character, which createIdentification refuses', async () => {
    sandbox.clearRequests();
    for (const [workflowId, code] of [
      ['wf\u001ba', 'U+001B'],
      ['wf\nb', 'U+000A'],
      ['wf\u007fc', 'U+007F'],
    ] as const) {
      const message = `must be one line of text without control characters; found ${code}`;
      const address = await t.graphql(CALLBACK_URL, { workflowId }, { key: 'key-a' });
      expect(address.data ?? null).toBeNull();
      expect(address.errors).toHaveLength(1);
      expect(address.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'workflowId' });
      expect(address.errors![0]!.message).toBe(`workflowId: ${message}`);
      // The mutation that would make the address live refuses the same id the same way.
      const created = await t.graphql(CREATE, { input: { workflowId } }, { key: 'key-a' });
      expect(created.errors![0]!.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'input.workflowId' });
      expect(created.errors![0]!.message).toBe(`input.workflowId: ${message}`);
    }
    expect(sandbox.requests).toEqual([]);
    const rows = await t.gateway.services.store.db
      .selectFrom('identification_callbacks')
      .selectAll()
      .where('workflow_id', 'like', 'wf%')
      .where('workflow_id', 'not like', 'wf-%')
      .execute();
    expect(rows).toEqual([]);
  });

  it('writes no callback address for a createIdentification its idempotency key refuses, bad input or a replay', async () => {
    const keyed = /* GraphQL */ `
      mutation ($input: CreateIdentificationInput!, $key: UUID) {
        createIdentification(input: $input, idempotencyKey: $key) {
          replayed
          identification {
            id
            callbackUrl
          }
        }
      }
    `;
    const db = t.gateway.services.store.db;
    const stored = async () => ({
      addresses: await db.selectFrom('identification_callbacks').selectAll().orderBy('token_hash').execute(),
      resources: await db.selectFrom('resources').selectAll().orderBy('id').execute(),
      keys: await db.selectFrom('idempotency_records').selectAll().orderBy('key').execute(),
    });
    const key = randomUUID();
    const first = await t.graphql(keyed, { input: { workflowId: 'wf-refused-1' }, key }, { key: 'key-a' });
    expect(first.errors).toBeUndefined();
    const before = await stored();
    expect(before.addresses.filter((r) => r.workflow_id.startsWith('wf-refused'))).toHaveLength(1);

    // The same key for another workflow is refused, and its workflow gets no address.
    const reused = await t.graphql(keyed, { input: { workflowId: 'wf-refused-2' }, key }, { key: 'key-a' });
    expect(reused.errors?.[0]?.extensions?.code).toBe('IDEMPOTENCY_KEY_REUSED');
    const bad = await t.graphql(
      keyed,
      { input: { workflowId: 'wf-refused-3', linkLifetimeInMinutes: 0 }, key: randomUUID() },
      { key: 'key-a' },
    );
    expect(bad.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT' });
    // A legitimate repeat replays the first answer and writes nothing either.
    const again = await t.graphql(keyed, { input: { workflowId: 'wf-refused-1' }, key }, { key: 'key-a' });
    expect(again.errors).toBeUndefined();
    expect(again.data!.createIdentification).toEqual({ ...first.data!.createIdentification, replayed: true });
    expect(await stored()).toEqual(before);
  });

  it('delivers a completion the platform calls back with to a graphql-ws subscriber of its identification, stored before the 204', async () => {
    const link = await create('key-a');
    expect(sandbox.callbackFor(link.workflowId)).toBe(link.callbackUrl);
    const c = client('key-a');
    const sub = subscribe(c, COMPLETED, { id: link.id });
    await settled(t, link.id);
    expect(sub.received).toHaveLength(0);

    expect(await sandbox.complete(link.id)).toBe(204);
    // The 204 came after the append: the event is in the log as soon as the sandbox has its answer.
    expect(await eventCount(t, link.id)).toBe(1);
    const [event] = await waitFor(() => sub.received.length > 0 && sub.received, 20_000, 'the completion');
    expect(sub.errors).toEqual([]);
    expect(event.identificationCompleted).toMatchObject({
      id: link.id,
      status: 'COMPLETED',
      event: 'IDENTIFICATION_COMPLETED',
      payload: { id: link.id, workflowId: link.workflowId, status: 'COMPLETED' },
      identification: { id: link.id, workflowId: link.workflowId, status: 'COMPLETED' },
    });
    sub.stop();
  });

  it('gives a late subscriber the stored completion at once, and Identification.status reflects the last callback', async () => {
    const link = await create('key-a');
    expect(link.status).toBeNull();
    expect((await post(link.callbackUrl, JSON.stringify({ id: link.id, status: 'IN_PROGRESS' }))).status).toBe(204);
    expect(
      (
        await post(
          link.callbackUrl,
          JSON.stringify({ identificationId: link.id, status: 'APPROVED', result: { score: 0.98 } }),
        )
      ).status,
    ).toBe(204);

    const sub = subscribe(client('key-a'), COMPLETED, { id: link.id });
    const [event] = await waitFor(() => sub.received.length > 0 && sub.received, 20_000, 'the stored completion');
    expect(event.identificationCompleted).toMatchObject({
      id: link.id,
      status: 'APPROVED',
      payload: { result: { score: 0.98 } },
    });
    const read = await t.graphql(
      `query($id: ID!) { identification(id: $id) { status completion { status payload } } }`,
      { id: link.id },
      { key: 'key-a' },
    );
    expect(read.data!.identification).toEqual({
      status: 'APPROVED',
      completion: {
        status: 'APPROVED',
        payload: { identificationId: link.id, status: 'APPROVED', result: { score: 0.98 } },
      },
    });

    // Once live, a later callback is the marker: had the stored completion come twice, the copy would precede it.
    await settled(t, link.id);
    expect((await post(link.callbackUrl, JSON.stringify({ id: link.id, status: 'ARCHIVED' }))).status).toBe(204);
    await waitFor(() => sub.received.length > 1, 20_000, 'the marker');
    expect(sub.received.map((e) => e.identificationCompleted.status)).toEqual(['APPROVED', 'ARCHIVED']);
    sub.stop();
  });

  it('acknowledges a duplicate callback and publishes it once', async () => {
    const link = await create('key-a');
    const c = client('key-a');
    const all = subscribe(c, COMPLETED);
    const one = subscribe(c, COMPLETED, { id: link.id });
    await settled(t, null, link.id);

    const body = JSON.stringify({ id: link.id, status: 'COMPLETED' });
    for (let i = 0; i < 3; i++) expect((await post(link.callbackUrl, body)).status).toBe(204);
    expect(await eventCount(t, link.id)).toBe(1);
    // A distinct later callback is the marker: a published duplicate would reach both subscriptions before it.
    expect((await post(link.callbackUrl, JSON.stringify({ id: link.id, status: 'ARCHIVED' }))).status).toBe(204);
    const statuses = (received: typeof one.received) =>
      received.filter((e) => e.identificationCompleted.id === link.id).map((e) => e.identificationCompleted.status);
    await waitFor(() => statuses(one.received).length > 1 && statuses(all.received).length > 1, 20_000, 'the marker');
    expect(statuses(one.received)).toEqual(['COMPLETED', 'ARCHIVED']);
    expect(statuses(all.received)).toEqual(['COMPLETED', 'ARCHIVED']);
    expect(await eventCount(t, link.id)).toBe(2);
    all.stop();
    one.stop();
  });

  it('accepts the id nested under identification, workflowInstance or data, and stores the body whole', async () => {
    for (const nest of ['identification', 'workflowInstance', 'data']) {
      const link = await create('key-a');
      const body = { eventType: 'finished', [nest]: { id: link.id, state: 'DONE', extra: [1, 2] } };
      expect((await post(link.callbackUrl, JSON.stringify(body))).status).toBe(204);
      const read = await t.graphql(
        `query($id: ID!) { identification(id: $id) { status completion { event payload } } }`,
        { id: link.id },
        { key: 'key-a' },
      );
      expect(read.data!.identification).toEqual({ status: 'DONE', completion: { event: 'finished', payload: body } });
    }
  });

  it('accepts a body whose top-level id is the event’s own, naming the identification nested under it', async () => {
    const link = await create('key-a');
    const body = { id: 'evt-41', eventType: 'finished', identification: { id: link.id, status: 'DONE' } };
    const res = await post(link.callbackUrl, JSON.stringify(body));
    expect(res.status, JSON.stringify(res.body)).toBe(204);
    expect(await eventCount(t, link.id)).toBe(1);
    const read = await t.graphql(
      `query($id: ID!) { identification(id: $id) { status completion { id payload } } }`,
      { id: link.id },
      { key: 'key-a' },
    );
    expect(read.data!.identification).toEqual({ status: 'DONE', completion: { id: link.id, payload: body } });
  });

  it('streams, without an id, every completion of the caller’s API key and none of another key', async () => {
    const c = client('key-a');
    const sub = subscribe(c, COMPLETED);
    await settled(t, null);
    const mine = await create('key-a');
    const theirs = await create('key-b');
    // Another key's completion first: the key's own, published after it, is the marker.
    expect(await sandbox.complete(theirs.id)).toBe(204);
    expect(await sandbox.complete(mine.id)).toBe(204);
    await waitFor(() => sub.received.some((e) => e.identificationCompleted.id === mine.id), 20_000, 'key-a completion');
    const seen = sub.received.map((e) => e.identificationCompleted.id);
    expect(seen).toContain(mine.id);
    expect(seen).not.toContain(theirs.id);
    sub.stop();
  });

  it('shows another API key nothing: no event on identificationCompleted(id), a null identification', async () => {
    const link = await create('key-a');
    expect(await sandbox.complete(link.id)).toBe(204);
    const c = client('key-b');
    const sub = subscribe(c, COMPLETED, { id: link.id });
    await settled(t, link.id);
    // The marker: a later callback on the same id, then a completion of key-b's own on the same connection. Both pass
    // through the same bus in order, so when key-b's own event has arrived, a leak of either of key-a's would have too.
    expect((await post(link.callbackUrl, JSON.stringify({ id: link.id, status: 'ARCHIVED' }))).status).toBe(204);
    const own = await create('key-b');
    const marker = subscribe(c, COMPLETED, { id: own.id });
    await settled(t, link.id, own.id);
    expect(await sandbox.complete(own.id)).toBe(204);
    await waitFor(() => marker.received.length > 0, 20_000, "key-b's own completion");
    expect(sub.received).toHaveLength(0);
    marker.stop();
    sub.stop();
    const read = await t.graphql(
      `query($id: ID!) { identification(id: $id) { id status } }`,
      { id: link.id },
      { key: 'key-b' },
    );
    expect(read.data!.identification).toBeNull();
  });

  it('answers 404 and stores nothing for a forged address, or a body naming another key’s, another workflow’s or an unknown identification', async () => {
    const mine = await create('key-a');
    const sameWorkflowOtherKey = await create('key-b', mine.workflowId);
    const otherWorkflow = await create('key-a');
    const before = await eventCount(t);
    const forged = mine.callbackUrl.slice(0, -4) + (mine.callbackUrl.endsWith('AAAA') ? 'BBBB' : 'AAAA');
    const cases: Array<[string, unknown]> = [
      [forged, { id: mine.id, status: 'COMPLETED' }],
      [`${t.url}/webhooks/identification/not-a-token`, { id: mine.id }],
      [mine.callbackUrl, { id: sameWorkflowOtherKey.id, status: 'COMPLETED' }],
      [mine.callbackUrl, { id: otherWorkflow.id, status: 'COMPLETED' }],
      [mine.callbackUrl, { id: 'no-such-identification', status: 'COMPLETED' }],
    ];
    for (const [url, body] of cases) {
      const res = await post(url, JSON.stringify(body));
      expect(res.status, `${url} ${JSON.stringify(body)}`).toBe(404);
      expect(res.body).toMatchObject({ error: 'not_found', error_description: expect.any(String) });
    }
    expect(await eventCount(t)).toBe(before);
  });

  it('answers an identification id of 900,000 characters with 404 and a bounded description, storing nothing', async () => {
    const mine = await create('key-a');
    const before = await eventCount(t);
    const res = await post(mine.callbackUrl, JSON.stringify({ id: 'x'.repeat(900_000), status: 'COMPLETED' }));
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ error: 'not_found', error_description: expect.stringContaining('xxx…') });
    expect(String(res.body!.error_description).length).toBeLessThan(300);
    expect(await eventCount(t)).toBe(before);
    expect((await post(mine.callbackUrl, JSON.stringify({ id: mine.id, status: 'COMPLETED' }))).status).toBe(204);
    expect(await eventCount(t)).toBe(before + 1);
  });

  it('refuses a body that is not JSON, not an object, names no identification or is too large with 400/413, storing nothing', async () => {
    const link = await create('key-a');
    const before = await eventCount(t);
    const cases: Array<[string | Buffer, string, number]> = [
      ['{"status": ', 'application/json', 400],
      ['status=COMPLETED', 'application/x-www-form-urlencoded', 400],
      ['[1, 2, 3]', 'application/json', 400],
      [JSON.stringify({ status: 'COMPLETED' }), 'application/json', 400],
      [Buffer.alloc(1024 * 1024 + 10, 0x20), 'application/json', 413],
    ];
    for (const [body, type, status] of cases) {
      const res = await post(link.callbackUrl, body, type);
      expect(res.status, `${type} ${String(body).slice(0, 40)}`).toBe(status);
      expect(res.body).toMatchObject({ error: 'invalid_request', error_description: expect.any(String) });
    }
    expect(await eventCount(t)).toBe(before);
  });

  it('completes from the link page: the user presses "Finish the scenario", the platform calls back and the user is sent to redirectUrl', async () => {
    const res = await t.graphql(
      `mutation($input: CreateIdentificationInput!) { createIdentification(input: $input) { identification { id url } } }`,
      { input: { workflowId: 'wf-page', redirectUrl: 'https://app.example/done' } },
      { key: 'key-a' },
    );
    const link = res.data!.createIdentification.identification as { id: string; url: string };
    const page = await (await fetch(link.url)).text();
    expect(page).toContain('Finish the scenario');
    const finished = await request(`${link.url}/finish`, { method: 'POST' });
    await finished.body.dump();
    expect(finished.statusCode).toBe(303);
    expect(finished.headers.location).toBe('https://app.example/done');
    const read = await t.graphql(
      `query($id: ID!) { identification(id: $id) { status } }`,
      { id: link.id },
      { key: 'key-a' },
    );
    expect(read.data!.identification.status).toBe('COMPLETED');
  });
});

describe('identification callback addresses across restarts', () => {
  it('keeps the same address after a restart, and a callback to it after the restart is accepted', async () => {
    const first = await startTestGateway({ GATEWAY_API_KEYS: 'key-a' });
    const dataDir = first.dataDir;
    let url: string;
    let id: string;
    try {
      const res = await first.graphql(CREATE, { input: { workflowId: 'wf-restart' } }, { key: 'key-a' });
      ({ id, callbackUrl: url } = res.data!.createIdentification.identification);
    } finally {
      await first.close();
    }
    const second = await startTestGateway({ GATEWAY_API_KEYS: 'key-a', DATA_DIR: dataDir });
    try {
      const again = (await second.graphql(CALLBACK_URL, { workflowId: 'wf-restart' }, { key: 'key-a' })).data!
        .identificationCallbackUrl as string;
      // Same token (the port differs from one start to the next).
      expect(again.split('/').at(-1)).toBe(url.split('/').at(-1));
      expect((await post(again, JSON.stringify({ id, status: 'COMPLETED' }))).status).toBe(204);
    } finally {
      await second.close();
    }
  });
});
