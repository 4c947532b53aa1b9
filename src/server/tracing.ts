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

/**
 * Names the request's span after its GraphQL operation (`mutation CreateProject`) once Apollo has resolved it,
 * and records the error codes of a failed one. Never the document or the variables: they may hold secrets.
 */
export function operationSpanPlugin<C extends object>(): ApolloServerPlugin<C> {
  return {
    async requestDidStart() {
      return {
        async didResolveOperation(rc) {
          const span = trace.getActiveSpan();
          if (!span || !rc.operation) return;
          const type = rc.operation.operation;
          span.updateName(rc.operationName ? `${type} ${rc.operationName}` : type);
          span.setAttribute('graphql.operation.type', type);
          if (rc.operationName) span.setAttribute('graphql.operation.name', rc.operationName);
        },
        async didEncounterErrors(rc) {
          const span = trace.getActiveSpan();
          if (!span) return;
          const codes = [...new Set(rc.errors.map((e) => String(e.extensions?.code ?? 'GRAPHQL_ERROR')))];
          span.setAttribute('graphql.error.codes', codes);
          span.setStatus({ code: SpanStatusCode.ERROR, message: codes.join(',') });
        },
      };
    },
  };
}
