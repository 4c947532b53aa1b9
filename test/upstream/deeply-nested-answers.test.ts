// An upstream answer that nests arrays and objects far deeper than any answer needs (100,000 levels) is read for what
// it holds, its deep part cut away: the creation it answers is recorded under its id, a refusal is a refusal, and the
// gateway walks no answer deeper than it can (never INTERNAL_SERVER_ERROR, never a key left pending).
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { M } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const API_KEY = 'deep-answers-app';
const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);

let answer = { status: 200, body: '' };
let server: http.Server;
let gw: TestGateway;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(answer.status, { 'content-type': 'application/json' });
      res.end(answer.body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  gw = await startTestGateway({
    GATEWAY_API_KEYS: API_KEY,
    CLOUD_API_URL: url,
    CLOUD_API_TOKEN: 'service-account-token',
    IDENTIFICATION_API_URL: url,
    IDENTIFICATION_API_TOKEN: 'identification-token',
    VERIFICATION_API_URL: url,
    VERIFICATION_API_TOKEN: 'verification-token',
    SANDBOX_UPSTREAMS: 'rfm,mobile-id',
    UPSTREAM_CIRCUIT_BREAKER: 'off',
  });
});
afterAll(async () => {
  await gw?.close();
  await new Promise((resolve) => server.close(resolve));
});

const ask = (query: string, variables: Record<string, unknown> = {}) => gw.graphql(query, variables, { key: API_KEY });

describe('an upstream answer nested 100,000 levels deep', () => {
  it('creates a project under the id the answer names, and a retry with the same key replays it', async () => {
    const id = randomUUID();
    answer = { status: 201, body: `{"id":"${id}","status":{"history":${deep(100_000)}}}` };
    const key = randomUUID();
    const first = await ask(M.project, { input: { name: 'deep' }, key });
    expect(first.errors, JSON.stringify(first.errors)).toBeUndefined();
    expect(first.data!.createProject).toMatchObject({ project: { id }, replayed: false });
    const again = await ask(M.project, { input: { name: 'deep' }, key });
    expect(again.data!.createProject).toMatchObject({ project: { id }, replayed: true });
    expect((await ask('{ projects { id } }')).data!.projects).toContainEqual({ id });
  });

  it('is a refusal, with its status, when it answers 400', async () => {
    answer = { status: 400, body: `{"message":"bad request","details":${deep(100_000)}}` };
    const res = await ask(M.project, { input: { name: 'deep-refused' }, key: randomUUID() });
    expect(res.errors?.[0]?.extensions).toMatchObject({ code: 'UPSTREAM_REJECTED', upstream: 'cloud', status: 400 });
  });

  it('creates an identification link and registers a verification under the ids they name', async () => {
    answer = {
      status: 202,
      body: `{"id":"ident-deep","idShort":"d1","url":"https://id.example/d1","meta":${deep(100_000)}}`,
    };
    const link = await ask(
      `mutation { createIdentification(input: { workflowId: "wf" }) { identification { id url } } }`,
    );
    expect(link.errors, JSON.stringify(link.errors)).toBeUndefined();
    expect(link.data!.createIdentification.identification).toEqual({ id: 'ident-deep', url: 'https://id.example/d1' });

    answer = { status: 200, body: `{"verificationExternalId":"v-deep","jobResults":${deep(100_000)}}` };
    const registered = await ask(
      `mutation { registerVerification(input: { workflowId: "wf", applicant: { lastName: "X" }, callback: false }) {
        verification { externalId } } }`,
    );
    expect(registered.errors, JSON.stringify(registered.errors)).toBeUndefined();
    expect(registered.data!.registerVerification.verification.externalId).toBe('v-deep');
  });

  it('answers the verification results it holds', async () => {
    answer = {
      status: 200,
      body: `{"results":[{"verificationExternalId":"v-deep","status":"COMPLETED","checks":${deep(100_000)}}]}`,
    };
    const res = await ask(`{ verificationResults(externalIds: ["v-deep"]) { externalId status } }`);
    expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
    expect(res.data!.verificationResults).toEqual([{ externalId: 'v-deep', status: 'COMPLETED' }]);
  });

  it('leaves the gateway healthy', async () => {
    expect((await fetch(`${gw.url}/healthz`)).status).toBe(200);
  });
});
