import type { IncomingHttpHeaders } from 'node:http';
import {
  context,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type TextMapGetter,
  type Tracer,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ConsoleSpanExporter,
  NodeTracerProvider,
  ParentBasedSampler,
  SimpleSpanProcessor,
  TraceIdRatioBasedSampler,
  type Sampler,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-node';

import type { Config } from '../config/index.js';

/** What the code that traces sees of a span: a name and attributes that never hold a secret. */
export interface SpanHandle {
  setAttribute(key: string, value: string | number | boolean): void;
  updateName(name: string): void;
  /** Marks the span failed with a short, secret-free description (an error code, a status). */
  fail(description: string): void;
}

/**
 * Tracing as the gateway uses it. With tracing off every method runs its function and nothing else (no span
 * object, no context switch): the cost of "off" is one call (bench/experiments/tracing-off.ts).
 */
export interface Tracing {
  readonly enabled: boolean;
  /** A SERVER span for one HTTP request, child of the app's W3C `traceparent` when it sent one. */
  server<T>(
    name: string,
    headers: IncomingHttpHeaders,
    attributes: Attributes,
    fn: (span: SpanHandle) => Promise<T>,
  ): Promise<T>;
  /** Runs `fn` with the app's W3C `traceparent` (from `headers`) as the parent of the spans it starts. */
  withParent<T>(headers: IncomingHttpHeaders, fn: () => T): T;
  /** A span for one GraphQL operation of a streaming transport (graphql-ws, graphql-sse). */
  operation<T>(name: string, attributes: Attributes, fn: (span: SpanHandle) => T): T;
  /** A CLIENT span for one upstream call; `inject` adds `traceparent` (and `tracestate`) to an attempt's headers. */
  client<T>(
    name: string,
    attributes: Attributes,
    fn: (span: SpanHandle, inject: (headers: Record<string, string>) => void) => Promise<T>,
  ): Promise<T>;
  /** The `traceparent` of the active span, to carry with a stored event; undefined when none. */
  traceparent(): string | undefined;
  /** A span for handing a stored event to one subscriber, linked to the span that took the event in. */
  delivery(name: string, intakeTraceparent: string | undefined, attributes: Attributes): void;
  /** Exports what is buffered and stops. */
  close(): Promise<void>;
}

const NOOP_SPAN: SpanHandle = { setAttribute() {}, updateName() {}, fail() {} };

export const TRACING_OFF: Tracing = {
  enabled: false,
  server: (_name, _headers, _attributes, fn) => fn(NOOP_SPAN),
  withParent: (_headers, fn) => fn(),
  operation: (_name, _attributes, fn) => fn(NOOP_SPAN),
  client: (_name, _attributes, fn) => fn(NOOP_SPAN, noInject),
  traceparent: () => undefined,
  delivery() {},
  close: async () => {},
};

function noInject(): void {}

const headerGetter: TextMapGetter<IncomingHttpHeaders> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => carrier[key.toLowerCase()],
};

let contextManagerReady = false;

/**
 * Spans flow through async code by AsyncLocalStorage: the context manager is process-wide (the OpenTelemetry
 * API has one), set once. Tracer providers are per gateway and never registered globally, so tests run
 * several gateways with their own exporters side by side.
 */
function ensureContextManager(): void {
  if (contextManagerReady) return;
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  contextManagerReady = true;
}

function sampler(config: Config['tracing']): Sampler {
  const ratio = new TraceIdRatioBasedSampler(config.samplerRatio);
  switch (config.sampler) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return ratio;
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: ratio });
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

class SpanWrapper implements SpanHandle {
  constructor(private readonly span: Span) {}
  setAttribute(key: string, value: string | number | boolean): void {
    this.span.setAttribute(key, value);
  }
  updateName(name: string): void {
    this.span.updateName(name);
  }
  fail(description: string): void {
    this.span.setStatus({ code: SpanStatusCode.ERROR, message: description });
  }
}

/**
 * Builds tracing from the OTEL_* configuration (src/config/index.ts). `exporter` replaces the configured one (tests pass
 * an InMemorySpanExporter); it is exported span by span then, instead of in batches.
 */
export function createTracing(config: Config['tracing'], options: { exporter?: SpanExporter } = {}): Tracing {
  if (!config.enabled && !options.exporter) return TRACING_OFF;
  ensureContextManager();
  const exporter: SpanExporter =
    options.exporter ??
    (config.exporter === 'console'
      ? new ConsoleSpanExporter()
      : new OTLPTraceExporter({ url: config.endpoint, headers: { ...config.headers } }));
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': config.serviceName }),
    sampler: sampler(config),
    spanProcessors: [
      options.exporter || config.exporter === 'console'
        ? new SimpleSpanProcessor(exporter)
        : new BatchSpanProcessor(exporter),
    ],
  });
  const tracer: Tracer = provider.getTracer('gateway');
  const propagator = new W3CTraceContextPropagator();

  async function run<T>(span: Span, parent: Context, fn: (handle: SpanHandle) => Promise<T>): Promise<T> {
    try {
      return await context.with(trace.setSpan(parent, span), () => fn(new SpanWrapper(span)));
    } catch (err) {
      // The error's class, not its message: a message may quote input.
      span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error)?.name ?? 'Error' });
      throw err;
    } finally {
      span.end();
    }
  }

  return {
    enabled: true,
    server(name, headers, attributes, fn) {
      const parent = propagator.extract(ROOT_CONTEXT, headers, headerGetter);
      const span = tracer.startSpan(name, { kind: SpanKind.SERVER, attributes }, parent);
      return run(span, parent, fn);
    },
    withParent(headers, fn) {
      return context.with(propagator.extract(ROOT_CONTEXT, headers, headerGetter), fn);
    },
    operation(name, attributes, fn) {
      const parent = context.active();
      const span = tracer.startSpan(name, { kind: SpanKind.SERVER, attributes }, parent);
      let result: ReturnType<typeof fn>;
      try {
        result = context.with(trace.setSpan(parent, span), () => fn(new SpanWrapper(span)));
      } catch (err) {
        span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error)?.name ?? 'Error' });
        span.end();
        throw err;
      }
      if (result instanceof Promise) {
        result.then(
          () => span.end(),
          (err: unknown) => {
            span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error)?.name ?? 'Error' });
            span.end();
          },
        );
      } else {
        span.end();
      }
      return result;
    },
    client(name, attributes, fn) {
      const parent = context.active();
      const span = tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes }, parent);
      const spanContext = trace.setSpan(parent, span);
      const inject = (headers: Record<string, string>) =>
        propagator.inject(spanContext, headers, { set: (c, k, v) => (c[k] = v) });
      return run(span, parent, (handle) => fn(handle, inject));
    },
    traceparent() {
      const carrier: Record<string, string> = {};
      propagator.inject(context.active(), carrier, { set: (c, k, v) => (c[k] = v) });
      return carrier.traceparent;
    },
    delivery(name, intakeTraceparent, attributes) {
      const links: Link[] = [];
      if (intakeTraceparent) {
        const intake = trace.getSpanContext(
          propagator.extract(ROOT_CONTEXT, { traceparent: intakeTraceparent }, headerGetter),
        );
        if (intake) links.push({ context: intake, attributes: { 'gateway.link': 'webhook intake' } });
      }
      tracer.startSpan(name, { kind: SpanKind.CONSUMER, attributes, links }, ROOT_CONTEXT).end();
    },
    async close() {
      await provider.forceFlush().catch(() => undefined);
      await provider.shutdown().catch(() => undefined);
    },
  };
}
