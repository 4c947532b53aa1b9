import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import {
  SANDBOX_IDENTIFICATION_TOKEN,
  startIdentificationSandbox,
  type IdentificationSandbox,
} from '../../src/sandbox/identification.js';
import { upstreamKey } from '../../src/upstream/idempotency.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const PATH = '/api/v2/identifications/workflow-instances';

const CREATE = /* GraphQL */ `
  mutation Create($input: CreateIdentificationInput!, $key: UUID) {
    createIdentification(input: $input, idempotencyKey: $key) {
      identification {
        id
        idShort
        url
        workflowId
        applicantExternalId
        environment
        linkLifetimeInMinutes
        redirectUrl
        expiresAt
        expired
        createdAt
      }
      idempotencyKey
      upstreamIdempotencyKey
      replayed
    }
  }
`;

describe('identification links against the sandbox', () => {
  let t: TestGateway;
  let production: IdentificationSandbox;
  let prodlike: IdentificationSandbox;

  beforeAll(async () => {
    t = await startTestGateway({ UPSTREAM_MAX_RETRIES: '2', UPSTREAM_RETRY_BUDGET: '5s' });
    production = t.gateway.sandbox.identification!;
    prodlike = t.gateway.sandbox.identificationProdlike!;
  });
  afterAll(() => t.close());
  afterEach(() => {
    production.clearRequests();
    prodlike.clearRequests();
    production.faults.clear();
    prodlike.faults.clear();
  });

  it('sends one POST with the bearer token and the spec body, and serves the 202 link from identification(id) and node(id)', async () => {
    const before = Date.now();
    const res = await t.graphql(CREATE, {
      input: {
        workflowId: 'wf-onboarding',
        applicantExternalId: 'client-42',
        linkLifetimeInMinutes: 30,
        redirectUrl: 'https://app.example/done',
      },
    });
    const after = Date.now();
    expect(res.errors).toBeUndefined();
    const payload = res.data!.createIdentification;

    expect(production.requests).toHaveLength(1);
    const sent = production.requests[0]!;
    expect(sent.method).toBe('POST');
    expect(sent.path).toBe(PATH);
    expect(sent.headers.authorization).toBe(`Bearer ${SANDBOX_IDENTIFICATION_TOKEN}`);
    expect(sent.headers['content-type']).toBe('application/json');
    expect(sent.headers['idempotency-key']).toBe(payload.upstreamIdempotencyKey);
    expect(payload.upstreamIdempotencyKey).toBe(upstreamKey('open', payload.idempotencyKey));
    expect(sent.body).toEqual({
      workflowId: 'wf-onboarding',
      applicantExternalId: 'client-42',
      linkLifetimeInMinutes: 30,
      redirectUrl: 'https://app.example/done',
    });
    expect(sent.status).toBe(202);
    expect(prodlike.requests).toHaveLength(0);

    const [created] = production.identifications();
    const link = payload.identification;
    expect(link).toMatchObject({
      id: created!.id,
      idShort: created!.idShort,
      url: created!.url,
      workflowId: 'wf-onboarding',
      applicantExternalId: 'client-42',
      environment: 'PRODUCTION',
      linkLifetimeInMinutes: 30,
      redirectUrl: 'https://app.example/done',
      expired: false,
    });
    expect(payload.replayed).toBe(false);
    // Thirty minutes from the call, bracketed by the wall's clock before and after it: a loaded machine's slow answer
    // widens the bracket, never fails it.
    expect(Date.parse(link.expiresAt)).toBeGreaterThanOrEqual(before + 30 * 60_000);
    expect(Date.parse(link.expiresAt)).toBeLessThanOrEqual(after + 30 * 60_000);

    const read = await t.graphql(
      `query($id: ID!) {
        identification(id: $id) { id idShort url environment expiresAt }
        node(id: $id) { __typename id ... on Identification { url workflowId } }
      }`,
      { id: link.id },
    );
    expect(read.errors).toBeUndefined();
    expect(read.data!.identification).toEqual({
      id: link.id,
      idShort: link.idShort,
      url: link.url,
      environment: 'PRODUCTION',
      expiresAt: link.expiresAt,
    });
    expect(read.data!.node).toEqual({
      __typename: 'Identification',
      id: link.id,
      url: link.url,
      workflowId: 'wf-onboarding',
    });

    // The link is real: the sandbox serves the page the user opens.
    const page = await fetch(link.url);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('wf-onboarding');
  });

  it('sends only workflowId when the optional fields are omitted, and leaves expiresAt null', async () => {
    const res = await t.graphql(CREATE, { input: { workflowId: 'wf-short' } });
    expect(res.errors).toBeUndefined();
    expect(production.requests[0]!.body).toEqual({ workflowId: 'wf-short' });
    expect(res.data!.createIdentification.identification).toMatchObject({
      expiresAt: null,
      expired: false,
      linkLifetimeInMinutes: null,
      redirectUrl: null,
    });
  });

  it('sends environment PRODLIKE to the second address, with the same path and token', async () => {
    expect(prodlike.url).not.toBe(production.url);
    const res = await t.graphql(CREATE, { input: { workflowId: 'wf-onboarding', environment: 'PRODLIKE' } });
    expect(res.errors).toBeUndefined();
    expect(production.requests).toHaveLength(0);
    expect(prodlike.requests).toHaveLength(1);
    expect(prodlike.requests[0]!.path).toBe(PATH);
    expect(prodlike.requests[0]!.headers.authorization).toBe(`Bearer ${SANDBOX_IDENTIFICATION_TOKEN}`);
    const link = res.data!.createIdentification.identification;
    expect(link.environment).toBe('PRODLIKE');
    expect(prodlike.identifications().map((i) => i.id)).toEqual([link.id]);
    expect(link.url.startsWith(prodlike.url)).toBe(true);
  });

  it.each([
    [196, 'input.linkLifetimeInMinutes'],
    [0, 'input.linkLifetimeInMinutes'],
  ])('refuses a lifetime of %i minutes before the wire', async (minutes, field) => {
    const res = await t.graphql(CREATE, { input: { workflowId: 'wf-onboarding', linkLifetimeInMinutes: minutes } });
    expect(res.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field });
    expect(res.errors?.[0]?.message).toContain('1 to 195');
    expect(production.requests).toHaveLength(0);
  });

  it('refuses a redirectUrl over 2,048 characters before the wire', async () => {
    const res = await t.graphql(CREATE, {
      input: { workflowId: 'wf', redirectUrl: `https://app.example/${'x'.repeat(2030)}` },
    });
    expect(res.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'input.redirectUrl' });
    expect(res.errors?.[0]?.message).toBe('input.redirectUrl: must be at most 2048 characters');
    expect(production.requests).toHaveLength(0);
  });

  it('sends redirectUrl without the blanks around it, as it shows it', async () => {
    const res = await t.graphql(CREATE, {
      input: { workflowId: 'wf-blanks', redirectUrl: ' https://app.example/done\n' },
    });
    expect(res.errors).toBeUndefined();
    expect(production.requests[0]!.body).toMatchObject({ redirectUrl: 'https://app.example/done' });
    expect(res.data!.createIdentification.identification.redirectUrl).toBe('https://app.example/done');
  });

  it.each(['https://app.example/a b', 'https://app.example/do\nne', 'https://app.example/ю', 'https://пример.рф/done'])(
    'refuses a redirectUrl %j that holds a character a URL cannot, before the wire',
    async (redirectUrl) => {
      const res = await t.graphql(CREATE, { input: { workflowId: 'wf', redirectUrl } });
      expect(res.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'input.redirectUrl' });
      expect(res.errors?.[0]?.message).toContain('percent-encode');
      expect(production.requests).toHaveLength(0);
    },
  );

  it('sends a redirectUrl written with percent-encoding and punycode as it was given', async () => {
    const redirectUrl = "https://xn--e1afmkfd.xn--p1ai/%D1%8E?next=a%20b&x=[1]~!$'()*+,;=@:";
    const res = await t.graphql(CREATE, { input: { workflowId: 'wf', redirectUrl } });
    expect(res.errors).toBeUndefined();
    expect(production.requests[0]!.body).toMatchObject({ redirectUrl });
  });

  it('accepts the maximum lifetime of 195 minutes', async () => {
    const res = await t.graphql(CREATE, { input: { workflowId: 'wf-onboarding', linkLifetimeInMinutes: 195 } });
    expect(res.errors).toBeUndefined();
    expect(production.requests[0]!.body).toMatchObject({ linkLifetimeInMinutes: 195 });
  });

  it.each([
    [{ workflowId: '  ' }, 'input.workflowId'],
    [{ workflowId: 'wf', redirectUrl: '/relative/path' }, 'input.redirectUrl'],
    [{ workflowId: 'wf', redirectUrl: 'ftp://files.example/x' }, 'input.redirectUrl'],
  ])('refuses %j before the wire', async (input, field) => {
    const res = await t.graphql(CREATE, { input });
    expect(res.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field });
    expect(production.requests).toHaveLength(0);
  });

  it('maps an upstream 400 to BAD_USER_INPUT carrying the upstream message', async () => {
    production.faults.enqueueFor(PATH, {
      status: 400,
      body: { code: 'BAD_REQUEST', message: 'applicantExternalId has a wrong format' },
    });
    const res = await t.graphql(CREATE, { input: { workflowId: 'wf-onboarding', applicantExternalId: '###' } });
    expect(res.errors?.[0]?.extensions).toMatchObject({
      code: 'BAD_USER_INPUT',
      upstream: 'identification',
      status: 400,
    });
    expect(res.errors?.[0]?.message).toContain('applicantExternalId has a wrong format');
    expect(production.requests).toHaveLength(1);
  });

  it('maps an upstream 404 (unknown workflow) to NOT_FOUND', async () => {
    const res = await t.graphql(CREATE, { input: { workflowId: 'unknown-workflow' } });
    expect(production.requests[0]!.status).toBe(404);
    expect(res.errors?.[0]?.extensions).toMatchObject({ code: 'NOT_FOUND', status: 404 });
  });

  it('maps an upstream 409 to CONFLICT', async () => {
    production.faults.enqueueFor(PATH, {
      status: 409,
      body: { code: 'CONFLICT', message: 'applicant is being identified' },
    });
    const res = await t.graphql(CREATE, { input: { workflowId: 'wf-onboarding' } });
    expect(res.errors?.[0]?.extensions).toMatchObject({ code: 'CONFLICT', status: 409 });
    expect(production.requests).toHaveLength(1);
  });

  it('does not repeat a request answered 500 (its outcome is unknown): UPSTREAM_OUTCOME_UNKNOWN names the key, and the app retries with it under the same upstream key', async () => {
    production.faults.enqueueFor(PATH, { status: 500, retryAfterSeconds: null });
    const key = randomUUID();
    const res = await t.graphql(CREATE, { input: { workflowId: 'wf-onboarding' }, key });
    expect(res.errors?.[0]?.extensions).toMatchObject({
      code: 'UPSTREAM_OUTCOME_UNKNOWN',
      upstream: 'identification',
      attempts: 1,
      status: 500,
      idempotencyKey: key,
      upstreamIdempotencyKey: upstreamKey('open', key),
    });
    expect(production.requests).toHaveLength(1);

    // The app's retry with the same key is its decision; it re-sends the same upstream key and succeeds.
    const again = await t.graphql(CREATE, { input: { workflowId: 'wf-onboarding' }, key });
    expect(again.errors).toBeUndefined();
    expect(production.requests.map((r) => r.headers['idempotency-key'])).toEqual([
      upstreamKey('open', key),
      upstreamKey('open', key),
    ]);
  });

  it('never creates a second link for a client retry with the same key', async () => {
    const key = randomUUID();
    const input = { workflowId: 'wf-retry', linkLifetimeInMinutes: 10 };
    const first = await t.graphql(CREATE, { input, key });
    const second = await t.graphql(CREATE, { input, key });
    expect(first.errors).toBeUndefined();
    expect(second.errors).toBeUndefined();
    expect(second.data!.createIdentification.replayed).toBe(true);
    expect(second.data!.createIdentification.identification).toEqual(first.data!.createIdentification.identification);
    expect(production.requests).toHaveLength(1);
    expect(production.identifications().filter((i) => i.workflowId === 'wf-retry')).toHaveLength(1);

    const other = await t.graphql(CREATE, { input: { ...input, linkLifetimeInMinutes: 11 }, key });
    expect(other.errors?.[0]?.extensions?.code).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(production.requests).toHaveLength(1);
  });

  it("does not repeat a request whose answer was lost; the app's retry with the same key gets the one link the upstream made", async () => {
    production.faults.enqueueFor(PATH, 'reset-after');
    const key = randomUUID();
    const res = await t.graphql(CREATE, { input: { workflowId: 'wf-lost-answer' }, key });
    expect(res.errors?.[0]?.extensions).toMatchObject({
      code: 'UPSTREAM_OUTCOME_UNKNOWN',
      upstream: 'identification',
      idempotencyKey: key,
    });
    expect(production.requests).toHaveLength(1);
    expect(production.identifications().filter((i) => i.workflowId === 'wf-lost-answer')).toHaveLength(1);

    const again = await t.graphql(CREATE, { input: { workflowId: 'wf-lost-answer' }, key });
    expect(again.errors).toBeUndefined();
    expect(production.requests).toHaveLength(2);
    expect(production.identifications().filter((i) => i.workflowId === 'wf-lost-answer')).toHaveLength(1);
  });
});

