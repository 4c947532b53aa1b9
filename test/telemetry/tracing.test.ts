// OpenTelemetry tracing over real HTTP: the gateway on port 0 with an in-memory exporter in place of OTLP, the
// sandbox upstreams on loopback.
import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { createClient as createSseClient } from 'graphql-sse';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';

import { loadConfig } from '../../src/config/index.js';
import { SANDBOX_SERVICE_ACCOUNT_TOKEN } from '../../src/sandbox/index.js';
import { createTracing } from '../../src/telemetry/tracing.js';
import { createChain, M, ok } from '../helpers/cloud.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { collect, postNotification, SUBSCRIPTION, wsClient } from '../helpers/mobile-id.js';
import { waitFor, waitForSubscribers } from '../helpers/wait.js';

const started: TestGateway[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((g) => g.close()));
});

async function traced(env: Record<string, string> = {}): Promise<{ gw: TestGateway; spans: () => ReadableSpan[] }> {
  const exporter = new InMemorySpanExporter();
  const gw = await startTestGateway(env, { testing: { traceExporter: exporter } });
  started.push(gw);
  return { gw, spans: () => exporter.getFinishedSpans() };
}

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const APP_SPAN_ID = '00f067aa0ba902b7';
const TRACEPARENT = `00-${TRACE_ID}-${APP_SPAN_ID}-01`;
const OTHER_TRACE_ID = '0af7651916cd43dd8448eb211c80319c';

const eventually = <T>(find: () => T | undefined, what: string): Promise<T> => waitFor(find, 20_000, what);

