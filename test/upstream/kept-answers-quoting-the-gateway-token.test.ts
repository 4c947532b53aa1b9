// A 2xx whose id the gateway cannot read is kept with its idempotency key (UPSTREAM_ANSWER_INCOMPLETE) and shown to
// the app. When that answer quotes the gateway's own bearer token (an echo of the Authorization header), the token is
// masked in what is kept and shown: the database holds no upstream credential in clear.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startEchoingUpstream, type EchoingUpstream } from '../helpers/echoing-upstream.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const API_KEY = 'kept-answer-quotes-app';
const CLOUD_TOKEN = 'cloud-sa-token-77b1e4c09d';
const VERIFICATION_TOKEN = 'verification-jwt-2c3d4e5f6a';

describe('a kept answer that quotes the gateway token', () => {
  let upstream: EchoingUpstream;
  let gw: TestGateway;

  beforeAll(async () => {
    // Accepts every request with 200 and no id anywhere, echoing its Authorization header.
    upstream = await startEchoingUpstream((auth) => ({ status: 200, body: { accepted: true, echo: { auth } } }));
    const url = upstream.url;
    gw = await startTestGateway({
      GATEWAY_API_KEYS: API_KEY,
      CLOUD_API_URL: url,
      CLOUD_API_TOKEN: CLOUD_TOKEN,
      VERIFICATION_API_URL: url,
      VERIFICATION_API_TOKEN: VERIFICATION_TOKEN,
      SANDBOX_UPSTREAMS: 'identification,mobile-id',
      UPSTREAM_MAX_RETRIES: '0',
    });
  });
  afterAll(async () => {
    await gw.close();
    await upstream.close();
  });

  it.each([
    ['cloud', CLOUD_TOKEN, `mutation { createProject(input: { name: "p" }) { project { id } } }`],
    [
      'verification',
      VERIFICATION_TOKEN,
      `mutation { registerVerification(input: { workflowId: "wf", applicant: { lastName: "I" } }) { verification { externalId } } }`,
    ],
  ])('%s: kept and shown with the token masked', async (upstreamName, token, mutation) => {
    const res = await gw.graphql(mutation, {}, { key: API_KEY });
    expect(res.errors?.[0]?.extensions).toMatchObject({
      code: 'UPSTREAM_ANSWER_INCOMPLETE',
      upstream: upstreamName,
      answer: { accepted: true, echo: { auth: '***' } },
    });
    const files = fs.readdirSync(gw.dataDir).filter((f) => f.startsWith('gateway.sqlite'));
    const stored = files.map((f) => fs.readFileSync(path.join(gw.dataDir, f)).toString('latin1')).join('');
    expect(stored).toContain('"echo":{"auth":"***"}');
    expect(stored).not.toContain(token);
    expect(JSON.stringify(res)).not.toContain(token);
  });
});
