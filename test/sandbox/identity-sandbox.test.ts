import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';

import {
  IDENTIFICATIONS_PATH,
  SANDBOX_IDENTIFICATION_TOKEN,
  startIdentificationSandbox,
} from '../../src/sandbox/identification.js';
import {
  RESULTS_PATH,
  RFM_PATH,
  SANDBOX_VERIFICATION_TOKEN,
  startVerificationSandbox,
  VERIFICATIONS_PATH,
} from '../../src/sandbox/verification.js';

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
    // A field the spec's request table does not name is a misspelt one (`redirectURL`, `linkLifetime`): refused, so that
    // a gateway sending a wrong name fails its tests instead of having the field dropped without a word.
    [{ workflowId: 'wf', redirectURL: 'https://shop.example/done' }, 400],
    [{ workflowId: 'wf', linkLifetime: 30 }, 400],
  ])('answers %j with %i', async (body, status) => {
    const { url, auth } = await start();
    const res = await post(url, body, auth);
    expect(res.status).toBe(status);
    expect(res.body).toMatchObject({ code: expect.any(String), message: expect.any(String) });
  });

  it('names the unknown field it refuses, and takes every field of the request table and workflowPreferences', async () => {
    const { url, auth } = await start();
    const refused = await post(url, { workflowId: 'wf', redirectURL: 'https://shop.example/done' }, auth);
    expect(refused.body.message).toMatch(/redirectURL/);
    const full = {
      workflowId: 'wf',
      applicantExternalId: 'customer-42',
      linkLifetimeInMinutes: 30,
      redirectUrl: 'https://shop.example/done',
    };
    expect((await post(url, full, auth)).status).toBe(202);
    // The superseded detailed configuration the spec still names ("Workflow blocks"): an older integration's.
    expect((await post(url, { workflowId: 'wf', workflowPreferences: { bio: {} } }, auth)).status).toBe(202);
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
  /** A callback receiver that answers the given statuses in order (the last one from then on). */
  async function receiver(statuses: readonly number[] = [204]) {
    const received: Array<{ path: string; body: unknown }> = [];
    const server = createServer((req: IncomingMessage, res) => {
      let text = '';
      req.on('data', (c: Buffer) => (text += c.toString()));
      req.on('end', () => {
        received.push({ path: req.url ?? '', body: JSON.parse(text) });
        res.writeHead(statuses[Math.min(received.length, statuses.length) - 1]!).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    closers.push(() => new Promise((r) => server.close(() => r())));
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received };
  }

  // A delay no test waits out: the verification stays in progress until the test completes it with `s.complete`.
  const NEVER_MS = 3_600_000;
  // How long to wait for a callback before failing: it bounds a failure, the tests assert no duration.
  const EVENT = { timeout: 20_000 };

  async function start(callbackDelayMs: number) {
    const s = await startVerificationSandbox({ callbackDelayMs, callbackAttempts: 3 });
    closers.push(() => s.close());
    return { s, auth: { authorization: `Bearer ${SANDBOX_VERIFICATION_TOKEN}` } };
  }

  it('answers IN_PROGRESS until a verification completes, then calls back with the completed result, and serves results only for known ids', async () => {
    const { s, auth } = await start(NEVER_MS);
    const cb = await receiver();
    const reg = await post(
      s.url + VERIFICATIONS_PATH,
      { workflowId: 'wf', applicant: { lastName: 'X' }, callbackUrl: `${cb.url}/hook` },
      auth,
    );
    expect(reg.status).toBe(200);
    const id = reg.body.verificationExternalId as string;
    expect(reg.body.jobResults.status).toBe('ACCEPTED');

    const pending = await post(s.url + RESULTS_PATH, { verificationExternalId: [id, 'unknown'] }, auth);
    expect(pending.body.results).toEqual([
      expect.objectContaining({ verificationExternalId: id, status: 'IN_PROGRESS' }),
    ]);
    expect(cb.received).toEqual([]);

    await s.complete(id);
    await expect.poll(() => cb.received.length, EVENT).toBe(1);
    expect(cb.received[0]).toMatchObject({
      path: '/hook',
      body: { verificationExternalId: id, status: 'COMPLETED', decision: 'APPROVED' },
    });
    const done = await post(s.url + RESULTS_PATH, { verificationExternalId: id }, auth);
    expect(done.body.results[0]).toMatchObject({ status: 'COMPLETED' });
  });

  it('completes a verification by itself after callbackDelayMs and calls back', async () => {
    const { s, auth } = await start(20);
    const cb = await receiver();
    const reg = await post(s.url + VERIFICATIONS_PATH, { workflowId: 'wf', applicant: {}, callbackUrl: cb.url }, auth);
    const id = reg.body.verificationExternalId as string;
    await expect.poll(() => cb.received.length, EVENT).toBe(1);
    expect(cb.received[0]).toMatchObject({ body: { verificationExternalId: id, status: 'COMPLETED' } });
    expect((await post(s.url + RESULTS_PATH, { verificationExternalId: id }, auth)).body.results[0]).toMatchObject({
      status: 'COMPLETED',
    });
  });

  it('retries a callback answered 5xx and stops at the first 2xx', async () => {
    const { s, auth } = await start(NEVER_MS);
    const cb = await receiver([503, 200]);
    const reg = await post(s.url + VERIFICATIONS_PATH, { workflowId: 'wf', applicant: {}, callbackUrl: cb.url }, auth);
    await s.complete(reg.body.verificationExternalId as string);
    await expect.poll(() => cb.received.length, EVENT).toBe(2);
    expect(s.callbacks.filter((c) => c.externalId === reg.body.verificationExternalId).map((c) => c.status)).toEqual([
      503, 200,
    ]);
    // callbackAttempts is 3: a third attempt would be a retry after a 2xx.
    expect(cb.received).toHaveLength(2);
  });

  it('refuses bad registrations and answers the rfm check', async () => {
    const { s, auth } = await start(NEVER_MS);
    expect((await post(s.url + VERIFICATIONS_PATH, { applicant: {} }, auth)).status).toBe(400);
    expect((await post(s.url + VERIFICATIONS_PATH, { workflowId: 'wf', applicant: 'x' }, auth)).status).toBe(400);
    expect(
      (await post(s.url + VERIFICATIONS_PATH, { workflowId: 'wf', applicant: {}, callbackUrl: 'relative' }, auth))
        .status,
    ).toBe(400);
    expect((await post(s.url + VERIFICATIONS_PATH, { workflowId: 'unknown-1', applicant: {} }, auth)).status).toBe(404);
    expect((await post(s.url + VERIFICATIONS_PATH, { workflowId: 'wf', applicant: {} })).status).toBe(401);
    expect((await post(s.url + RESULTS_PATH, { verificationExternalId: [] }, auth)).status).toBe(400);
    const rfm = await post(s.url + RFM_PATH, { person: { name: 'listed person' } }, auth);
    expect(rfm.body).toMatchObject({ isInCatalog: true, matches: ['listed person'] });
  });
});
