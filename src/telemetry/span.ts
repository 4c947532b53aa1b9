// What the gateway's code sees of tracing: tracing.ts builds it (TRACING_OFF, or tracing-sdk.ts's when tracing is on).
import type { IncomingHttpHeaders } from 'node:http';
import type { Attributes } from '@opentelemetry/api';

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
