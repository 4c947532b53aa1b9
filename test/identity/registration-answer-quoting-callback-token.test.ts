// The callback token of a verification is a secret (whoever holds it posts that verification's result): the gateway
// stores only its keyed digest. A verification service that echoes the callbackUrl in its registration answer, which
// the gateway keeps, had the token stored in clear; it is masked in the kept answer, and the callback still works.
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const API_KEY = 'callback-echo-app';
const REGISTER = `mutation($externalId: ID) {
  registerVerification(input: { workflowId: "wf", applicant: { lastName: "I" }, externalId: $externalId }) {
    verification { externalId }
  }
}`;

describe('a registration answer that quotes the callback address', () => {
  let upstream: http.Server;
  let gw: TestGateway;
  const callbacks: string[] = [];

  beforeAll(async () => {
    // Answers 200 quoting the callbackUrl it was sent; with an id only when it was sent one.
    upstream = http.createServer((req, res) => {
      let text = '';
      req.on('data', (c: Buffer) => (text += c.toString()));
      req.on('end', () => {
        const sent = JSON.parse(text) as { callbackUrl: string; externalId?: string };
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
      });
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    gw = await startTestGateway({
      GATEWAY_API_KEYS: API_KEY,
      VERIFICATION_API_URL: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
      VERIFICATION_API_TOKEN: 'verification-token-1',
      SANDBOX_UPSTREAMS: 'cloud,identification,rfm,mobile-id',
    });
  });
  afterAll(async () => {
    await gw.close();
    await new Promise((resolve) => upstream.close(resolve));
  });

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
