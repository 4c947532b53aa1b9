// Every rule of the execution pipeline holds identically on every transport: POST /graphql on its direct path and
// through Apollo's pipeline alone (directPath: false), graphql-ws and graphql-sse. Real clients over loopback.
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';

import { gatewaysPerTest, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { operationOver, type Answer } from '../helpers/operation.js';

const start = gatewaysPerTest();
const disposers: Array<() => void | Promise<void>> = [];
afterEach(async () => {
  for (const d of disposers.splice(0)) await d();
});

const KEY = 'rules-every-transport-key-0123';
type Transport = 'http planned' | 'http apollo' | 'ws' | 'sse';
const TRANSPORTS: Transport[] = ['http planned', 'http apollo', 'ws', 'sse'];

async function startFor(transport: Transport, env: Record<string, string>): Promise<TestGateway> {
  if (transport !== 'http apollo') return start({ GATEWAY_API_KEYS: KEY, ...env });
  const gw = await startTestGateway({ GATEWAY_API_KEYS: KEY, ...env }, { testing: { directPath: false } });
  disposers.push(() => gw.close());
  return gw;
}

/** How each transport's operation is sent. */
const VIA = { 'http planned': 'post', 'http apollo': 'post', ws: 'ws', sse: 'sse' } as const;

/** One operation over `transport`: the first result, or the errors the client reports. */
function once(transport: Transport, gw: TestGateway, query: string, key: string | null = KEY): Promise<Answer> {
  return operationOver(VIA[transport], gw, key, { query });
}

const deep = (levels: number) =>
  `{ projects { ${'networks { project { '.repeat(levels)} id ${'} } '.repeat(levels)} } }`;

describe.each(TRANSPORTS)('the execution pipeline over %s', (transport) => {
  const http = transport.startsWith('http');

  it('authenticates before it parses anything: a request without a valid key prepares no document', async () => {
    const gw = await startFor(transport, {});
    const documents = () => gw.gateway.documents.size;
    const before = documents();
    const refused = await once(transport, gw, '{ projects { id name } }', 'not-a-key');
    if (http) expect(refused.status).toBe(401);
    expect(refused.data ?? null).toBeNull();
    expect(documents()).toBe(before);
    expect((await once(transport, gw, '{ projects { id name } }')).errors).toBeUndefined();
    // Apollo's own pipeline (the plain path) parses and validates, after its context (the key) is made, and hands its
    // document to the pipeline's prepare stage, which keeps it (docs/decisions/065).
    expect(documents()).toBe(before + 1);
  });

  it('refuses an operation over GRAPHQL_MAX_DEPTH with the error that names the limit', async () => {
    const gw = await startFor(transport, { GRAPHQL_MAX_DEPTH: '4' });
    const refused = await once(transport, gw, deep(3));
    if (http) expect(refused.status).toBe(400);
    expect(refused.errors?.[0]?.extensions).toMatchObject({
      code: 'GRAPHQL_VALIDATION_FAILED',
      limit: 'GRAPHQL_MAX_DEPTH',
      max: 4,
    });
    expect(refused.errors?.[0]?.extensions).not.toHaveProperty('http');
  });

  it('refuses an operation over GRAPHQL_MAX_COST before it runs, with the error that names the limit', async () => {
    const gw = await startFor(transport, { GRAPHQL_MAX_COST: '50' });
    const refused = await once(transport, gw, '{ projects(first: 100) { id name networks { id title } } }');
    if (http) expect(refused.status).toBe(400);
    expect(refused.data ?? null).toBeNull();
    expect(refused.errors?.[0]?.extensions).toMatchObject({
      code: 'GRAPHQL_VALIDATION_FAILED',
      limit: 'GRAPHQL_MAX_COST',
      max: 50,
    });
    expect(refused.errors?.[0]?.extensions).not.toHaveProperty('http');
  });

  it('refuses a read past RATE_LIMIT_READS with RATE_LIMITED and a retryAfter, after the cost: a too costly one spends nothing', async () => {
    const gw = await startFor(transport, { RATE_LIMIT_READS: '1/1h', GRAPHQL_MAX_COST: '500' });
    const tooCostly = await once(transport, gw, '{ projects(first: 1000) { id name networks { id title } } }');
    expect(tooCostly.errors?.[0]?.extensions?.limit).toBe('GRAPHQL_MAX_COST');
    const first = await once(transport, gw, '{ projects { id } }');
    expect(first.errors).toBeUndefined();
    const refused = await once(transport, gw, '{ projects { id } }');
    if (http) expect(refused.status).toBe(429);
    expect(refused.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', bucket: 'reads' });
    expect(refused.errors?.[0]?.extensions?.retryAfter).toBeGreaterThanOrEqual(1);
    expect(refused.errors?.[0]?.extensions).not.toHaveProperty('http');
  });

  it('refuses a request over GRAPHQL_MAX_BODY_BYTES before reading it further', async () => {
    const gw = await startFor(transport, { GRAPHQL_MAX_BODY_BYTES: '2048' });
    const big = `{ projects { id } } # ${'x'.repeat(4096)}`;
    if (transport === 'ws') {
      // WebSocket: the message is over the socket's maximum, which closes it (1009, message too big).
      expect((await once(transport, gw, big)).closeCode).toBe(1009);
      return;
    }
    const res = await request(transport === 'sse' ? `${gw.url}/graphql/stream` : `${gw.url}/graphql`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: transport === 'sse' ? 'text/event-stream' : 'application/json',
        authorization: `Bearer ${KEY}`,
      },
      body: JSON.stringify({ query: big }),
    });
    expect(res.statusCode).toBe(413);
    expect(((await res.body.json()) as Answer).errors?.[0]?.message).toMatch(/exceeds 2048 bytes/);
  });

  it("masks the same way: a syntax error is the client's to see, in graphql-js's words", async () => {
    const gw = await startFor(transport, {});
    const refused = await once(transport, gw, '{ projects { id ');
    if (http) expect(refused.status).toBe(400);
    expect(refused.errors?.[0]?.message).toMatch(/^Syntax Error: Expected Name, found <EOF>\.$/);
  });
});
