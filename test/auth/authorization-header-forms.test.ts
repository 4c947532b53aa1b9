// The odd forms of the Authorization header, on every transport: what is one credential written loosely is accepted,
// what is not one credential gets UNAUTHENTICATED (401; 4403 on graphql-ws), runs nothing and never reaches the log.
// Two Authorization headers are refused: Node keeps the first and drops the others, while a proxy in front may read
// the last, so two readers would take the request for two different apps.
import net from 'node:net';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const KEY = 'alpha-key-0123456789abcdef';
const OTHER = 'beta-key-0123456789abcdef';
const OPERATOR = 'operator-key-0123456789abcdef';
const CREATE = 'mutation { createProject(input: { name: "forms" }) { project { id } } }';

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ GATEWAY_API_KEYS: `alpha:${KEY},beta:${OTHER}`, OPERATOR_API_KEYS: `ops:${OPERATOR}` });
});
afterAll(() => gw.close());

/** POST /graphql over a raw socket, with `authorization` lines written byte for byte (latin1). */
function rawPost(lines: string[]): Promise<{ status: number; body: string }> {
  return rawRequest('/graphql', JSON.stringify({ query: CREATE }), lines);
}

/** POST `path` with a JSON `body` over a raw socket, with header `lines` written byte for byte (latin1). */
function rawRequest(path: string, body: string, lines: string[]): Promise<{ status: number; body: string }> {
  const u = new URL(gw.url);
  const head =
    `POST ${path} HTTP/1.1\r\nhost: ${u.host}\r\nconnection: close\r\ncontent-type: application/json\r\n` +
    `content-length: ${Buffer.byteLength(body)}\r\n${lines.map((l) => `${l}\r\n`).join('')}\r\n`;
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(u.port), u.hostname, () => socket.write(Buffer.from(head + body, 'latin1')));
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('end', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      resolve({ status: Number(text.split(' ')[1]), body: text.slice(text.indexOf('\r\n\r\n') + 4) });
    });
    socket.on('error', reject);
  });
}

const projectsCreated = () => gw.gateway.sandbox.cloud!.requests.filter((r) => r.method === 'POST').length;

describe('two Authorization headers', () => {
  for (const order of ['the valid key first', 'the valid key last'] as const) {
    it(`are refused with UNAUTHENTICATED over POST /graphql, ${order}, and nothing runs`, async () => {
      const before = projectsCreated();
      const values = [`Bearer ${KEY}`, 'Bearer wrong-key'];
      if (order === 'the valid key last') values.reverse();
      const res = await rawPost(values.map((v) => `authorization: ${v}`));
      expect(res.status).toBe(401);
      const error = JSON.parse(res.body).errors[0];
      expect(error.extensions.code).toBe('UNAUTHENTICATED');
      expect(error.message).toBe('the request has more than one Authorization header: send one');
      expect(projectsCreated()).toBe(before);
    });
  }

  it('are refused on the mobile-ID webhook too, whichever holds the notification token, and nothing is stored', async () => {
    const token = gw.gateway.sandbox.mobileId!.notificationToken;
    for (const values of [
      [`Bearer ${token}`, 'Bearer wrong-token'],
      ['Bearer wrong-token', `Bearer ${token}`],
    ]) {
      const id = `two-headers-${values[0]!.length}-${values[1]!.length}`;
      const body = JSON.stringify({ auth_req_id: id, error: 'access_denied', error_description: 'declined' });
      const res = await rawRequest(
        '/webhooks/mobile-id',
        body,
        values.map((v) => `authorization: ${v}`),
      );
      expect(res.status, res.body).toBe(401);
      const stored = await gw.graphql(`{ mobileIdAuthentication(authReqId: "${id}") { __typename } }`, undefined, {
        key: KEY,
      });
      expect(stored.data).toEqual({ mobileIdAuthentication: null });
    }
  });

  it("are refused even when both are valid keys: one request is never two apps' (alpha's and beta's)", async () => {
    const res = await rawPost([`Authorization: Bearer ${KEY}`, `authorization: Bearer ${OTHER}`]);
    expect(res.status).toBe(401);
  });

  it('are refused over SSE (POST /graphql/stream), MCP (POST /mcp) and POST /admin/reload', async () => {
    const headers = (h: Record<string, string>) => ({ authorization: [`Bearer ${KEY}`, 'Bearer wrong-key'], ...h });
    const sse = await request(`${gw.url}/graphql/stream`, {
      method: 'POST',
      headers: headers({ 'content-type': 'application/json', accept: 'text/event-stream' }),
      body: JSON.stringify({ query: 'subscription { mobileIdAuthentication(authReqId: "x") { __typename } }' }),
    });
    expect(sse.statusCode).toBe(401);
    expect(((await sse.body.json()) as any).errors[0].extensions.code).toBe('UNAUTHENTICATED');
    const mcp = await request(`${gw.url}/mcp`, {
      method: 'POST',
      headers: headers({ 'content-type': 'application/json', accept: 'application/json, text/event-stream' }),
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
    });
    expect(mcp.statusCode).toBe(401);
    await mcp.body.dump();
    const reload = await request(`${gw.url}/admin/reload`, {
      method: 'POST',
      headers: { authorization: [`Bearer ${OPERATOR}`, 'Bearer wrong-key'] },
    });
    expect(reload.statusCode).toBe(401);
    await reload.body.dump();
  });

  it('in the WebSocket upgrade request close the connection with 4403', async () => {
    const ws = new WebSocket(gw.url.replace(/^http/, 'ws') + '/graphql', 'graphql-transport-ws', {
      headers: { authorization: [`Bearer ${KEY}`, 'Bearer wrong-key'] as unknown as string },
    });
    ws.once('open', () => ws.send(JSON.stringify({ type: 'connection_init', payload: {} })));
    const [code, reason] = await new Promise<[number, string]>((resolve, reject) => {
      ws.once('close', (c, r) => resolve([c, r.toString()]));
      // Admitted: graphql-ws acknowledges the connection, and nothing closes it.
      ws.on('message', (m) => JSON.parse(m.toString()).type === 'connection_ack' && resolve([0, 'acknowledged']));
      ws.once('error', reject);
      ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade answered ${res.statusCode}`)));
    });
    ws.terminate();
    expect(code).toBe(4403);
    expect(reason).toMatch(/more than one Authorization header/);
  });
});

describe('one credential written loosely, or something that is none', () => {
  it('a lowercase scheme and extra spaces are the one key', async () => {
    expect((await rawPost([`authorization: bearer   ${KEY}  `])).status).toBe(200);
  });

  it('a comma, a space inside, another scheme or a non-ASCII byte get UNAUTHENTICATED, never naming the key', async () => {
    for (const value of [
      `Bearer ${KEY},${OTHER}`,
      `Bearer ${KEY}, Bearer ${OTHER}`,
      `Bearer ${KEY} extra`,
      `Basic ${KEY}`,
      KEY,
      `Bearer ${KEY}\u00e9`,
    ]) {
      const res = await rawPost([`authorization: ${value}`]);
      expect(res.status, value).toBe(401);
      expect(JSON.parse(res.body).errors[0].extensions.code, value).toBe('UNAUTHENTICATED');
      expect(res.body, value).not.toContain(KEY);
    }
    expect(gw.logs()).not.toContain(KEY);
    expect(gw.logs()).not.toContain(OTHER);
  });
});
