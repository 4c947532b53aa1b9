// An MCP client for the tests: the SDK's own client over real HTTP, against a gateway started on port 0.
import fs from 'node:fs';
import path from 'node:path';
import { Client, StreamableHTTPClientTransport, type CallToolResult } from '@modelcontextprotocol/client';
import { request } from 'undici';
import { afterEach, expect } from 'vitest';

import { appsFile, logLines, type TestGateway } from './gateway.js';

export interface McpClientOptions {
  key?: string;
  /** 'auto' negotiates 2026-07-28; 'legacy' speaks the 2025 handshake. Default 'auto'. */
  era?: 'auto' | 'legacy';
  /** The endpoint's path: /mcp or /mcp/<toolset>. */
  path?: string;
  /**
   * How the client's person answers an approval: accept, decline, or null for a client that declares no elicitation.
   * Default null.
   */
  person?: 'accept' | 'decline' | null;
}

export interface TestMcpClient {
  client: Client;
  /** The elicitations the client's person was shown. */
  asked: string[];
  call(
    name: string,
    args?: Record<string, unknown>,
  ): Promise<CallToolResult & { structuredContent?: Record<string, any> }>;
  toolNames(): Promise<string[]>;
  close(): Promise<void>;
}

export async function mcpClient(gw: Pick<TestGateway, 'url'>, o: McpClientOptions = {}): Promise<TestMcpClient> {
  const person = o.person ?? null;
  const client = new Client(
    { name: 'gateway-test', version: '1.0.0' },
    { versionNegotiation: { mode: o.era ?? 'auto' }, capabilities: person ? { elicitation: { form: {} } } : {} },
  );
  const asked: string[] = [];
  if (person) {
    client.setRequestHandler('elicitation/create', async (request) => {
      asked.push((request.params as { message: string }).message);
      return person === 'accept' ? { action: 'accept', content: { approve: true } } : { action: 'decline' };
    });
  }
  const transport = new StreamableHTTPClientTransport(new URL(`${gw.url}${o.path ?? '/mcp'}`), {
    requestInit: { headers: o.key ? { authorization: `Bearer ${o.key}` } : {} },
  });
  await client.connect(transport);
  return {
    client,
    asked,
    call: async (name, args = {}) =>
      (await client.callTool({ name, arguments: args })) as CallToolResult & {
        structuredContent?: Record<string, any>;
      },
    toolNames: async () => (await client.listTools()).tools.map((t) => t.name),
    close: () => client.close(),
  };
}

/** The text of a tool result. */
export function textOf(result: CallToolResult): string {
  return result.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');
}

/**
 * For a test file whose tests connect MCP clients: returns a `connect(gw, options)` whose clients are closed after each
 * test. Call it at the top level of the file.
 */
export function mcpClientsPerTest(): (gw: Pick<TestGateway, 'url'>, o?: McpClientOptions) => Promise<TestMcpClient> {
  const clients: TestMcpClient[] = [];
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close().catch(() => undefined)));
  });
  return async (gw, o = {}) => {
    const c = await mcpClient(gw, o);
    clients.push(c);
    return c;
  };
}

/** The keys of the agents' plan tests: the agent that plans, the person who approves, and an operator. */
export const AGENT_KEY = 'agent-key-0123456789';
export const APPROVER_KEY = 'approver-key-0123456789';
export const OPERATOR_KEY = 'operator-key-0123456789';

/**
 * A trusted-documents manifest holding `documents`, in the fresh directory of the apps file `apps`, which is the
 * gateway's data directory too: the variables of a gateway that reads both (TRUSTED_DOCUMENTS=allow), and `write`,
 * which replaces the manifest's documents for a reload to read.
 */
export function manifestBeside(
  apps: string,
  documents: Record<string, string>,
): { env: Record<string, string>; write: (documents: Record<string, string>) => void } {
  const dir = path.dirname(apps);
  const manifest = path.join(dir, 'manifest.json');
  const write = (documents: Record<string, string>) => fs.writeFileSync(manifest, JSON.stringify(documents));
  write(documents);
  return {
    env: { DATA_DIR: dir, GATEWAY_APPS_FILE: apps, TRUSTED_DOCUMENTS: 'allow', TRUSTED_DOCUMENTS_MANIFEST: manifest },
    write,
  };
}

/** Reloads `gw`'s files as an operator (`POST /admin/reload` with OPERATOR_KEY), which must answer 200. */
export async function reloadAsOperator(gw: Pick<TestGateway, 'url'>): Promise<void> {
  const res = await request(`${gw.url}/admin/reload`, {
    method: 'POST',
    headers: { authorization: `Bearer ${OPERATOR_KEY}` },
  });
  expect(res.statusCode, await res.body.text()).toBe(200);
}

