import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { IDENTIFICATIONS_PATH, SANDBOX_IDENTIFICATION_TOKEN, startIdentificationSandbox } from '../../src/sandbox/identification.js';
import { RESULTS_PATH, RFM_PATH, SANDBOX_VERIFICATION_TOKEN, VERIFICATIONS_PATH, startVerificationSandbox } from '../../src/sandbox/verification.js';

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((c) => c()));
});

async function post(url: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.body.text();
  return { status: res.statusCode, body: text ? (JSON.parse(text) as any) : undefined };
}

describe('identification sandbox', () => {
  async function start() {
    const s = await startIdentificationSandbox();
    closers.push(() => s.close());
    return { s, url: s.url + IDENTIFICATIONS_PATH, auth: { authorization: `Bearer ${SANDBOX_IDENTIFICATION_TOKEN}` } };
  }

  it('answers 202 with id, idShort and url, and 401 without or with a wrong token', async () => {
    const { url, auth } = await start();
    const ok = await post(url, { workflowId: 'wf' }, auth);
    expect(ok.status).toBe(202);
    expect(Object.keys(ok.body).sort()).toEqual(['id', 'idShort', 'url']);
    expect((await post(url, { workflowId: 'wf' })).status).toBe(401);
    expect((await post(url, { workflowId: 'wf' }, { authorization: 'Bearer nope' })).status).toBe(401);
  });

  it.each([
    [{}, 400],
    [{ workflowId: 'wf', linkLifetimeInMinutes: 196 }, 400],
    [{ workflowId: 'wf', linkLifetimeInMinutes: 1.5 }, 400],
    [{ workflowId: 'wf', redirectUrl: 'not a url' }, 400],
    [{ workflowId: 'unknown-wf' }, 404],
  ])('answers %j with %i', async (body, status) => {
    const { url, auth } = await start();
    const res = await post(url, body, auth);
    expect(res.status).toBe(status);
    expect(res.body).toMatchObject({ code: expect.any(String), message: expect.any(String) });
  });

  it('replays the first answer for a repeated Idempotency-Key and refuses it for another body', async () => {
    const { s, url, auth } = await start();
    const key = randomUUID();
    const a = await post(url, { workflowId: 'wf' }, { ...auth, 'idempotency-key': key });
    const b = await post(url, { workflowId: 'wf' }, { ...auth, 'idempotency-key': key });
    const c = await post(url, { workflowId: 'other' }, { ...auth, 'idempotency-key': key });
    expect(b.body).toEqual(a.body);
    expect(c.status).toBe(409);
    expect(s.identifications()).toHaveLength(1);
  });
});

describe('verification sandbox', () => {
  async function receiver() {
    const received: Array<{ path: string; body: unknown }> = [];
    let status = 204;
    const server = createServer((req: IncomingMessage, res) => {
      let text = '';
      req.on('data', (c: Buffer) => (text += c.toString()));
      req.on('end', () => {
        received.push({ path: req.url ?? '', body: JSON.parse(text) });
        res.writeHead(status).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    closers.push(() => new Promise((r) => server.close(() => r())));
    return {
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      received,
      setStatus: (s: number) => (status = s),
    };
  }

  async function start(callbackDelayMs = 20) {
    const s = await startVerificationSandbox({ callbackDelayMs, callbackAttempts: 3 });
    closers.push(() => s.close());
    return { s, auth: { authorization: `Bearer ${SANDBOX_VERIFICATION_TOKEN}` } };
  }

  it('registers, calls back after the delay with a completed result, and serves results only for known ids', async () => {
    const { s, auth } = await start();
    const cb = await receiver();
    const reg = await post(s.url + VERIFICATIONS_PATH, { workflowId: 'wf', applicant: { lastName: 'X' }, callbackUrl: `${cb.url}/hook` }, auth);
    expect(reg.status).toBe(200);
    const id = reg.body.verificationExternalId as string;
    expect(reg.body.jobResults.status).toBe('ACCEPTED');

    const pending = await post(s.url + RESULTS_PATH, { verificationExternalId: [id, 'unknown'] }, auth);
    expect(pending.body.results).toEqual([expect.objectContaining({ verificationExternalId: id, status: 'IN_PROGRESS' })]);

    await expect.poll(() => cb.received.length).toBe(1);
    expect(cb.received[0]).toMatchObject({ path: '/hook', body: { verificationExternalId: id, status: 'COMPLETED', decision: 'APPROVED' } });
    const done = await post(s.url + RESULTS_PATH, { verificationExternalId: id }, auth);
    expect(done.body.results[0]).toMatchObject({ status: 'COMPLETED' });
  });

  it('retries a callback answered 5xx and stops at the first 2xx', async () => {
    const { s, auth } = await start();
    const cb = await receiver();
    cb.setStatus(503);
    const reg = await post(s.url + VERIFICATIONS_PATH, { workflowId: 'wf', applicant: {}, callbackUrl: cb.url }, auth);
    await expect.poll(() => cb.received.length).toBe(1);
    cb.setStatus(200);
    await expect.poll(() => cb.received.length, { timeout: 3000 }).toBe(2);
    expect(s.callbacks.filter((c) => c.externalId === reg.body.verificationExternalId).map((c) => c.status)).toEqual([503, 200]);
  });

  it('refuses bad registrations and answers the rfm check', async () => {
    const { s, auth } = await start(60_000);
    expect((await post(s.url + VERIFICATIONS_PATH, { applicant: {} }, auth)).status).toBe(400);
    expect((await post(s.url + VERIFICATIONS_PATH, { workflowId: 'wf', applicant: 'x' }, auth)).status).toBe(400);
    expect((await post(s.url + VERIFICATIONS_PATH, { workflowId: 'wf', applicant: {}, callbackUrl: 'relative' }, auth)).status).toBe(400);
    expect((await post(s.url + VERIFICATIONS_PATH, { workflowId: 'unknown-1', applicant: {} }, auth)).status).toBe(404);
    expect((await post(s.url + VERIFICATIONS_PATH, { workflowId: 'wf', applicant: {} })).status).toBe(401);
    expect((await post(s.url + RESULTS_PATH, { verificationExternalId: [] }, auth)).status).toBe(400);
    const rfm = await post(s.url + RFM_PATH, { person: { name: 'listed person' } }, auth);
    expect(rfm.body).toMatchObject({ isInCatalog: true, matches: ['listed person'] });
  });
});
