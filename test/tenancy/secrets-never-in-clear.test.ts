// "Passwords, tokens and id_tokens are never logged and never stored in clear" (docs/contract.md, Ledger), held on
// every path at once: one gateway at LOG_LEVEL=trace with tracing on, driven with distinctive secret values through
// POST, graphql-ws, SSE (a reserved stream's token included), MCP plans, the webhooks (callback tokens in the path,
// right and wrong), JWTs, and the sandbox upstreams over loopback, failures included (an upstream 400 that echoes the
// request, bad input, a refused notification kept in the quarantine, refused JWTs, a reload). Then
// every log line, span, the /metrics text and the raw bytes of every file in DATA_DIR are searched for each secret,
// as written and in its base64, base64url, URL-encoded and hex forms.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { createClient as createSseClient } from 'graphql-sse';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { appsFile, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import {
  AUDIENCE,
  EVERY_APP_SCOPE,
  ISSUER,
  sign,
  signingKey,
  startJwksServer,
  type JwksServer,
} from '../helpers/jwt.js';
import { mcpClient, textOf } from '../helpers/mcp.js';
import { collect, postNotification, SUBSCRIPTION, wsClient } from '../helpers/mobile-id.js';
import { waitFor, waitForSubscribers } from '../helpers/wait.js';

const API_KEY = 'SECRET-apikey-7f3a91c2d4e5';
const KAFKA_PW = 'SECRET-kafka-pw-7f3a11b0c9';
const VM_PW = 'SECRET-vm-pw-9c4e22a8f1';
const PROVISION_PW = 'SECRET-prov-pw-3d8a33e7b2';
const ECHOED_PW = 'SECRET-echoed-pw-5a1c44d6f0';
const MCP_PW = 'SECRET-mcp-pw-2b7d55c3a9';
const TEXT_PW = 'SECRET-text-pw-8e2f66b4d1';
const ACCESS_TOKEN = 'SECRET-mid-access-6e1f77a2c8';
const FORM_ACCESS_TOKEN = 'SECRET-mid-form-access-8c3a88d5e1';
const QUARANTINED_ACCESS_TOKEN = 'SECRET-mid-quarantined-access-1d9b99f7a3';
const WRONG_NOTIFICATION_TOKEN = 'SECRET-mid-wrong-notif-4f6c00b8e2';
const CLOUD_CREDENTIAL = 'SECRET-cloud-credential-0e2f11c4d7';
const ENCRYPTION_KEY = randomBytes(32);
const WRONG_CALLBACK_TOKEN = 'SECRET-wrong-callback-token-6b2e13f9c4a7d08e5f1b';
const WRONG_STREAM_TOKEN = 'SECRET-wrong-stream-token-3e8d27a1';

/** What is searched for: each secret, and what it becomes once encoded. */
function formsOf(secret: string): string[] {
  const b = Buffer.from(secret, 'utf8');
  return [
    ...new Set([secret, b.toString('base64'), b.toString('base64url'), encodeURIComponent(secret), b.toString('hex')]),
  ];
}

const secrets = new Map<string, string>([
  ['API key', API_KEY],
  ['Kafka user password', KAFKA_PW],
  ['VM password', VM_PW],
  ['provisioned Kafka user password', PROVISION_PW],
  ['password an upstream 400 echoes', ECHOED_PW],
  ['password in an MCP plan', MCP_PW],
  ['password a 2xx text answer echoes (kept with its key)', TEXT_PW],
  ['mobile-ID access_token', ACCESS_TOKEN],
  ['form-encoded access_token', FORM_ACCESS_TOKEN],
  ['quarantined access_token', QUARANTINED_ACCESS_TOKEN],
  ['refused notification token', WRONG_NOTIFICATION_TOKEN],
  ['cloud credential', CLOUD_CREDENTIAL],
  ['callback token no callback is registered at', WRONG_CALLBACK_TOKEN],
  ['SSE stream token no stream is reserved at', WRONG_STREAM_TOKEN],
  ['TOKEN_ENCRYPTION_KEY', ENCRYPTION_KEY.toString('base64')],
]);

