// Operation spans of the execution pipeline: named after the operation, never its text or variables.
import { SpanStatusCode, trace } from '@opentelemetry/api';

/** Names the active span after the operation (`mutation CreateProject`) once it is known. */
export function nameOperationSpan(type: string, operationName: string | null | undefined): void {
  const span = trace.getActiveSpan();
  if (!span) return;
  span.updateName(operationName ? `${type} ${operationName}` : type);
  span.setAttribute('graphql.operation.type', type);
  if (operationName) span.setAttribute('graphql.operation.name', operationName);
}

/** Records the error codes of a failed operation on the active span. */
export function recordOperationErrors(errors: readonly { extensions?: Record<string, unknown> }[]): void {
  const span = trace.getActiveSpan();
  if (!span) return;
  const codes = [...new Set(errors.map((e) => String(e.extensions?.code ?? 'GRAPHQL_ERROR')))];
  span.setAttribute('graphql.error.codes', codes);
  span.setStatus({ code: SpanStatusCode.ERROR, message: codes.join(',') });
}

/** Names the app on the active span (never its key): who did what, in traces as in metrics and logs. */
export function nameOperationApp(app: string): void {
  trace.getActiveSpan()?.setAttribute('gateway.app', app);
}
