// No value the gateway takes may hold the NUL character (U+0000): PostgreSQL's text cannot store it, so an input with
// it would fail after its upstream call (and on a retry with the same idempotency key be sent again), and a webhook's
// identifier with it could be neither stored nor looked up. It is refused before anything runs, on every way in:
// variables (POST, graphql-ws, graphql-sse, MCP), string literals, and webhook bodies.
import { randomUUID } from 'node:crypto';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { M } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { mcpClient } from '../helpers/mcp.js';
import { postNotification } from '../helpers/mobile-id.js';
import { operationOver } from '../helpers/operation.js';
import { storeSnapshot } from '../helpers/store.js';

const KEY = 'nul-character-key';
const OPERATOR = 'nul-character-operator-key';
let gw: TestGateway;
const disposers: Array<() => void | Promise<void>> = [];
beforeAll(async () => {
  gw = await startTestGateway({ GATEWAY_API_KEYS: KEY, OPERATOR_API_KEYS: `op:${OPERATOR}`, MCP_EXECUTE: 'true' });
});
afterAll(async () => {
  for (const d of disposers.splice(0)) await d();
  await gw?.close();
});

const post = async (body: unknown) => {
  const res = await request(`${gw.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
    body: JSON.stringify(body),
  });
  return { status: res.statusCode, json: (await res.body.json()) as { errors?: Array<Record<string, any>> } };
};

describe('the NUL character in what an app sends', () => {
  it('is refused in a variable before anything is sent or stored: 400 BAD_USER_INPUT naming where', async () => {
    const before = await storeSnapshot(gw);
    const sent = gw.gateway.sandbox.cloud!.requests.length;
    const res = await post({ query: M.project, variables: { input: { name: 'a\u0000b' }, key: randomUUID() } });
    expect(res.status).toBe(400);
    expect(res.json.errors).toEqual([
      {
        message: 'Variable "$input.name" must not contain the NUL character (U+0000); nothing was run',
        extensions: { code: 'BAD_USER_INPUT', field: 'input.name' },
      },
    ]);
    expect(gw.gateway.sandbox.cloud!.requests.length).toBe(sent);
    expect(await storeSnapshot(gw)).toEqual(before);
  });

  it('names a list element by its index, and takes other control characters and U+FFFD', async () => {
    const res = await post({
      query: 'query($ids: [ID!]!) { verificationResults(externalIds: $ids) { externalId } }',
      variables: { ids: ['ok', 'x\u0000'] },
    });
    expect(res.json.errors?.[0]?.extensions).toEqual({ code: 'BAD_USER_INPUT', field: 'ids.1' });
    const fine = await post({
      query: 'query($id: ID!) { project(id: $id) { id } }',
      variables: { id: 'tab\there \ufffd' },
    });
    expect(fine.status).toBe(200);
    expect(fine.json.errors).toBeUndefined();
  });

  it('is refused in a string literal of the document', async () => {
    const res = await post({ query: 'mutation { createProject(input: { name: "a\\u0000b" }) { project { id } } }' });
    expect(res.status).toBe(400);
    expect(res.json.errors?.[0]).toMatchObject({
      message: 'A string must not contain the NUL character (U+0000)',
      extensions: { code: 'GRAPHQL_VALIDATION_FAILED' },
    });
  });

  it.each(['ws', 'sse'] as const)('is refused as BAD_USER_INPUT over %s', async (transport) => {
    const { errors } = await operationOver(transport, gw, KEY, {
      query: 'subscription($id: String!) { mobileIdAuthentication(authReqId: $id) { __typename } }',
      variables: { id: 'a\u0000' },
    });
    expect(errors).toEqual([
      {
        message: 'Variable "$id" must not contain the NUL character (U+0000); nothing was run',
        extensions: { code: 'BAD_USER_INPUT', field: 'id' },
      },
    ]);
  });

  it('is refused over MCP', async () => {
    const mcp = await mcpClient(gw, { key: OPERATOR });
    disposers.push(() => mcp.close());
    const res = await mcp.call('execute', {
      query: 'query($id: ID!) { project(id: $id) { id } }',
      variables: { id: 'a\u0000' },
    });
    expect(res.isError).toBe(true);
    expect(res.structuredContent).toEqual({
      errors: [
        {
          message: 'Variable "$id" must not contain the NUL character (U+0000); nothing was run',
          code: 'BAD_USER_INPUT',
          // MCP names the offending part of a call `argument`, as it does for every refused variable.
          argument: 'id',
        },
      ],
    });
  });

  it('is refused in a webhook body: 400, nothing stored', async () => {
    const before = await storeSnapshot(gw);
    const res = await postNotification(gw, {
      auth_req_id: 'nul\u0000id',
      error: 'access_denied',
      error_description: 'x',
    });
    expect(res.status).toBe(400);
    expect(JSON.parse(res.text)).toEqual({
      error: 'invalid_request',
      error_description: 'a string in the body holds the NUL character (U+0000)',
    });
    expect(await storeSnapshot(gw)).toEqual(before);
  });
});
