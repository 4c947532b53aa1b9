// Tracing through the OpenTelemetry SDK: loaded by createTracing (tracing.ts) only when tracing is on.
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
import type { SpanHandle, Tracing } from './span.js';

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

/** Tracing on (createTracing in tracing.ts decides): spans through a tracer provider of this gateway's own. */
export function sdkTracing(config: Config['tracing'], options: { exporter?: SpanExporter }): Tracing {
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
