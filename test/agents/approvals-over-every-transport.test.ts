// "An agent never approves its own plan" (docs/agents.md, What an agent can never do) over every way GraphQL reaches
// the gateway, not POST /graphql alone: graphql-ws, SSE (POST and GET), GET /graphql and an automatic persisted query.
// The app tried here holds cloud:write and cloud:approve, so only the plan's owner check stands between it and its
// own approval; the plain agent holds no approve scope. Each attempt leaves the plan PENDING and nothing upstream.
import { createHash } from 'node:crypto';
import { createClient as sseCreateClient } from 'graphql-sse';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { upstreamCreations } from '../helpers/cloud.js';
import { appsFile, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { mcpClient, textOf, type TestMcpClient } from '../helpers/mcp.js';
import { wsClient } from '../helpers/mobile-id.js';

const KEYS = {
  agent: 'agent-key-0123456789',
  selfish: 'selfish-key-one-0123456789',
  approver: 'approver-key-0123456789',
};

const APPROVE = 'mutation Approve($id: ID!) { approvePlan(planId: $id) { status } }';

/** What an attempt got back: the code of its first error, or the plan's status it approved. */
interface Answer {
  code: string | undefined;
  status: string | undefined;
}

function answerOf(result: { data?: any; errors?: readonly { extensions?: Record<string, unknown> }[] }): Answer {
  const code = result.errors?.[0]?.extensions?.code;
  return { code: typeof code === 'string' ? code : undefined, status: result.data?.approvePlan?.status };
}

let gw: TestGateway;
const clients: TestMcpClient[] = [];

beforeAll(async () => {
  const apps = appsFile('approvals-every-transport-', [
    { name: 'agent', scopes: ['cloud:read', 'cloud:write'], key: KEYS.agent },
    { name: 'selfish', scopes: ['cloud:read', 'cloud:write', 'cloud:approve'], key: KEYS.selfish },
    { name: 'approver', scopes: ['cloud:approve'], key: KEYS.approver },
  ]);
  gw = await startTestGateway({ GATEWAY_APPS_FILE: apps, MCP_MUTATIONS: 'approve' });
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
  await gw.close();
});

async function plan(key: string, name: string): Promise<string> {
  const c = await mcpClient(gw, { key });
  clients.push(c);
  const made = await c.call('create_project', { input: { name } });
  expect(made.isError, textOf(made)).toBeFalsy();
  return made.structuredContent!.planId as string;
}

async function overWebSocket(key: string, id: string): Promise<Answer> {
  const client = wsClient(gw, { key });
  try {
    for await (const result of client.iterate({ query: APPROVE, variables: { id } })) return answerOf(result);
    throw new Error('no result');
  } catch (err) {
    // A refusal before execution arrives as graphql-ws's `error` message: the iterator throws its errors.
    if (Array.isArray(err)) return answerOf({ errors: err });
    throw err;
  } finally {
    await client.dispose();
  }
}

async function overSsePost(key: string, id: string): Promise<Answer> {
  const client = sseCreateClient({
    url: `${gw.url}/graphql/stream`,
    headers: { authorization: `Bearer ${key}` },
    retryAttempts: 0,
  });
  try {
    for await (const result of client.iterate({ query: APPROVE, variables: { id } })) return answerOf(result);
    throw new Error('no result');
  } finally {
    client.dispose();
  }
}

async function overGet(
  path: string,
  key: string,
  search: Record<string, string>,
): Promise<{ status: number; text: string }> {
  const res = await request(`${gw.url}${path}?${new URLSearchParams(search)}`, {
    headers: {
      authorization: `Bearer ${key}`,
      accept: path.endsWith('/stream') ? 'text/event-stream' : 'application/json',
      'apollo-require-preflight': 'true',
    },
  });
  return { status: res.statusCode, text: await res.body.text() };
}

async function stillPending(id: string): Promise<void> {
  const read = await gw.graphql(
    'query($id: ID!) { agentPlan(id: $id) { status approvedBy } }',
    { id },
    {
      key: KEYS.approver,
    },
  );
  expect(read.data?.agentPlan).toEqual({ status: 'PENDING', approvedBy: null });
  const c = await mcpClient(gw, { key: KEYS.selfish });
  clients.push(c);
  const executed = await c.call('execute_plan', { planId: id });
  expect(executed.structuredContent, textOf(executed)).toMatchObject({ code: 'APPROVAL_REQUIRED' });
  expect(upstreamCreations(gw)).toEqual([]);
}

describe("an app's own plan is never approved by it, whatever the transport", () => {
  it('graphql-ws: CONFLICT for the owner, FORBIDDEN for the agent without an approve scope', async () => {
    const id = await plan(KEYS.selfish, 'over-ws');
    expect(await overWebSocket(KEYS.selfish, id)).toEqual({ code: 'CONFLICT', status: undefined });
    const other = await plan(KEYS.agent, 'over-ws-agent');
    expect((await overWebSocket(KEYS.agent, other)).code).toBe('FORBIDDEN');
    await stillPending(id);
  });

  it('SSE over POST: CONFLICT', async () => {
    const id = await plan(KEYS.selfish, 'over-sse');
    expect(await overSsePost(KEYS.selfish, id)).toEqual({ code: 'CONFLICT', status: undefined });
    await stillPending(id);
  });

  it('a GET never approves: GET /graphql and GET /graphql/stream refuse the mutation with 405', async () => {
    const id = await plan(KEYS.selfish, 'over-get');
    const search = { query: APPROVE, variables: JSON.stringify({ id }) };
    expect((await overGet('/graphql', KEYS.selfish, search)).status).toBe(405);
    expect((await overGet('/graphql/stream', KEYS.selfish, search)).status).toBe(405);
    await stillPending(id);
  });

  it("a persisted query: CONFLICT over POST; over GET, even an approver's own hash approves nothing", async () => {
    const id = await plan(KEYS.selfish, 'over-apq');
    const sha256Hash = createHash('sha256').update(APPROVE).digest('hex');
    const extensions = { persistedQuery: { version: 1, sha256Hash } };
    const post = async (key: string, planId: string) => {
      const res = await request(`${gw.url}/graphql`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ query: APPROVE, variables: { id: planId }, extensions }),
      });
      return answerOf((await res.body.json()) as any);
    };
    expect((await post(KEYS.selfish, id)).code).toBe('CONFLICT');
    // The approver sends the document with its hash (an approval of another plan), then only the hash, over GET.
    expect(await post(KEYS.approver, await plan(KEYS.agent, 'approved-by-post'))).toMatchObject({ status: 'APPROVED' });
    const other = await plan(KEYS.agent, 'over-get-hash');
    for (const key of [KEYS.selfish, KEYS.approver]) {
      const search = {
        variables: JSON.stringify({ id: key === KEYS.selfish ? id : other }),
        extensions: JSON.stringify(extensions),
      };
      const answer = await overGet('/graphql', key, search);
      expect([405, 200]).toContain(answer.status);
      expect(answer.text).not.toContain('APPROVED');
    }
    const read = await gw.graphql(
      'query($id: ID!) { agentPlan(id: $id) { status } }',
      { id: other },
      {
        key: KEYS.approver,
      },
    );
    expect(read.data?.agentPlan).toEqual({ status: 'PENDING' });
    await stillPending(id);
  });
});
