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
      tracing.server(
        route.name,
        req.headers,
        { 'http.request.method': method ?? req.method ?? 'GET', 'gateway.route': route.name },
        async (span) => {
          await route.handle(req, res, ctx);
          span.setAttribute('http.response.status_code', res.statusCode);
          if (res.statusCode >= 500) span.fail(`HTTP ${res.statusCode}`);
        },
      ),
  };
}
