import type { SpanExporter } from '@opentelemetry/sdk-trace-node';

import type { Config } from '../config/index.js';
import type { SpanHandle, Tracing } from './span.js';

export type { SpanHandle, Tracing } from './span.js';

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

/**
 * Builds tracing from the OTEL_* configuration (src/config/index.ts). `exporter` replaces the configured one (tests pass
 * an InMemorySpanExporter); it is exported span by span then, instead of in batches. The OpenTelemetry SDK is loaded
 * only when tracing is on: off, the gateway's heap holds none of it (docs/decisions/123).
 */
export async function createTracing(
  config: Config['tracing'],
  options: { exporter?: SpanExporter } = {},
): Promise<Tracing> {
  if (!config.enabled && !options.exporter) return TRACING_OFF;
  const { sdkTracing } = await import('./tracing-sdk.js');
  return sdkTracing(config, options);
}
