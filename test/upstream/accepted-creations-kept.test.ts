import { randomUUID } from 'node:crypto';
import { createClient as createSseClient } from 'graphql-sse';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { SERVICES_PATH } from '../../src/sandbox/cloud.js';
import { IDENTIFICATIONS_PATH } from '../../src/sandbox/identification.js';
import { upstreamKey } from '../../src/upstream/idempotency.js';
import { M, ok } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { connected } from '../helpers/identity.js';
import { wsClient } from '../helpers/mobile-id.js';

const CREATE = /* GraphQL */ `
  mutation Create($input: CreateIdentificationInput!, $key: UUID) {
    createIdentification(input: $input, idempotencyKey: $key) {
      identification {
        id
        idShort
        url
        workflowId
      }
      idempotencyKey
      replayed
    }
  }
`;

/** The answer with some top-level fields removed (the sandbox has created the resource all the same). */
const without =
  (...fields: string[]) =>
  (body: unknown) =>
    Object.fromEntries(Object.entries(body as Record<string, unknown>).filter(([k]) => !fields.includes(k)));

/** The first string `id` found in the answer, breadth first: whatever shape the cloud sandbox answers in. */
function idIn(body: unknown): string {
  const queue: unknown[] = [body];
  while (queue.length) {
    const next = queue.shift();
    if (next && typeof next === 'object') {
      const o = next as Record<string, unknown>;
      if (typeof o.id === 'string') return o.id;
      queue.push(...Object.values(o));
    }
  }
  throw new Error(`no id in ${JSON.stringify(body)}`);
}