const KAFKA_USER = `mutation($input: CreateKafkaUserInput!) { createKafkaUser(input: $input) { kafkaUser { id } } }`;

/** Every file under DATA_DIR, as bytes. */
function dataDirFiles(dir: string): Map<string, Buffer> {
  const files = new Map<string, Buffer>();
  for (const entry of fs.readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const file = path.join(entry.parentPath, entry.name);
    files.set(path.relative(dir, file), fs.readFileSync(file));
  }
  return files;
}

describe('secrets on every path', () => {
  let gw: TestGateway;
  let jwks: JwksServer;
  const exporter = new InMemorySpanExporter();
  let metricsText = '';
  let spansText = '';
  let files = new Map<string, Buffer>();

  beforeAll(async () => {
    const jwtKey = await signingKey('k1');
    jwks = await startJwksServer([jwtKey]);
    gw = await startTestGateway(
      {
        AUTH_JWKS_URL: jwks.url,
        AUTH_ISSUER: ISSUER,
        AUTH_AUDIENCE: AUDIENCE,
        AUTH_APPS: '*',
        LOG_LEVEL: 'trace',
        TOKEN_ENCRYPTION_KEY: ENCRYPTION_KEY.toString('base64'),
        SANDBOX_UPSTREAMS: 'cloud,identification,verification,rfm,mobile-id',
        CLOUD_API_CREDENTIALS: JSON.stringify({ keyId: 'audit', secret: CLOUD_CREDENTIAL }),
        GATEWAY_APPS_FILE: appsFile('secrets-', [
          {
            name: 'auditor',
            scopes: EVERY_APP_SCOPE.split(' '),
            key: API_KEY,
          },
        ]),
        MCP_MUTATIONS: 'approve',
        MCP_APPROVAL: 'elicitation',
      },
      { testing: { traceExporter: exporter } },
    );
    const key = API_KEY;
    const ok = async (query: string, variables: Record<string, unknown>) => {
      const res = await gw.graphql(query, variables, { key });
      expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
      return Object.values(res.data!)[0] as any;
    };

    // Cloud creations over POST, passwords included.
    const projectId = (
      await ok(`mutation($i: CreateProjectInput!) { createProject(input: $i) { project { id } } }`, {
        i: { name: 'audit' },
      })
    ).project.id;
    const networkId = (
      await ok(`mutation($i: CreateNetworkInput!) { createNetwork(input: $i) { network { id } } }`, {
        i: { projectId, title: 'net' },
      })
    ).network.id;
    const subnetId = (
      await ok(`mutation($i: CreateSubnetInput!) { createSubnet(input: $i) { subnet { id } } }`, {
        i: { projectId, networkId, title: 'sub', cidr: '10.20.0.0/24' },
      })
    ).subnet.id;
    const ipAddressId = (
      await ok(`mutation($i: CreateIpAddressInput!) { createIpAddress(input: $i) { ipAddress { id } } }`, {
        i: { projectId, networkId, title: 'ip' },
      })
    ).ipAddress.id;
    const clusterId = (
      await ok(`mutation($i: CreateKafkaClusterInput!) { createKafkaCluster(input: $i) { kafkaCluster { id } } }`, {
        i: { projectId, title: 'kafka', instanceType: 'C2_MEDIUM', subnetId },
      })
    ).kafkaCluster.id;
    await ok(KAFKA_USER, { input: { projectId, clusterId, name: 'app', password: KAFKA_PW } });
    await ok(`mutation($i: CreateVirtualMachineInput!) { createVirtualMachine(input: $i) { virtualMachine { id } } }`, {
      i: {
        projectId,
        title: 'vm',
        instanceType: 'C2_MEDIUM',
        bootDisk: { sizeGb: 20, image: 'UBUNTU_22_04' },
        users: [{ name: 'ops', password: VM_PW }],
        networkInterfaces: [{ networkId, subnetId, ipAddressId }],
      },
    });
    // Bad input, and an upstream 400 whose body echoes the password it was sent.
    await gw.graphql(KAFKA_USER, { input: { projectId, clusterId, name: '', password: KAFKA_PW } }, { key });
    const echo = { status: 400, body: { code: 'BAD_REQUEST', details: `password ${ECHOED_PW} is too weak` } };
    gw.gateway.sandbox.cloud!.faults.enqueue(echo);
    const rejected = await gw.graphql(
      KAFKA_USER,
      { input: { projectId, clusterId, name: 'echoed', password: ECHOED_PW } },
      { key },
    );
    expect(rejected.errors?.[0]?.extensions?.code).toBe('UPSTREAM_REJECTED');
    // A creation answered 2xx in text that echoes the password: the answer is kept with the idempotency key
    // (UPSTREAM_ANSWER_INCOMPLETE), and what is kept must not hold it.
    gw.gateway.sandbox.cloud!.faults.enqueue({ alter: () => `created the user app-text with password ${TEXT_PW}` });
    const incomplete = await gw.graphql(
      KAFKA_USER,
      { input: { projectId, clusterId, name: 'app-text', password: TEXT_PW } },
      { key },
    );
    expect(incomplete.errors?.[0]?.extensions?.code, JSON.stringify(incomplete.errors)).toBe(
      'UPSTREAM_ANSWER_INCOMPLETE',
    );
    // A provisioning whose user step (after the cluster's) the upstream refuses with the same echo: its failure is
    // stored and streamed.
    gw.gateway.sandbox.cloud!.faults.enqueueFor(
      /services/,
      { alter: (body) => body },
      { ...echo, body: { code: 'BAD_REQUEST', details: `password ${PROVISION_PW} is too weak` } },
    );
    const provisioning = await ok(
      `mutation($i: ProvisionKafkaClusterInput!) { provisionKafkaCluster(input: $i) { provisioning { id } } }`,
      {
        i: {
          projectId,
          networkId,
          subnetId,
          cluster: { title: 'kafka-2', instanceType: 'C2_MEDIUM' },
          users: [{ name: 'prov', password: PROVISION_PW }],
        },
      },
    );
    // The run's end, waited for as an event (with no limit of its own but the setup's).
    await gw.gateway.services.provisioning.idle();

    const failed = await gw.graphql(
      `query($id: ID!) { provisioning(id: $id) { state error { code message } } }`,
      { id: provisioning.provisioning.id },
      { key },
    );
    // The app reads why its step failed, the upstream's text included, with its password masked.
    expect(failed.data!.provisioning).toEqual({
      state: 'FAILED',
      error: {
        code: 'UPSTREAM_REJECTED',
        message: 'cloud rejected the request with status 400: password *** is too weak',
      },
    });

    // Mobile-ID, on a notification token issued to the app.
    const issued = await ok(`mutation { issueMobileIdNotificationToken { token } }`, {});
    const NOTIFICATION_TOKEN = issued.token as string;
    secrets.set('issued notification token', NOTIFICATION_TOKEN);
    secrets.set('sandbox notification token', gw.gateway.sandbox.mobileId!.notificationToken);
    // A subscriber over graphql-ws (key in connectionParams) and one over SSE (key in the header).
    const mobileId = gw.gateway.sandbox.mobileId!;
    const ws = wsClient(gw, { key });
    const sse = createSseClient({
      url: `${gw.url}/graphql/stream`,
      headers: { authorization: `Bearer ${key}` },
      retryAttempts: 0,
    });
    const overWs = collect(ws, SUBSCRIPTION, { id: 'audit-json' });
    const overSse = collect(sse, SUBSCRIPTION, { id: 'audit-form' });
    await waitForSubscribers(gw, 'mobile-id', 'audit-json');
    await waitForSubscribers(gw, 'mobile-id', 'audit-form');
    const json = await mobileId.buildNotification({ authReqId: 'audit-json', accessToken: ACCESS_TOKEN });
    expect((await postNotification(gw, json.body, { token: NOTIFICATION_TOKEN })).status).toBe(204);
    const form = await mobileId.buildNotification({ authReqId: 'audit-form', accessToken: FORM_ACCESS_TOKEN });
    const formBody = new URLSearchParams(
      Object.entries(form.body).map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)]),
    ).toString();
    const formAnswer = await postNotification(gw, formBody, {
      token: NOTIFICATION_TOKEN,
      contentType: 'application/x-www-form-urlencoded',
    });
    expect(formAnswer.status, formAnswer.text).toBe(204);
    await overWs.done;
    await overSse.done;
    await ws.dispose();
    sse.dispose();
    secrets.set('mobile-ID id_token', String(json.body.id_token));
    secrets.set('mobile-ID id_token signature', String(json.body.id_token).split('.')[2]!);
    secrets.set('form-encoded id_token signature', String(form.body.id_token).split('.')[2]!);
    // Refused: a wrong notification token, and a bad body on the right one; both go to the quarantine.
    const quarantined = await mobileId.buildNotification({
      authReqId: 'audit-refused',
      accessToken: QUARANTINED_ACCESS_TOKEN,
    });
    expect((await postNotification(gw, quarantined.body, { token: WRONG_NOTIFICATION_TOKEN })).status).toBe(401);
    const badBody = { ...quarantined.body, expires_in: 'soon' };
    expect((await postNotification(gw, badBody, { token: NOTIFICATION_TOKEN })).status).toBe(400);
    secrets.set('quarantined id_token signature', String(quarantined.body.id_token).split('.')[2]!);

    // A verification: its callbackUrl holds a token, which the sandbox then calls back.
    await ok(
      `mutation($i: RegisterVerificationInput!) { registerVerification(input: $i) { verification { externalId } } }`,
      { i: { workflowId: 'wf-audit', applicant: { firstName: 'Ada' } } },
    );
    const registration = gw.gateway.sandbox.verification!.requests.find((r) => r.method === 'POST');
    const callbackUrl = String((registration!.body as { callbackUrl: string }).callbackUrl);
    secrets.set('verification callback token', callbackUrl.split('/').pop()!);
    await waitFor(
      async () =>
        (
          await gw.gateway.services.store.db
            .selectFrom('events')
            .selectAll()
            .where('kind', '=', 'verification')
            .execute()
        ).length > 0 || undefined,
      20_000,
      'the verification callback',
    );

    // An identification whose platform calls back on the address the gateway handed out (its token in the path).
    const identification = await ok(
      `mutation($i: CreateIdentificationInput!) { createIdentification(input: $i) { identification { id callbackUrl } } }`,
      { i: { workflowId: 'wf-audit-identification' } },
    );
    secrets.set('identification callback token', identification.identification.callbackUrl.split('/').pop()!);
    expect(await gw.gateway.sandbox.identification!.complete(identification.identification.id)).toBe(204);
    // Callbacks on addresses the gateway never handed out: refused, their tokens no more kept than the right ones.
    for (const kind of ['verification', 'identification']) {
      const wrong = await request(`${gw.url}/webhooks/${kind}/${WRONG_CALLBACK_TOKEN}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      });
      expect(wrong.statusCode).toBe(404);
      await wrong.body.dump();
    }

    // An app signed in with its identity provider's JWT, and JWTs refused (expired, signed with another key).
    const jwt = await sign(jwtKey);
    expect((await gw.graphql('{ __typename }', undefined, { key: jwt })).errors).toBeUndefined();
    const expiredJwt = await sign(jwtKey, { exp: Math.floor(Date.now() / 1000) - 3600 });
    const forgedJwt = await sign(await signingKey('k1'));
    for (const refused of [expiredJwt, forgedJwt])
      expect((await gw.graphql('{ __typename }', undefined, { key: refused })).status).toBe(401);
    secrets.set('JWT', jwt);
    for (const [name, token] of [
      ['JWT', jwt],
      ['expired JWT', expiredJwt],
      ['JWT of another key', forgedJwt],
    ] as const)
      secrets.set(`${name} signature`, token.split('.')[2]!);

    // SSE in single-connection mode: a reserved stream's token, named in the query and in the header, and a token
    // that names no stream.
    const reserved = await request(`${gw.url}/graphql/stream`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${key}` },
    });
    expect(reserved.statusCode).toBe(201);
    const streamToken = await reserved.body.text();
    secrets.set('SSE reserved stream token', streamToken);
    const operation = (operationId: string) =>
      JSON.stringify({ query: SUBSCRIPTION, variables: { id: `audit-${operationId}` }, extensions: { operationId } });
    for (const [at, token, status] of [
      ['query', streamToken, 202],
      ['header', streamToken, 202],
      ['query', WRONG_STREAM_TOKEN, 404],
    ] as const) {
      const added = await request(`${gw.url}/graphql/stream${at === 'query' ? `?token=${token}` : ''}`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': 'application/json',
          ...(at === 'header' ? { 'x-graphql-event-stream-token': token } : {}),
        },
        body: operation(`${at}-${status}`),
      });
      expect(added.statusCode).toBe(status);
      await added.body.dump();
    }

    // MCP: a plan that holds a password, approved and run.
    const agent = await mcpClient(gw, { key, person: 'accept' });
    const planned = await agent.call('create_kafka_user', {
      input: { projectId, clusterId, name: 'mcp', password: MCP_PW },
    });
    expect(planned.isError, textOf(planned)).toBeFalsy();
    const executed = await agent.call('execute_plan', { planId: planned.structuredContent!.planId });
    expect(executed.isError, textOf(executed)).toBeFalsy();
    await agent.close();

    // A reload, then the metrics.
    await gw.gateway.reload('SIGHUP');
    metricsText = await (
      await request(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${key}` } })
    ).body.text();
    // Read before the close: shutting the exporter down empties it.
    spansText = JSON.stringify(
      exporter.getFinishedSpans().map((s) => [s.name, s.attributes, s.events, s.status, s.links]),
    );
    await gw.close();
    files = dataDirFiles(gw.dataDir);
  }, 60_000);
  afterAll(async () => {
    await gw.close();
    await jwks.stop();
  });

  it('the secrets really went through: sent upstream, delivered, quarantined', () => {
    const sent = JSON.stringify(gw.gateway.sandbox.cloud!.requests.map((r) => r.body));
    for (const s of [KAFKA_PW, VM_PW, PROVISION_PW, ECHOED_PW, MCP_PW, TEXT_PW, CLOUD_CREDENTIAL])
      expect(sent).toContain(s);
    expect(gw.logs()).toContain('mobile-ID notification refused');
    expect(spansText).toContain('gateway.route');
    expect(metricsText).toContain('gateway_');
    expect([...files.keys()]).toContain('gateway.sqlite');
  });

  it('no secret is in a log line, a span, /metrics or a file in DATA_DIR, in any of its encodings', () => {
    const logs = gw.logs();
    const found: string[] = [];
    for (const [name, secret] of secrets) {
      for (const form of formsOf(secret)) {
        if (logs.includes(form)) found.push(`${name} (${form}) in the log`);
        if (spansText.includes(form)) found.push(`${name} (${form}) in a span`);
        if (metricsText.includes(form)) found.push(`${name} (${form}) in /metrics`);
        for (const [file, bytes] of files)
          if (bytes.includes(Buffer.from(form, 'utf8'))) found.push(`${name} (${form}) in ${file}`);
      }
    }
    expect(found).toEqual([]);
  });
});