describe('identification upstream credentials and addresses', () => {
  it('maps an upstream 401 (a wrong token) to UPSTREAM_UNAUTHENTICATED', async () => {
    const t = await startTestGateway({ IDENTIFICATION_API_TOKEN: 'not-the-sandbox-token' });
    try {
      const res = await t.graphql(CREATE, { input: { workflowId: 'wf-onboarding' } });
      const sandbox = t.gateway.sandbox.identification!;
      expect(sandbox.requests).toHaveLength(1);
      expect(sandbox.requests[0]!.headers.authorization).toBe('Bearer not-the-sandbox-token');
      expect(sandbox.requests[0]!.status).toBe(401);
      expect(res.errors?.[0]?.extensions).toMatchObject({ code: 'UPSTREAM_UNAUTHENTICATED', status: 401 });
      expect(t.logs()).not.toContain('not-the-sandbox-token');
    } finally {
      await t.close();
    }
  });

  it('uses IDENTIFICATION_API_URL and IDENTIFICATION_PRODLIKE_API_URL with IDENTIFICATION_API_TOKEN, and refuses PRODLIKE when only production is configured', async () => {
    const token = 'configured-identification-token';
    const prod = await startIdentificationSandbox({ acceptedTokens: [token] });
    const pre = await startIdentificationSandbox({ acceptedTokens: [token], environment: 'prodlike' });
    const both = await startTestGateway({
      GATEWAY_API_KEYS: 'app-key',
      SANDBOX_UPSTREAMS: 'cloud,verification,rfm,mobile-id',
      IDENTIFICATION_API_URL: prod.url,
      IDENTIFICATION_PRODLIKE_API_URL: pre.url,
      IDENTIFICATION_API_TOKEN: token,
    });
    const onlyProduction = await startTestGateway({
      GATEWAY_API_KEYS: 'app-key',
      SANDBOX_UPSTREAMS: 'cloud,verification,rfm,mobile-id',
      IDENTIFICATION_API_URL: prod.url,
      IDENTIFICATION_API_TOKEN: token,
    });
    try {
      expect(both.gateway.sandbox.identification).toBeNull();
      const a = await both.graphql(CREATE, { input: { workflowId: 'wf' } }, { key: 'app-key' });
      const b = await both.graphql(
        CREATE,
        { input: { workflowId: 'wf', environment: 'PRODLIKE' } },
        { key: 'app-key' },
      );
      expect(a.errors).toBeUndefined();
      expect(b.errors).toBeUndefined();
      expect(prod.requests.map((r) => r.headers.authorization)).toEqual([`Bearer ${token}`]);
      expect(pre.requests.map((r) => r.headers.authorization)).toEqual([`Bearer ${token}`]);

      const refused = await onlyProduction.graphql(
        CREATE,
        { input: { workflowId: 'wf', environment: 'PRODLIKE' } },
        { key: 'app-key' },
      );
      expect(refused.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'input.environment' });
      expect(prod.requests).toHaveLength(1);
      expect(pre.requests).toHaveLength(1);
    } finally {
      await Promise.all([both.close(), onlyProduction.close()]);
      await Promise.all([prod.close(), pre.close()]);
    }
  });
});
