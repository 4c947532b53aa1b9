import { createHash, randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import WebSocket from 'ws';

import { SecretBox } from '../../src/secret.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { postNotification, SUBSCRIPTION } from '../helpers/mobile-id.js';
import { subscribers, waitFor } from '../helpers/wait.js';

// The delivery path's shortcuts (docs/decisions/062): the subscription's selection as graphql-jit compiled it
// (SUBSCRIPTION_COMPILED_SELECTION) and the intake's clear values handed to this process's live subscribers
// (DELIVERY_CLEAR_FROM_INTAKE), the last result written with its `complete` (DELIVERY_COMPLETE_WITH_LAST, decision
// 089), and both framed into one socket write by the gateway rather than by ws's `send` (DELIVERY_ONE_WRITE, decision
// 093; its frames are also checked on the wire in test/server/ws-one-write.test.ts) and written below the socket's
// stream (DELIVERY_DIRECT_WRITE, decision 150), and the notification published with the payload object its intake
// stored rather than its JSON parsed back (DELIVERY_PAYLOAD_FROM_INTAKE, decision 097), and each subscription's source
// stream made from its document's plan (SUBSCRIPTION_COMPILED_SOURCE, decision 154), and each notification checked
// by plain code rather than the zod schemas (MOBILEID_PLAIN_CHECKS, decision 158). Two gateways get the very same
// notifications, with Date frozen so that their reception times agree: one with the shortcuts (the default), one with
// all of them off (the plain path). Every frame each writes, over graphql-ws and SSE, must be the same bytes.

/** The position a gateway's cursor opens to, as text. */
function opensTo(t: TestGateway, cursor: string): string {
  const { position, at } = t.gateway.services.events.cursors.decode(cursor, Infinity);
  return `at${at}-floor${position.floor}-ranges${position.ranges.join('_')}`;
}

/** Each gateway's own gateway secret, so that a box that opened something can be told by its key (no private read). */
const FAST_KEY = Buffer.alloc(32, 1).toString('base64');
const PLAIN_KEY = Buffer.alloc(32, 2).toString('base64');
const PROBES = { fast: new SecretBox(Buffer.alloc(32, 1)).seal('fast', 'probe') };

const API_KEY = 'app-key-1';
const NOTIFY = 'operator-notification-token';
const ISSUER = 'https://mobileid.operator.example';
const CLIENT_ID = 'sp-client-1';
const NOW = Date.UTC(2026, 10, 27, 6, 0, 0);

async function jwksServer() {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const jwks = { keys: [{ ...(await exportJWK(publicKey)), kid: 'op-1', alg: 'ES256', use: 'sig' }] };
  const server = http.createServer(
    (_req, res) => void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(jwks)),
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`,
    privateKey,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

async function success(key: CryptoKey, authReqId: string, fields: Record<string, unknown> = {}) {
  const accessToken = randomBytes(24).toString('base64url');
  const now = Math.floor(NOW / 1000);
  const claims = {
    iss: ISSUER,
    aud: CLIENT_ID,
    sub: 'pcr-123',
    acr: '2',
    amr: ['SIM_PIN'],
    iat: now,
    exp: now + 300,
    at_hash: createHash('sha256').update(accessToken).digest().subarray(0, 16).toString('base64url'),
    'urn:openid:params:jwt:claim:auth_req_id': authReqId,
  };
  const idToken = await new SignJWT(claims).setProtectedHeader({ alg: 'ES256', kid: 'op-1' }).sign(key);
  return {
    auth_req_id: authReqId,
    access_token: accessToken,
    token_type: 'Bearer',
    id_token: idToken,
    expires_in: 3600,
    correlation_id: 'corr-1',
    ...fields,
  };
}

/** Every message a graphql-ws subscription gets (after connection_ack), as the bytes of each frame, until complete or error. */
function wsFrames(
  gw: TestGateway,
  query: string,
  variables: Record<string, unknown>,
): { ready: Promise<void>; frames: Promise<Buffer[]> } {
  const ws = new WebSocket(`${gw.url.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws', {
    headers: { authorization: `Bearer ${API_KEY}` },
  });
  const frames: Buffer[] = [];
  let ready!: () => void;
  const readyP = new Promise<void>((r) => (ready = r));
  const done = new Promise<Buffer[]>((resolve, reject) => {
    ws.on('error', reject);
    ws.on('open', () => ws.send(JSON.stringify({ type: 'connection_init', payload: {} })));
    ws.on('message', (data: Buffer) => {
      const msg = JSON.parse(data.toString('utf8')) as { type: string };
      if (msg.type === 'connection_ack') {
        ws.send(JSON.stringify({ id: 'op-1', type: 'subscribe', payload: { query, variables } }));
        ready();
        return;
      }
      if (msg.type === 'ping') return;
      frames.push(Buffer.from(data));
      if (msg.type === 'complete' || msg.type === 'error') {
        ws.close();
        resolve(frames);
      }
    });
  });
  return { ready: readyP, frames: done };
}

