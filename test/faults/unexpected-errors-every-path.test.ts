// An unexpected error reaches no client, on the paths test/faults/no-raw-messages.test.ts does not walk: a field's
// error in a partial result and a list item's (POST on the direct and Apollo paths, GET, an automatic persisted query,
// a trusted document by id, MCP), a subscription's source and its resolve that throw (graphql-ws, SSE in both modes),
// the HTTP refusals before execution, and the webhooks whose store throws. Each client gets INTERNAL_SERVER_ERROR (or
// the contract's code of the route) with nothing of the error's own; the log has the error in full, with the request
// id. Where only an internal throw reaches a path, the case replaces ONE method of the running gateway (restored after).
import { createHash, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { GraphQLError } from 'graphql';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';

import { CloudService } from '../../src/cloud/service.js';
import { createChain, M, ok, type Chain } from '../helpers/cloud.js';
import { appsFile, startTestGateway, tempDataDir, type TestGateway } from '../helpers/gateway.js';
import { EVERY_APP_SCOPE } from '../helpers/jwt.js';
import { mcpClient } from '../helpers/mcp.js';
import { postNotification } from '../helpers/mobile-id.js';
import { operationOver, type Transport } from '../helpers/operation.js';
import { kafkaInput, PROVISION_KAFKA, registerVerifications } from '../helpers/resumable.js';
import { waitFor, waitForSubscribers } from '../helpers/wait.js';

const KEY = 'unexpected-errors-app-key-01';
const MARK = `leak-marker-${randomUUID()} /srv/gateway/data.db SQLITE_IOERR`;
const LEAKS = [/leak-marker-/, /\/srv\/gateway/, /SQLITE_IOERR/, /\bat [^\n"]*:\d+:\d+/, /node_modules|\.ts:\d+/];
const INTERNAL = 'INTERNAL_SERVER_ERROR';
const boom = () => new Error(MARK);

const PARTIAL = `query Partial($id: ID!) {
  project(id: $id) { id networks { id ipAddresses { id address } } }
  __typename
}`;
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

let direct: TestGateway;
let apollo: TestGateway;
let chains: Map<TestGateway, Chain>;
beforeAll(async () => {
  const manifest = path.join(tempDataDir('unexpected-errors-manifest-'), 'persisted-documents.json');
  fs.writeFileSync(manifest, JSON.stringify({ [sha256(PARTIAL)]: PARTIAL }));
  const env = {
    GATEWAY_APPS_FILE: appsFile('unexpected-errors-', [{ name: 'app', scopes: EVERY_APP_SCOPE.split(' '), key: KEY }]),
    TRUSTED_DOCUMENTS: 'allow',
    TRUSTED_DOCUMENTS_MANIFEST: manifest,
  };
  direct = await startTestGateway(env);
  apollo = await startTestGateway(env, { testing: { directPath: false } });
  chains = new Map();
  for (const gw of [direct, apollo]) {
    const chain = await createChain(gw, KEY);
    // A second IP address in the network: the list's second item is the one whose field fails.
    await ok(gw, M.ip, { input: { projectId: chain.projectId, networkId: chain.networkId, title: 'ip-2' } }, KEY);
    chains.set(gw, chain);
  }
});
afterAll(async () => {
  await direct?.close();
  await apollo?.close();
});
afterEach(() => {
  vi.restoreAllMocks();
});

/**
 * The IP address titled ip-2 (the list's second item) throws MARK when its `address` is read; the first reads as
 * usual. By the item, not by the call: the direct path's compiled form runs graphql-js again after any error.
 */
function secondAddressThrows(gw: TestGateway): void {
  const cloud = gw.gateway.services.cloud;
  const real = cloud.addressOf.bind(cloud);
  vi.spyOn(cloud, 'addressOf').mockImplementation((r) => {
    if ((r as { title?: unknown }).title === 'ip-2') throw boom();
    return real(r);
  });
}

/** The log since `from` has MARK on a line that names a request. */
async function loggedWithRequestId(gw: TestGateway, from: number): Promise<void> {
  // A long limit: it only ends a real failure (the mark never logged), never a slow machine's success.
  await waitFor(() => gw.logs().slice(from).includes('leak-marker-'), 20_000, 'the mark in the log');
  const lines = gw
    .logs()
    .slice(from)
    .split('\n')
    .filter((l) => l.includes('leak-marker-'))
    .map((l) => JSON.parse(l) as { requestId?: unknown });
  expect(
    lines.some((l) => typeof l.requestId === 'string'),
    JSON.stringify(lines),
  ).toBe(true);
}

function noLeak(raw: string): void {
  for (const leak of LEAKS) expect(raw, `${leak} in the answer`).not.toMatch(leak);
}

async function post(gw: TestGateway, body: unknown, headers: Record<string, string> = {}) {
  const res = await request(`${gw.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}`, ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.statusCode, raw: await res.body.text() };
}

describe("a list item's field error in a partial result", () => {
  const ways: Array<[string, (gw: TestGateway, id: string) => Promise<{ status?: number; raw: string }>]> = [
    ['POST', (gw, id) => post(gw, { query: PARTIAL, variables: { id } })],
    [
      'GET',
      async (gw, id) =>
        operationOver('get', gw, KEY, { query: PARTIAL, variables: { id } }).then((a) => ({
          status: a.status!,
          raw: a.raw,
        })),
    ],
    [
      'POST an automatic persisted query',
      (gw, id) =>
        post(gw, {
          query: PARTIAL,
          variables: { id },
          extensions: { persistedQuery: { version: 1, sha256Hash: sha256(PARTIAL) } },
        }),
    ],
    ['POST a trusted document by id', (gw, id) => post(gw, { documentId: sha256(PARTIAL), variables: { id } })],
  ];
  for (const [way, send] of ways) {
    it.each([
      ['direct', () => direct],
      ['Apollo', () => apollo],
    ] as const)(
      `${way} (%s path): INTERNAL_SERVER_ERROR at its path, the other items kept, the log has it`,
      async (_p, g) => {
        const gw = g();
        const chain = chains.get(gw)!;
        const from = gw.logs().length;
        secondAddressThrows(gw);
        const got = await send(gw, chain.projectId);
        noLeak(got.raw);
        const body = JSON.parse(got.raw) as any;
        expect(got.status, got.raw).toBe(200);
        expect(body.errors).toEqual([
          {
            message: 'Internal server error',
            locations: expect.any(Array),
            path: ['project', 'networks', 0, 'ipAddresses', 1, 'address'],
            extensions: { code: INTERNAL },
          },
        ]);
        expect(body.data.__typename).toBe('Query');
        expect(body.data.project.networks[0].ipAddresses[1].address).toBeNull();
        expect(body.data.project.networks[0].ipAddresses[0].address).toEqual(expect.any(String));
        await loggedWithRequestId(gw, from);
      },
    );
  }

  it.each(['ws', 'sse', 'sse-single'] as const)('over %s: the same', async (transport) => {
    const chain = chains.get(direct)!;
    const from = direct.logs().length;
    secondAddressThrows(direct);
    const got = await operationOver(transport, direct, KEY, { query: PARTIAL, variables: { id: chain.projectId } });
    noLeak(got.raw);
    expect(got.errors).toEqual([
      {
        message: 'Internal server error',
        locations: expect.any(Array),
        path: ['project', 'networks', 0, 'ipAddresses', 1, 'address'],
        extensions: { code: INTERNAL },
      },
    ]);
    await loggedWithRequestId(direct, from);
  });

  it('over MCP (a tool whose execution throws under one item): a tool error with INTERNAL_SERVER_ERROR', async () => {
    const chain = chains.get(direct)!;
    const from = direct.logs().length;
    secondAddressThrows(direct);
    const client = await mcpClient(direct, { key: KEY });
    try {
      // The manifest's named operation is a tool of its own, selecting the addresses.
      const result = await client.call('Partial', { id: chain.projectId });
      const raw = JSON.stringify(result);
      noLeak(raw);
      expect(result.isError, raw).toBe(true);
      expect(result.structuredContent?.errors?.[0]?.code).toBe(INTERNAL);
    } finally {
      await client.close();
    }
    await loggedWithRequestId(direct, from);
  });
});

describe("a subscription's source and its resolve that throw", () => {
  const SUB = 'subscription($id: String!) { mobileIdAuthentication(authReqId: $id) { __typename } }';
  it.each(['ws', 'sse', 'sse-single'] as const)('its source throws, over %s', async (transport) => {
    const from = direct.logs().length;
    vi.spyOn(direct.gateway.services.mobileId, 'watch').mockImplementation(() => {
      throw boom();
    });
    const got = await operationOver(transport, direct, KEY, { query: SUB, variables: { id: randomUUID() } });
    noLeak(got.raw);
    expect(got.errors?.[0]?.extensions?.code, got.raw).toBe(INTERNAL);
    await loggedWithRequestId(direct, from);
  });

  it.each(['ws', 'sse', 'sse-single'] as const)('its source throws: logged once, over %s', async (transport) => {
    const from = direct.logs().length;
    vi.spyOn(direct.gateway.services.mobileId, 'watch').mockImplementation(() => {
      throw boom();
    });
    const got = await operationOver(transport, direct, KEY, { query: SUB, variables: { id: randomUUID() } });
    expect(got.errors?.[0]?.extensions?.code, got.raw).toBe(INTERNAL);
    // The line is written before the answer: one line, whatever the transport writes the answer with.
    const lines = direct
      .logs()
      .slice(from)
      .split('\n')
      .filter((l) => l.includes('leak-marker-'));
    expect(lines, lines.join('\n')).toHaveLength(1);
  });

  it.each(['ws', 'sse', 'sse-single'] as const)('its resolve throws on an event, over %s', async (transport) => {
    const from = direct.logs().length;
    const id = randomUUID();
    vi.spyOn(direct.gateway.services.mobileId, 'authentication').mockImplementation(() => {
      throw boom();
    });
    const answer = operationOver(transport, direct, KEY, { query: SUB, variables: { id } });
    await waitForSubscribers(direct, 'mobile-id', id);
    expect(
      (await postNotification(direct, { auth_req_id: id, error: 'access_denied', error_description: 'declined' }))
        .status,
    ).toBe(204);
    const got = await answer;
    noLeak(got.raw);
    expect(got.errors?.[0]?.extensions?.code, got.raw).toBe(INTERNAL);
    await loggedWithRequestId(direct, from);
  });
});

describe('HTTP refusals before execution', () => {
  it.each([
    ['a body that is no JSON', '{"query": "{ __typename }"', {}],
    ['a content type the route does not read', '{ __typename }', { 'content-type': 'text/plain' }],
    ['an Accept no JSON type satisfies', '{"query":"{ __typename }"}', { accept: 'application/xml' }],
    ['a body that is JSON but no request', '[1, 2', {}],
  ] as const)('%s: the refusal names no internals', async (_name, body, headers) => {
    for (const gw of [direct, apollo]) {
      const got = await post(gw, body, headers);
      noLeak(got.raw);
      expect(got.status, got.raw).toBeGreaterThanOrEqual(400);
      expect(got.status, got.raw).toBeLessThan(500);
    }
  });
});

describe('a webhook whose store throws', () => {
  it('mobile-ID: 500 server_error, the log has it', async () => {
    const from = direct.logs().length;
    vi.spyOn(direct.gateway.services.events.log, 'append').mockRejectedValue(boom());
    const res = await postNotification(direct, {
      auth_req_id: randomUUID(),
      error: 'access_denied',
      error_description: 'declined',
    });
    const raw = typeof res.text === 'string' ? res.text : JSON.stringify(res.json);
    noLeak(raw);
    expect(res.status, raw).toBe(500);
    await loggedWithRequestId(direct, from);
  });
  it('verification: 500 server_error, the log has it', async () => {
    const [[externalId, url]] = [
      ...(await registerVerifications(direct, direct.gateway.sandbox.verification!, KEY, 1)),
    ] as [[string, string]];
    const from = direct.logs().length;
    vi.spyOn(direct.gateway.services.events.log, 'append').mockRejectedValue(boom());
    const res = await request(`${direct.url}${new URL(url).pathname}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ verificationExternalId: externalId, status: 'COMPLETED' }),
    });
    const raw = await res.body.text();
    noLeak(raw);
    expect(res.statusCode, raw).toBe(500);
    await loggedWithRequestId(direct, from);
  });
});

describe("an agent's plan whose execution throws something unexpected", () => {
  it("execute_plan answers UNKNOWN with nothing of the error's; the audit trail (agentAudit) holds none of it; the log has it", async () => {
    const OPS = 'unexpected-errors-ops-key-01';
    const gw = await startTestGateway({
      GATEWAY_APPS_FILE: appsFile('unexpected-errors-plans-', [
        { name: 'agent', scopes: ['cloud:read', 'cloud:write', 'cloud:approve'], key: KEY },
        { name: 'ops', scopes: ['operator'], key: OPS },
      ]),
      MCP_MUTATIONS: 'approve',
      MCP_APPROVAL: 'elicitation',
    });
    const client = await mcpClient(gw, { key: KEY, person: 'accept' });
    try {
      const planned = await client.call('create_project', { input: { name: 'unexpected' } });
      expect(planned.isError, JSON.stringify(planned)).toBeFalsy();
      const { planId } = planned.structuredContent as { planId: string };
      const from = gw.logs().length;
      // The preparation of the plan's document throws in the run (its estimates, before, read as usual): the pipeline
      // throws it on to the workflow's run hook.
      const documents = gw.gateway.documents;
      const real = documents.get.bind(documents);
      vi.spyOn(documents, 'get').mockImplementation((...args) => {
        if (new Error().stack?.includes('runOperation')) throw boom();
        return real(...args);
      });
      const executed = await client.call('execute_plan', { planId });
      vi.restoreAllMocks();
      noLeak(JSON.stringify(executed));
      expect(executed.isError).toBe(true);
      expect(executed.structuredContent).toMatchObject({ planId, status: 'UNKNOWN' });
      await loggedWithRequestId(gw, from);

      const audit = await gw.graphql<{ agentAudit: Array<{ action: string; detail: string }> }>(
        'query($id: ID) { agentAudit(planId: $id) { action detail } }',
        { id: planId },
        { key: OPS },
      );
      expect(audit.errors).toBeUndefined();
      noLeak(JSON.stringify(audit));
      expect(audit.data!.agentAudit.find((e) => e.action === 'unknown')?.detail).toMatch(
        /the execution failed before an answer: Internal server error/,
      );
    } finally {
      await client.close();
      await gw.close();
    }
  });
});

describe("a provisioning's step that throws something unexpected", () => {
  it.each([
    ['an Error', () => boom()],
    ['a GraphQLError of no code (not raised on purpose)', () => new GraphQLError(MARK)],
  ])("%s: the step's error reads INTERNAL_SERVER_ERROR with nothing of its own; the log has it", async (_n, make) => {
    const from = direct.logs().length;
    vi.spyOn(direct.gateway.services.cloud, 'createNetwork').mockRejectedValue(make());
    const made = await direct.graphql<{ provisionKafkaCluster: { provisioning: { id: string } } }>(
      PROVISION_KAFKA,
      { input: kafkaInput(`unexpected-${randomUUID().slice(0, 8)}`, '10.20.0.0/24') },
      { key: KEY },
    );
    expect(made.errors, JSON.stringify(made.errors)).toBeUndefined();
    await direct.gateway.services.provisioning.idle();
    const read = await direct.graphql(
      'query($id: ID!) { provisioning(id: $id) { state error { code message } steps { name error { code message } } } }',
      { id: made.data!.provisionKafkaCluster.provisioning.id },
      { key: KEY },
    );
    noLeak(JSON.stringify(read));
    expect(read.data!.provisioning).toMatchObject({
      state: 'FAILED',
      error: { code: INTERNAL, message: 'Internal server error' },
    });
    await waitFor(() => direct.logs().slice(from).includes('leak-marker-'), 20_000, 'the mark in the log');
  });
});

describe("a provisioning plan's step that throws something unexpected", () => {
  it.each([
    ['an Error', () => boom()],
    ['a GraphQLError of no code (not raised on purpose)', () => new GraphQLError(MARK)],
  ])('%s: the plan query answers INTERNAL_SERVER_ERROR with nothing of its own; the log has it', async (_n, make) => {
    const from = direct.logs().length;
    vi.spyOn(CloudService.prototype, 'createNetwork').mockRejectedValue(make());
    const read = await direct.graphql(
      'query($input: ProvisionKafkaClusterInput!) { planKafkaCluster(input: $input) { errors { field code message } steps { name errors { field code message } } } }',
      { input: kafkaInput(`unexpected-${randomUUID().slice(0, 8)}`, '10.21.0.0/24') },
      { key: KEY },
    );
    noLeak(JSON.stringify(read));
    // Not a step's refusal of the input: the operation itself failed, as any unexpected error makes it.
    expect(read.data, JSON.stringify(read)).toBeNull();
    expect(read.errors).toEqual([
      expect.objectContaining({ message: 'Internal server error', extensions: { code: INTERNAL } }),
    ]);
    await loggedWithRequestId(direct, from);
  });
});
