// An upstream that refuses a request may quote what it was sent, the gateway's own bearer token among it (an echo of
// the Authorization header, a message naming the token it refused). That token is the gateway's credential, not the
// app's: the error the app gets and the log lines say the refusal with the token masked.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startEchoingUpstream, type EchoingUpstream } from '../helpers/echoing-upstream.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const API_KEY = 'refusal-quotes-app';
const CLOUD_TOKEN = 'cloud-sa-token-5c1d0e77a2';
const VERIFICATION_TOKEN = 'verification-jwt-0f9e8d7c6b';
const IDENTIFICATION_TOKEN = 'identification-token-3a4b5c6d';
const TOKENS = [CLOUD_TOKEN, VERIFICATION_TOKEN, IDENTIFICATION_TOKEN];

describe('an upstream refusal that quotes the gateway token', () => {
  let upstream: EchoingUpstream;
  let gw: TestGateway;

  beforeAll(async () => {
    // Refuses every request with 400, quoting its Authorization header in a message, as a field and base64-encoded.
    upstream = await startEchoingUpstream((auth) => ({
      status: 400,
      body: {
        message: `token refused: ${auth}`,
        received: { headers: { auth } },
        trace: Buffer.from(`auth=${auth}`).toString('base64'),
      },
    }));
    const url = upstream.url;
    gw = await startTestGateway({
      GATEWAY_API_KEYS: API_KEY,
      CLOUD_API_URL: url,
      CLOUD_API_TOKEN: CLOUD_TOKEN,
      VERIFICATION_API_URL: url,
      VERIFICATION_API_TOKEN: VERIFICATION_TOKEN,
      IDENTIFICATION_API_URL: url,
      IDENTIFICATION_API_TOKEN: IDENTIFICATION_TOKEN,
      SANDBOX_UPSTREAMS: 'mobile-id',
      UPSTREAM_MAX_RETRIES: '0',
    });
  });
  afterAll(async () => {
    await gw.close();
    await upstream.close();
  });

  it.each([
    ['cloud', `mutation { createProject(input: { name: "p" }) { project { id } } }`],
    [
      'verification',
      `mutation { registerVerification(input: { workflowId: "wf", applicant: { lastName: "I" } }) { verification { externalId } } }`,
    ],
    [
      'identification',
      `mutation { createIdentification(input: { workflowId: "wf", applicantExternalId: "c" }) { identification { id } } }`,
    ],
  ])('%s: the app sees the refusal, not the token', async (upstreamName, mutation) => {
    const res = await gw.graphql(mutation, {}, { key: API_KEY });
    expect(res.errors?.[0]?.extensions).toMatchObject({ upstream: upstreamName, status: 400 });
    expect(res.errors?.[0]?.message).toContain('token refused: ***');
    const seen = JSON.stringify(res) + gw.logs();
    for (const token of TOKENS) {
      expect(seen).not.toContain(token);
      expect(seen).not.toContain(Buffer.from(token).toString('base64').slice(0, 12));
    }
  });
});