/** The whole text/event-stream body of one SSE subscription (distinct connections mode), as bytes. */
async function sseBytes(gw: TestGateway, query: string, variables: Record<string, unknown>): Promise<Buffer> {
  const res = await request(`${gw.url}/graphql/stream`, {
    method: 'POST',
    headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ query, variables }),
  });
  return Buffer.from(await res.body.arrayBuffer());
}

const listeners = (gw: TestGateway, authReqId: string) => subscribers(gw, 'mobile-id', authReqId);

async function compiledCount(gw: TestGateway): Promise<number> {
  const text = await (await request(`${gw.url}/metrics`)).body.text();
  return Number(/^gateway_subscription_executions_compiled_total (\d+)$/m.exec(text)?.[1] ?? NaN);
}

describe("the delivery shortcuts write the plain path's frames, byte for byte", () => {
  let jwks: Awaited<ReturnType<typeof jwksServer>>;
  let fast: TestGateway;
  let plain: TestGateway;

  beforeAll(async () => {
    jwks = await jwksServer();
    const env = {
      GATEWAY_API_KEYS: `app-a:${API_KEY}`,
      SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm',
      MOBILEID_NOTIFICATION_TOKENS: `app-a:${NOTIFY}`,
      MOBILEID_JWKS_URL: jwks.url,
      MOBILEID_ISSUER: ISSUER,
      MOBILEID_CLIENT_ID: CLIENT_ID,
    };
    // The gateways' clock (testing.clock) reads Date as this test freezes it below: events are stamped on it, so the
    // reception times agree (the default clock, Date.now as it was at start, would not follow the fake).
    const clocked = { testing: { clock: () => Date.now() } };
    fast = await startTestGateway({ ...env, TOKEN_ENCRYPTION_KEY: FAST_KEY }, clocked);
    plain = await startTestGateway(
      {
        ...env,
        TOKEN_ENCRYPTION_KEY: PLAIN_KEY,
        SUBSCRIPTION_COMPILED_SELECTION: 'false',
        SUBSCRIPTION_COMPILED_SOURCE: 'false',
        DELIVERY_CLEAR_FROM_INTAKE: 'false',
        DELIVERY_COMPLETE_WITH_LAST: 'false',
        DELIVERY_ONE_WRITE: 'false',
        DELIVERY_DIRECT_WRITE: 'false',
        DELIVERY_PAYLOAD_FROM_INTAKE: 'false',
        MOBILEID_PLAIN_CHECKS: 'false',
      },
      clocked,
    );
    vi.useFakeTimers({ toFake: ['Date'], now: NOW });
  });
  afterAll(async () => {
    vi.useRealTimers();
    await Promise.all([fast?.close(), plain?.close(), jwks?.close()]);
  });

  /** Subscribes on both gateways over both transports, `before` the notification (live) or after it (from the log). */
  async function compare(
    authReqId: string,
    body: unknown,
    options: { live: boolean; query?: string; variables?: Record<string, unknown>; tamper?: boolean },
  ) {
    const query = options.query ?? SUBSCRIPTION;
    const variables = options.variables ?? { id: authReqId };
    const headers = { 'x-mobileid-request-id': 'req-1', 'x-mobileid-transaction-id': 'tx-1' };
    const post = async () => {
      for (const gw of [fast, plain])
        expect((await postNotification(gw, body, { token: NOTIFY, headers })).status).toBe(204);
      if (options.tamper) {
        for (const gw of [fast, plain]) {
          const [row] = await gw.gateway.services.store.db
            .selectFrom('events')
            .select(['payload'])
            .where('key', '=', authReqId)
            .execute();
          // Stored as version 3 (the access token sealed alone, the rest as version 4 seals it), with an access
          // token that does not open: one field of the selection fails, the others read.
          const payload = JSON.parse(row!.payload) as { v: number; accessToken: string | null; sealedPersonal: string };
          const sealed = new SecretBox(randomBytes(32)).seal('not this key', 'x');
          Object.assign(payload, { v: 3, accessToken: sealed });
          await gw.gateway.services.store.db
            .updateTable('events')
            .set({ payload: JSON.stringify(payload) })
            .where('key', '=', authReqId)
            .execute();
        }
      }
    };
    const opened = vi.spyOn(SecretBox.prototype, 'open');
    if (!options.live) await post();
    const subs = [fast, plain].map((gw) => ({
      ws: wsFrames(gw, query, variables),
      sse: sseBytes(gw, query, variables),
    }));
    await Promise.all(subs.map((s) => s.ws.ready));
    if (options.live) {
      await waitFor(() => listeners(fast, authReqId) === 2 && listeners(plain, authReqId) === 2);
      await post();
    }
    const [f, p] = (await Promise.all(subs.map(async (s) => ({ ws: await s.ws.frames, sse: await s.sse })))) as [
      { ws: Buffer[]; sse: Buffer },
      { ws: Buffer[]; sse: Buffer },
    ];
    const contexts = [...opened.mock.contexts] as SecretBox[];
    opened.mockRestore();
    // Whose box opened: the one that opens what the gateway's own key sealed (each gateway has a key of its own).
    const keyOf = (box: SecretBox) => {
      try {
        return box.open(PROBES.fast, 'probe') === 'fast' ? 'fast' : 'plain';
      } catch {
        return 'plain';
      }
    };
    const owners = new Map([...new Set(contexts)].map((box) => [box, keyOf(box)] as const));
    const opens = {
      fast: contexts.filter((c) => owners.get(c) === 'fast').length,
      plain: contexts.filter((c) => owners.get(c) === 'plain').length,
    };
    // Cursors are sealed under each gateway's own secret: compared by the position they open to, the rest byte for byte.
    const positions = (t: TestGateway, b: Buffer) =>
      Buffer.from(
        b
          .toString('utf8')
          .replace(/"cursor":"([A-Za-z0-9_-]+)"/g, (_m, c: string) => `"cursor":"${opensTo(t, c)}"`)
          .replace(/^id: ([A-Za-z0-9_-]+)$/gm, (_m, c: string) => `id: ${opensTo(t, c)}`),
        'utf8',
      );
    f.ws = f.ws.map((b) => positions(fast, b));
    p.ws = p.ws.map((b) => positions(plain, b));
    f.sse = positions(fast, f.sse);
    p.sse = positions(plain, p.sse);
    expect(f.ws.map((b) => b.toString('utf8'))).toEqual(p.ws.map((b) => b.toString('utf8')));
    expect(Buffer.concat(f.ws).equals(Buffer.concat(p.ws))).toBe(true);
    expect(f.sse.toString('utf8')).toBe(p.sse.toString('utf8'));
    expect(f.sse.equals(p.sse)).toBe(true);
    return {
      opens,
      ws: f.ws.map((b) => JSON.parse(b.toString('utf8')) as { type: string; payload?: { data?: any; errors?: any[] } }),
      sse: f.sse.toString('utf8'),
    };
  }

  it("a success delivered live (subject, tokens and unknown fields from the intake's clear values, the compiled selection)", async () => {
    const id = `req-${randomUUID()}`;
    const [fastBefore, plainBefore] = [await compiledCount(fast), await compiledCount(plain)];
    const out = await compare(id, await success(jwks.privateKey, id, { carrier: 'op-x', loa: 3 }), { live: true });
    expect(out.ws[0]!.type).toBe('next');
    expect(out.ws[0]!.payload!.data.mobileIdAuthentication).toMatchObject({
      __typename: 'MobileIdAuthenticated',
      subject: 'pcr-123',
      otherFields: { carrier: 'op-x', loa: 3 },
    });
    expect(out.ws[0]!.payload!.data.mobileIdAuthentication.idToken).toMatch(/^ey/);
    // The fast gateway opened nothing it had sealed a moment before; the plain one opened the subject with both
    // tokens (one seal since stored version 4).
    expect(out.opens).toEqual({ fast: 0, plain: 1 });
    // Both subscribers of the fast gateway (ws and SSE share one execution) took the compiled selection; the plain one never does.
    expect(await compiledCount(fast)).toBe(fastBefore + 1);
    expect(await compiledCount(plain)).toBe(plainBefore);
  });

  it("the event each publishes is its stored row's JSON, key for key, whether handed on as the intake built it or parsed back", async () => {
    const success1 = `req-${randomUUID()}`;
    const failure1 = `req-${randomUUID()}`;
    const bodies = [
      [success1, await success(jwks.privateKey, success1, { carrier: 'op-x', nested: { a: [1, null, 'b'] } })],
      [failure1, { auth_req_id: failure1, error: 'access_denied', error_description: 'no', extra_thing: 'x' }],
    ] as const;
    for (const [id, body] of bodies) {
      for (const gw of [fast, plain]) {
        const published: { payload: unknown; meta: unknown }[] = [];
        const stop = gw.gateway.services.events.bus.subscribe('mobile-id', id, (e) => published.push(e));
        const headers = { 'x-mobileid-request-id': 'req-1' };
        expect((await postNotification(gw, body, { token: NOTIFY, headers })).status).toBe(204);
        await waitFor(() => published.length === 1);
        stop();
        const [row] = await gw.gateway.services.store.db
          .selectFrom('events')
          .select(['payload', 'meta'])
          .where('key', '=', id)
          .execute();
        // Strict: no key whose value is undefined, no class instance, the same keys in the same order.
        expect(published[0]!.payload).toStrictEqual(JSON.parse(row!.payload));
        expect(published[0]!.meta).toStrictEqual(JSON.parse(row!.meta));
        expect(JSON.stringify(published[0]!.payload)).toBe(row!.payload);
        expect(JSON.stringify(published[0]!.meta)).toBe(row!.meta);
      }
    }
  });

  it('a failure delivered live', async () => {
    const id = `req-${randomUUID()}`;
    const out = await compare(
      id,
      {
        auth_req_id: id,
        error: 'access_denied',
        error_description: 'the user cancelled',
        correlation_id: 'c',
        extra_thing: 'x',
      },
      { live: true },
    );
    expect(out.ws[0]!.payload!.data.mobileIdAuthentication).toMatchObject({
      __typename: 'MobileIdAuthenticationFailed',
      error: 'access_denied',
      otherFields: { extra_thing: 'x' },
    });
  });

  it('a success read from the log by a late subscriber (opened, not from the intake)', async () => {
    const id = `req-${randomUUID()}`;
    const out = await compare(id, await success(jwks.privateKey, id), { live: false });
    expect(out.ws[0]!.payload!.data.mobileIdAuthentication.subject).toBe('pcr-123');
    // Read from the log, each gateway opens what it reads, shortcut or not.
    expect(out.opens.fast).toBeGreaterThan(0);
    expect(out.opens.fast).toBe(out.opens.plain);
  });

  it('an error in the selection, masked (a stored access token that no longer opens): graphql-js answers after the compiled run', async () => {
    const id = `req-${randomUUID()}`;
    const out = await compare(id, await success(jwks.privateKey, id), { live: false, tamper: true });
    expect(out.ws[0]!.payload!.errors).toEqual([
      expect.objectContaining({
        message: 'Internal server error',
        path: ['mobileIdAuthentication', 'accessToken'],
        extensions: { code: 'INTERNAL_SERVER_ERROR' },
      }),
    ]);
  });

  it('an error before any event (an auth_req_id the schema refuses)', async () => {
    const id = 'x'.repeat(1000);
    const out = await compare(
      id,
      { auth_req_id: `req-${randomUUID()}`, error: 'access_denied', error_description: 'x' },
      { live: false, variables: { id } },
    );
    expect(JSON.stringify(out.ws)).toContain('BAD_USER_INPUT');
  });
});