describe('tracing with OpenTelemetry', () => {
  it("makes one span per GraphQL operation, named after it, continuing the app's W3C traceparent", async () => {
    const { gw, spans } = await traced();
    const res = await gw.graphql(
      'mutation CreateProject($input: CreateProjectInput!) { createProject(input: $input) { project { id } } }',
      { input: { name: 'traced' } },
      { headers: { traceparent: TRACEPARENT } },
    );
    expect(res.errors).toBeUndefined();
    const op = await eventually(() => spans().find((s) => s.name === 'mutation CreateProject'), 'operation span');
    expect(op.kind).toBe(SpanKind.SERVER);
    expect(op.spanContext().traceId).toBe(TRACE_ID);
    expect(op.parentSpanContext?.spanId).toBe(APP_SPAN_ID);
    expect(op.attributes).toMatchObject({
      'graphql.operation.type': 'mutation',
      'graphql.operation.name': 'CreateProject',
      'http.response.status_code': 200,
    });
    expect(spans().filter((s) => s.kind === SpanKind.SERVER)).toHaveLength(1);
  });

  it('names the app on the operation span, never its key', async () => {
    const { gw, spans } = await traced({ GATEWAY_API_KEYS: 'shop:shop-key-0123456789' });
    expect(
      (await gw.graphql('query Projects { projects { id } }', {}, { key: 'shop-key-0123456789' })).errors,
    ).toBeUndefined();
    const op = await eventually(() => spans().find((s) => s.name === 'query Projects'), 'operation span');
    expect(op.attributes['gateway.app']).toBe('shop');
    expect(JSON.stringify(spans().map((s) => s.attributes))).not.toContain('shop-key-0123456789');
  });

  it('makes a client span per upstream call under its operation, and sends its traceparent upstream', async () => {
    const { gw, spans } = await traced();
    await ok(gw, M.project, { input: { name: 'upstream-span' } });
    const op = await eventually(() => spans().find((s) => s.name.startsWith('mutation')), 'operation span');
    const calls = spans().filter((s) => s.kind === SpanKind.CLIENT);
    expect(calls.length).toBeGreaterThanOrEqual(1);
    const create = calls.find((s) => s.attributes['url.template'] === 'POST /apis/projects/public/v4/projects')!;
    expect(create, calls.map((c) => c.name).join(', ')).toBeDefined();
    expect(create.parentSpanContext?.spanId).toBe(op.spanContext().spanId);
    expect(create.spanContext().traceId).toBe(op.spanContext().traceId);
    expect(create.attributes).toMatchObject({
      'gateway.upstream': 'cloud',
      'http.response.status_code': expect.any(Number),
      'gateway.upstream.attempts': 1,
    });

    // The cloud sandbox saw the client span's own context in the request it received.
    const received = gw.gateway.sandbox.cloud!.requests.map((r) => r.headers.traceparent);
    expect(received).toContain(`00-${create.spanContext().traceId}-${create.spanContext().spanId}-01`);
  });

  it('makes a span per webhook intake, and links the delivery to a live subscriber and to a late one to it', async () => {
    const { gw, spans } = await traced();
    const live = collect(wsClient(gw), SUBSCRIPTION, { id: 'traced-auth' });
    await waitForSubscribers(gw, 'mobile-id', 'traced-auth');
    const n = await gw.gateway.sandbox.mobileId!.buildNotification({ authReqId: 'traced-auth', outcome: 'SUCCESS' });
    expect((await postNotification(gw, n.body, { headers: { traceparent: TRACEPARENT } })).status).toBe(204);
    await live.done;
    expect(live.results[0].data.mobileIdAuthentication.__typename).toBe('MobileIdAuthenticated');

    const sse = createSseClient({
      url: `${gw.url}/graphql/stream`,
      retryAttempts: 0,
      headers: { traceparent: `00-${OTHER_TRACE_ID}-${APP_SPAN_ID}-01` },
    });
    await new Promise<void>((resolve, reject) =>
      sse.subscribe(
        { query: SUBSCRIPTION, variables: { id: 'traced-auth' } },
        { next: () => {}, error: reject, complete: resolve },
      ),
    );
    sse.dispose();

    const intake = await eventually(() => spans().find((s) => s.name === 'POST /webhooks/mobile-id'), 'intake span');
    expect(intake.kind).toBe(SpanKind.SERVER);
    expect(intake.spanContext().traceId).toBe(TRACE_ID);
    expect(intake.attributes['http.response.status_code']).toBe(204);
    const deliveries = await eventually(() => {
      const found = spans().filter((s) => s.name === 'deliver mobile-id event');
      return found.length >= 2 ? found : undefined;
    }, 'two delivery spans');
    for (const delivery of deliveries) {
      expect(delivery.links.map((l) => l.context.spanId)).toEqual([intake.spanContext().spanId]);
      expect(delivery.links[0]!.context.traceId).toBe(TRACE_ID);
    }
    // Each transport's subscription had its operation span too; over SSE it continues the app's traceparent.
    const subscriptions = spans().filter((s) => s.name === 'subscription');
    expect(subscriptions.map((s) => s.attributes['gateway.transport']).sort()).toEqual(['sse', 'ws']);
    const overSse = subscriptions.find((s) => s.attributes['gateway.transport'] === 'sse')!;
    expect(overSse.spanContext().traceId).toBe(OTHER_TRACE_ID);
    expect(overSse.parentSpanContext?.spanId).toBe(APP_SPAN_ID);
  });

  it('puts no secret in any span: API key, passwords, upstream and webhook tokens', async () => {
    const { gw, spans } = await traced({ GATEWAY_API_KEYS: 'very-secret-app-key' });
    await createChain(gw, 'very-secret-app-key');
    const n = await gw.gateway.sandbox.mobileId!.buildNotification({ authReqId: 'secret-auth', outcome: 'SUCCESS' });
    expect((await postNotification(gw, n.body)).status).toBe(204);
    // A verification: the sandbox calls back on /webhooks/verification/<token>, a secret in the path.
    const reg = await gw.graphql(
      'mutation { registerVerification(input: { workflowId: "wf-kyc", applicant: { lastName: "Ivanova" } }) { verification { externalId } } }',
      {},
      { key: 'very-secret-app-key' },
    );
    expect(reg.errors).toBeUndefined();
    const callback = await eventually(
      () => spans().find((s) => s.name === 'POST /webhooks/verification/:token'),
      'verification callback span',
    );
    expect(callback.attributes['http.response.status_code']).toBe(204);

    const verificationSandbox = gw.gateway.sandbox.verification!;
    const callbackToken = new URL(verificationSandbox.verifications()[0]!.callbackUrl!).pathname.split('/').pop()!;
    const body = n.body as Record<string, string>;
    const secrets = [
      'very-secret-app-key',
      'S3cret-kafka-pass!',
      'Vm-pa55word!',
      SANDBOX_SERVICE_ACCOUNT_TOKEN,
      gw.gateway.sandbox.mobileId!.notificationToken,
      body.access_token!,
      body.id_token!,
      callbackToken,
    ];
    expect(secrets.every((s) => typeof s === 'string' && s.length >= 8)).toBe(true);
    const everything = JSON.stringify(
      spans().map((s) => ({
        name: s.name,
        attributes: s.attributes,
        status: s.status,
        events: s.events,
        links: s.links.map((l) => l.attributes),
        resource: s.resource.attributes,
      })),
    );
    expect(spans().length).toBeGreaterThan(10);
    for (const secret of secrets) expect(everything, 'a secret in a span').not.toContain(secret);
  });

  it('is off by default: nothing is traced and no traceparent goes upstream, whatever the app sends', async () => {
    const gw = await startTestGateway();
    started.push(gw);
    await ok(gw, M.project, { input: { name: 'untraced' } }, undefined);
    expect(gw.gateway.sandbox.cloud!.requests.length).toBeGreaterThan(0);
    expect(gw.gateway.sandbox.cloud!.requests.some((r) => 'traceparent' in r.headers)).toBe(false);
    const res = await request(`${gw.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent: TRACEPARENT },
      body: JSON.stringify({ query: '{ __typename }' }),
    });
    expect(res.statusCode).toBe(200);
    await res.body.text();
  });
});

describe('tracing configuration (the standard OTEL_* variables)', () => {
  it('turns tracing on only with an exporter, and OTEL_SDK_DISABLED wins', async () => {
    expect(loadConfig({}).tracing.enabled).toBe(false);
    expect((await createTracing(loadConfig({}).tracing)).enabled).toBe(false);
    expect(loadConfig({ OTEL_TRACES_EXPORTER: 'otlp' }).tracing).toMatchObject({
      enabled: true,
      exporter: 'otlp',
      endpoint: 'http://localhost:4318/v1/traces',
      serviceName: 'gateway',
    });
    expect(loadConfig({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_SDK_DISABLED: 'true' }).tracing.enabled).toBe(false);
    expect(
      loadConfig({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }).tracing
        .endpoint,
    ).toBe('http://collector:4318/v1/traces');
    expect(
      loadConfig({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://otlp.example/v1/t' })
        .tracing.endpoint,
    ).toBe('https://otlp.example/v1/t');
    expect(loadConfig({ OTEL_EXPORTER_OTLP_HEADERS: 'Authorization=Bearer%20abc,x-tenant=7' }).tracing.headers).toEqual(
      { authorization: 'Bearer abc', 'x-tenant': '7' },
    );
    expect(
      loadConfig({ OTEL_SERVICE_NAME: 'edge-gw', OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25' })
        .tracing,
    ).toMatchObject({ serviceName: 'edge-gw', sampler: 'traceidratio', samplerRatio: 0.25 });
  });

  it('refuses bad values with a clear message, and never repeats the collector headers (they may hold a token)', () => {
    expect(() => loadConfig({ OTEL_TRACES_EXPORTER: 'zipkin' })).toThrow(
      /OTEL_TRACES_EXPORTER: must be none, otlp or console/,
    );
    expect(() => loadConfig({ OTEL_TRACES_SAMPLER_ARG: '2' })).toThrow(
      /OTEL_TRACES_SAMPLER_ARG: must be a decimal number from 0 to 1/,
    );
    let message = '';
    try {
      loadConfig({ OTEL_EXPORTER_OTLP_HEADERS: 'secret-token-without-a-name' });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/^OTEL_EXPORTER_OTLP_HEADERS: must be key=value pairs/);
    expect(message).not.toContain('secret-token-without-a-name');
  });
});
