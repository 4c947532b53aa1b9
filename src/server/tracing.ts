import type { ApolloServerPlugin } from '@apollo/server';
import { SpanStatusCode, trace } from '@opentelemetry/api';
import type { Tracing } from '../telemetry/tracing.js';
import type { Route } from './http.js';

/**
 * A route in a SERVER span (child of the app's `traceparent`): POST /graphql and the webhooks. The span's
 * attributes are the route's name (a template: a webhook path may hold a token) and the status, never a
 * header, the path or the body. Tracing off: the route itself.
 */
export function tracedRoute(route: Route, tracing: Tracing): Route {
  if (!tracing.enabled) return route;
  const method = route.method === 'ANY' ? undefined : route.method;
  return {
    ...route,
    handle: (req, res, ctx) =>
      tracing.server(route.name, req.headers, { 'http.request.method': method ?? req.method ?? 'GET', 'gateway.route': route.name }, async (span) => {
        await route.handle(req, res, ctx);
        span.setAttribute('http.response.status_code', res.statusCode);
        if (res.statusCode >= 500) span.fail(`HTTP ${res.statusCode}`);
      }),
  };
}

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

/**
 * Names the request's span after its GraphQL operation (`mutation CreateProject`) once Apollo has resolved it,
 * and records the error codes of a failed one. Never the document or the variables: they may hold secrets.
 * The planned path of POST /graphql (src/server/http-plans.ts) calls the same two functions.
 */
export function operationSpanPlugin<C extends object>(): ApolloServerPlugin<C> {
  return {
    async requestDidStart() {
      return {
        async didResolveOperation(rc) {
          if (!rc.operation) return;
          nameOperationSpan(rc.operation.operation, rc.operationName);
        },
        async didEncounterErrors(rc) {
          recordOperationErrors(rc.errors);
        },
      };
    },
  };
}
