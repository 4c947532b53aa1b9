// The callback token of a verification is a secret (whoever holds it posts that verification's result): the gateway
// stores only its keyed digest. A verification service that echoes the callbackUrl in its registration answer, which
// the gateway keeps, had the token stored in clear; it is masked in the kept answer, and the callback still works.
// A refusal that quotes it reached the app in clear (its message and upstreamError), the token still valid when an
// earlier send of the same registration may have been applied.
import fs from 'node:fs';
import path from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { gatewayOnVerificationStub } from '../helpers/identity.js';

const API_KEY = 'callback-echo-app';
const REGISTER = `mutation($externalId: ID) {
  registerVerification(input: { workflowId: "wf", applicant: { lastName: "I" }, externalId: $externalId }) {
    verification { externalId }
  }
}`;

describe('a registration answer that quotes the callback address', () => {
  let gw: TestGateway;
  let close: () => Promise<void>;
  const callbacks: string[] = [];

  beforeAll(async () => {
    // Answers 200 quoting the callbackUrl it was sent; with an id only when it was sent one.
    ({ gw, close } = await gatewayOnVerificationStub(
      API_KEY,
      (sent: { callbackUrl: string; externalId?: string }, res) => {
        callbacks.push(sent.callbackUrl);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            ...(sent.externalId ? { verificationExternalId: sent.externalId } : {}),
            status: 'ACCEPTED',
            callbackUrl: sent.callbackUrl,
            note: `results go to ${encodeURIComponent(sent.callbackUrl)}`,
          }),
        );
      },
    ));
  });
  afterAll(() => close());

  const stored = () =>
    fs
      .readdirSync(gw.dataDir)
      .filter((f) => f.startsWith('gateway.sqlite'))
      .map((f) => fs.readFileSync(path.join(gw.dataDir, f)).toString('latin1'))
      .join('');

  it('is kept with the token masked, and the callback address still answers', async () => {
    const res = await gw.graphql(REGISTER, { externalId: 'v-echo-1' }, { key: API_KEY });
    expect(res.errors).toBeUndefined();
    const url = callbacks.at(-1)!;
    const token = url.split('/').pop()!;
    expect(stored()).not.toContain(token);
    const posted = await request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ verificationExternalId: 'v-echo-1', status: 'DONE' }),
    });
    await posted.body.text();
    expect(posted.statusCode).toBe(204);
  });

  it('is kept with the token masked when the answer lacks the id (UPSTREAM_ANSWER_INCOMPLETE)', async () => {
    const res = await gw.graphql(REGISTER, {}, { key: API_KEY });
    expect(res.errors?.[0]?.extensions?.code).toBe('UPSTREAM_ANSWER_INCOMPLETE');
    const token = callbacks.at(-1)!.split('/').pop()!;
    expect(JSON.stringify(res)).not.toContain(token);
    expect(stored()).not.toContain(token);
  });
});

describe('a registration refusal that quotes the callback address', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway({ LOG_LEVEL: 'trace' });
  });
  afterAll(() => gw.close());

  it('is read by the app with the token masked, and neither logged nor stored, on a retry after an unknown outcome', async () => {
    const verification = gw.gateway.sandbox.verification!;
    const key = '7d1c2a3e-4b5f-4c6d-8e9f-0a1b2c3d4e5f';
    // The first send may have been registered (no answer known): its token stays valid, and the retry under the same
    // key sends the same callbackUrl, which the refusal quotes.
    verification.faults.enqueue({ status: 500 });
    const unknown = await gw.graphql(
      `mutation($key: UUID) { registerVerification(input: { workflowId: "wf", applicant: { lastName: "I" } }, idempotencyKey: $key) { verification { externalId } } }`,
      { key },
    );
    expect(unknown.errors?.[0]?.extensions?.code, JSON.stringify(unknown.errors)).toBe('UPSTREAM_OUTCOME_UNKNOWN');
    const url = String((verification.requests.at(-1)!.body as { callbackUrl: string }).callbackUrl);
    const token = url.split('/').pop()!;
    verification.faults.enqueue({
      status: 400,
      body: { message: `callbackUrl ${url} is not reachable`, hint: `see ${encodeURIComponent(url)}` },
    });
    const refused = await gw.graphql(
      `mutation($key: UUID) { registerVerification(input: { workflowId: "wf", applicant: { lastName: "I" } }, idempotencyKey: $key) { verification { externalId } } }`,
      { key },
    );
    expect(String((verification.requests.at(-1)!.body as { callbackUrl: string }).callbackUrl)).toBe(url);
    expect(refused.errors?.[0]?.extensions?.status, JSON.stringify(refused.errors)).toBe(400);
    // The upstream's words still reach the app, the token masked in them.
    expect(refused.errors![0]!.message).toContain('/webhooks/verification/*** is not reachable');
    expect(JSON.stringify(refused)).not.toContain(token);
    await gw.close();
    expect(gw.logs()).not.toContain(token);
    const files = fs
      .readdirSync(gw.dataDir)
      .filter((f) => f.startsWith('gateway.sqlite'))
      .map((f) => fs.readFileSync(path.join(gw.dataDir, f)).toString('latin1'))
      .join('');
    expect(files).not.toContain(token);
  });
});