describe('a creation the upstream accepted is never thrown away', () => {
  let t: TestGateway;

  beforeAll(async () => {
    t = await startTestGateway({ UPSTREAM_MAX_RETRIES: '1', UPSTREAM_RETRY_BUDGET: '3s' });
  });
  afterAll(() => t.close());
  afterEach(() => {
    for (const s of [t.gateway.sandbox.identification!, t.gateway.sandbox.cloud!]) {
      s.clearRequests();
      s.faults.clear();
    }
  });

  const identificationSandbox = () => t.gateway.sandbox.identification!;
  const creations = () => identificationSandbox().requests.filter((r) => r.path === IDENTIFICATIONS_PATH);

  it('keeps an identification whose 202 lacks idShort, returns it with a warning, and replays it on a retry without a second upstream request', async () => {
    identificationSandbox().faults.enqueueFor(IDENTIFICATIONS_PATH, { alter: without('idShort') });
    const key = randomUUID();
    const input = { workflowId: 'wf-thin-answer' };

    const first = await t.graphql(CREATE, { input, key });
    expect(first.errors).toBeUndefined();
    const [created] = identificationSandbox()
      .identifications()
      .filter((i) => i.workflowId === 'wf-thin-answer');
    expect(first.data!.createIdentification).toMatchObject({
      identification: { id: created!.id, idShort: null, url: created!.url, workflowId: 'wf-thin-answer' },
      idempotencyKey: key,
      replayed: false,
    });
    const warnings = (first as { extensions?: { warnings?: unknown[] } }).extensions?.warnings;
    expect(warnings).toEqual([
      expect.objectContaining({
        code: 'UPSTREAM_ANSWER_INCOMPLETE',
        upstream: 'identification',
        id: created!.id,
        missing: ['idShort'],
        path: ['createIdentification', 'identification'],
      }),
    ]);

    // Recorded: readable like any other identification.
    const read = await t.graphql(`query($id: ID!) { identification(id: $id) { id idShort url } }`, { id: created!.id });
    expect(read.data!.identification).toEqual({ id: created!.id, idShort: null, url: created!.url });

    const retry = await t.graphql(CREATE, { input, key });
    expect(retry.errors).toBeUndefined();
    expect(retry.data!.createIdentification.replayed).toBe(true);
    expect(retry.data!.createIdentification.identification).toEqual(first.data!.createIdentification.identification);
    expect((retry as { extensions?: { warnings?: unknown[] } }).extensions?.warnings).toEqual(warnings);
    expect(creations()).toHaveLength(1);
    expect(
      identificationSandbox()
        .identifications()
        .filter((i) => i.workflowId === 'wf-thin-answer'),
    ).toHaveLength(1);
  });

  it('keeps an identification whose 202 holds an invalid url, with url null and the warning naming it', async () => {
    identificationSandbox().faults.enqueueFor(IDENTIFICATIONS_PATH, {
      alter: (b) => ({ ...(b as object), url: 'not a url' }),
    });
    const res = await t.graphql(CREATE, { input: { workflowId: 'wf-bad-url' } });
    expect(res.errors).toBeUndefined();
    const link = res.data!.createIdentification.identification;
    expect(link.url).toBeNull();
    expect(link.idShort).toBe(
      identificationSandbox()
        .identifications()
        .find((i) => i.id === link.id)!.idShort,
    );
    expect(
      (res as { extensions?: { warnings?: Array<{ missing: string[] }> } }).extensions?.warnings?.[0]?.missing,
    ).toEqual(['url']);
  });

  it('carries the warning over a WebSocket mutation too', async () => {
    identificationSandbox().faults.enqueueFor(IDENTIFICATIONS_PATH, { alter: without('idShort', 'url') });
    const client = wsClient(t);
    try {
      const ready = connected(client);
      const result = await new Promise<{ data?: any; extensions?: any; errors?: unknown }>((resolve, reject) => {
        let last: any;
        client.subscribe(
          { query: CREATE, variables: { input: { workflowId: 'wf-ws' } } },
          { next: (v) => (last = v), error: reject, complete: () => resolve(last) },
        );
      });
      await ready;
      expect(result.errors).toBeUndefined();
      expect(result.data.createIdentification.identification).toMatchObject({ idShort: null, url: null });
      expect(result.extensions.warnings[0]).toMatchObject({
        code: 'UPSTREAM_ANSWER_INCOMPLETE',
        missing: ['idShort', 'url'],
      });
    } finally {
      await client.dispose();
    }
  });

  it('carries the warning over Server-Sent Events too', async () => {
    identificationSandbox().faults.enqueueFor(IDENTIFICATIONS_PATH, { alter: without('idShort') });
    const client = createSseClient({ url: `${t.url}/graphql/stream`, retryAttempts: 0 });
    try {
      const result = await new Promise<any>((resolve, reject) => {
        let last: any;
        client.subscribe(
          { query: CREATE, variables: { input: { workflowId: 'wf-sse' } } },
          { next: (v) => (last = v), error: reject, complete: () => resolve(last) },
        );
      });
      expect(result.errors).toBeUndefined();
      expect(result.data.createIdentification.identification.idShort).toBeNull();
      expect(result.extensions.warnings[0]).toMatchObject({ code: 'UPSTREAM_ANSWER_INCOMPLETE', missing: ['idShort'] });
    } finally {
      client.dispose();
    }
  });

  it('keeps a 202 that names no id with the key (UPSTREAM_ANSWER_INCOMPLETE), and a retry with the same key answers it again without sending', async () => {
    identificationSandbox().faults.enqueueFor(IDENTIFICATIONS_PATH, { alter: () => ({}) });
    const key = randomUUID();
    const input = { workflowId: 'wf-no-id' };
    const first = await t.graphql(CREATE, { input, key });
    expect(first.errors?.[0]?.extensions).toMatchObject({
      code: 'UPSTREAM_ANSWER_INCOMPLETE',
      upstream: 'identification',
      status: 202,
      idempotencyKey: key,
      upstreamIdempotencyKey: upstreamKey('open', key),
    });
    expect(first.errors?.[0]?.message).toContain('the id of the request it created');

    const retry = await t.graphql(CREATE, { input, key });
    expect(retry.errors?.[0]?.extensions).toEqual(first.errors?.[0]?.extensions);
    expect(creations().map((r) => r.headers['idempotency-key'])).toEqual([upstreamKey('open', key)]);
    expect(
      identificationSandbox()
        .identifications()
        .filter((i) => i.workflowId === 'wf-no-id'),
    ).toHaveLength(1);
  });

  it('keeps a cloud network whose answer holds nothing but its id, and replays it on a retry without a second upstream request', async () => {
    const cloud = t.gateway.sandbox.cloud!;
    const projectId = (await ok(t, M.project, { input: { name: 'kept', description: 'thin answers' } })).project.id;
    cloud.clearRequests();
    cloud.faults.enqueueFor(SERVICES_PATH, { alter: (b) => ({ id: idIn(b) }) });
    const key = randomUUID();
    const input = { projectId, title: 'net-thin', bandwidthMbps: 100 };
    const first = await ok(t, M.network, { input, key });
    const created = cloud.requests.filter((r) => r.path === SERVICES_PATH);
    expect(created).toHaveLength(1);
    expect(first.network).toMatchObject({ title: 'net-thin', bandwidthMbps: 100 });

    const again = await ok(t, M.network, { input, key });
    expect(again.replayed).toBe(true);
    expect(again.network.id).toBe(first.network.id);
    expect(cloud.requests.filter((r) => r.path === SERVICES_PATH)).toHaveLength(1);
    const tree = await t.graphql(`query($id: ID!) { project(id: $id) { networks { id } } }`, { id: projectId });
    expect(tree.data!.project.networks).toEqual([{ id: first.network.id }]);
  });

  it('keeps a cloud IP address whose answer lacks the address, with address null, and replays it', async () => {
    const cloud = t.gateway.sandbox.cloud!;
    const projectId = (await ok(t, M.project, { input: { name: 'kept-ip', description: 'thin answers' } })).project.id;
    const networkId = (await ok(t, M.network, { input: { projectId, title: 'net', bandwidthMbps: 100 } })).network.id;
    cloud.clearRequests();
    cloud.faults.enqueueFor(SERVICES_PATH, { alter: (b) => ({ id: idIn(b) }) });
    const key = randomUUID();
    const input = { projectId, networkId, title: 'ip-thin' };
    const first = await ok(t, M.ip, { input, key });
    expect(first.ipAddress).toMatchObject({ address: null, networkId });
    const again = await ok(t, M.ip, { input, key });
    expect(again).toMatchObject({ replayed: true, ipAddress: { id: first.ipAddress.id } });
    expect(cloud.requests.filter((r) => r.path === SERVICES_PATH)).toHaveLength(1);
  });
});
