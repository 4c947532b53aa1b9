// A 2xx answer the gateway takes (a creation with its id) may quote the gateway's own bearer token (an echo of the
// Authorization header). What is stored of it (the ledger's answer, the idempotency record) and shown to the app holds
// the token masked: the database never holds an upstream credential in clear.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startEchoingUpstream, type EchoingUpstream } from '../helpers/echoing-upstream.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const API_KEY = 'taken-answer-quotes-app';
const CLOUD_TOKEN = 'cloud-sa-token-5e8a1f03c7';

describe("a taken creation's answer that quotes the gateway token", () => {
  let upstream: EchoingUpstream;
  let gw: TestGateway;
  let created = 0;

  beforeAll(async () => {
    // Creates everything with a fresh id, echoing the request's Authorization header in the answer.
    upstream = await startEchoingUpstream((auth) => {
      created += 1;
      return { status: 201, body: { id: `p-${created}`, received: { auth }, note: `called with ${auth}` } };
    });
    const url = upstream.url;
    gw = await startTestGateway({
      GATEWAY_API_KEYS: API_KEY,
      CLOUD_API_URL: url,
      CLOUD_API_TOKEN: CLOUD_TOKEN,
      SANDBOX_UPSTREAMS: 'verification,identification,mobile-id',
      UPSTREAM_MAX_RETRIES: '0',
    });
  });
  afterAll(async () => {
    await gw.close();
    await upstream.close();
  });

  it('is created, and kept with the token masked', async () => {
    const res = await gw.graphql(
      `mutation { createProject(input: { name: "p" }) { project { id } } }`,
      {},
      {
        key: API_KEY,
      },
    );
    expect(res.errors).toBeUndefined();
    expect(res.data).toEqual({ createProject: { project: { id: 'p-1' } } });
    expect(created).toBe(1);
    await gw.close();
    const files = fs.readdirSync(gw.dataDir).filter((f) => f.startsWith('gateway.sqlite'));
    const stored = files.map((f) => fs.readFileSync(path.join(gw.dataDir, f)).toString('latin1')).join('');
    expect(stored).toContain('p-1');
    expect(stored).toContain('"received":{"auth":"***"}');
    expect(stored).not.toContain(CLOUD_TOKEN);
  });
});