/** The operations each warning about MCP's left-out tools named (at start-up, then at each reload), a list each. */
export function leftOutTools(gw: Pick<TestGateway, 'logs'>): string[][] {
  return logLines<{ msg: string; tools?: string[] }>(gw, (l) => /^MCP leaves out/.test(l.msg)).map(
    (l) => l.tools ?? [],
  );
}

/**
 * A person approves again, naming the state they read (UNKNOWN), a plan whose run ended unknown or was lost: an
 * approval covers one run, so its next run needs this one.
 */
export async function approveAgainAsUnknown(
  gw: Pick<TestGateway, 'graphql'>,
  planId: string,
  key = APPROVER_KEY,
): Promise<void> {
  const approved = await gw.graphql(
    'mutation($id: ID!) { approvePlan(planId: $id, status: UNKNOWN) { status } }',
    { id: planId },
    { key },
  );
  expect(approved.data, JSON.stringify(approved.errors)).toEqual({ approvePlan: { status: 'UNKNOWN' } });
}

/**
 * An apps file of the agents' plan tests: `agent` (cloud:read, cloud:write) and `approver` (cloud:approve), with
 * `withOperator` an operator app `ops` too.
 */
export function planApps(prefix: string, o: { withOperator?: boolean } = {}): string {
  return appsFile(prefix, [
    { name: 'agent', scopes: ['cloud:read', 'cloud:write'], key: AGENT_KEY },
    { name: 'approver', scopes: ['cloud:approve'], key: APPROVER_KEY },
    ...(o.withOperator ? [{ name: 'ops', scopes: ['operator'], key: OPERATOR_KEY }] : []),
  ]);
}

/** The `_meta` of a raw request at protocol 2026-07-28, sent without the SDK's client. */
/**
 * POSTs `body` to /mcp over raw HTTP with `key` (a string is sent as it is, anything else as its JSON), with `headers`
 * beside the usual ones: the status, the answer's text, and every JSON-RPC message it carries (SSE events or one JSON).
 */
export async function rawMcpPost(
  gw: Pick<TestGateway, 'url'>,
  key: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; text: string; messages: Record<string, any>[] }> {
  const res = await request(`${gw.url}/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...headers,
    },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.body.text();
  const events = [...text.matchAll(/^data: (.*)$/gm)].map((m) => JSON.parse(m[1]!) as Record<string, any>);
  const messages = events.length ? events : text ? [JSON.parse(text) as Record<string, any>] : [];
  return { status: res.statusCode, text, messages };
}

/** The points `app` has been allowed from its `bucket` (`gateway_rate_limit_points_total`), read from /metrics. */
export async function pointsAllowed(
  gw: Pick<TestGateway, 'url'>,
  app: string,
  bucket: 'reads' | 'creations',
): Promise<number> {
  const text = await (await request(`${gw.url}/metrics`)).body.text();
  const line = `gateway_rate_limit_points_total{app="${app}",bucket="${bucket}",outcome="allowed"} `;
  const at = text.split('\n').find((l) => l.startsWith(line));
  return at ? Number(at.slice(line.length)) : 0;
}

export const RAW_META = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1.0.0' },
  'io.modelcontextprotocol/clientCapabilities': {},
};

/**
 * Opens a subscriptions/listen on `uris` over raw HTTP, with `prefix` written before the JSON body; resolves with the
 * first message its answer carries (the acknowledgement of an opened stream, or the refusal), the stream left open
 * until `signal` aborts.
 */
export async function rawListen(
  gw: Pick<TestGateway, 'url'>,
  o: { key: string; id: string; uris: string[]; prefix?: string; signal: AbortSignal },
): Promise<Record<string, any>> {
  const body = {
    jsonrpc: '2.0',
    id: o.id,
    method: 'subscriptions/listen',
    params: { _meta: RAW_META, notifications: { resourceSubscriptions: o.uris } },
  };
  const res = await fetch(`${gw.url}/mcp`, {
    method: 'POST',
    headers: {
      accept: 'application/json, text/event-stream',
      authorization: `Bearer ${o.key}`,
      'content-type': 'application/json',
      'mcp-method': 'subscriptions/listen',
      'mcp-protocol-version': '2026-07-28',
    },
    body: (o.prefix ?? '') + JSON.stringify(body),
    signal: o.signal,
  });
  if (!res.headers.get('content-type')?.startsWith('text/event-stream'))
    return (await res.json()) as Record<string, any>;
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let text = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the stream ended before its first message: ${text}`);
    text += value;
    const data = /^data: (.*)$/m.exec(text);
    if (data && text.includes('\n\n')) return JSON.parse(data[1]!) as Record<string, any>;
  }
}
