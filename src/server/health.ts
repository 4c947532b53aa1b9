import type { IncomingMessage, ServerResponse } from 'node:http';

import { WebhookErrorCode } from '../errors.js';
import type { Metrics } from '../metrics.js';
import type { Store } from '../store/index.js';
import { requestIdOf, requestTarget, type Route } from './http.js';
import { sendJson, sendOAuthError, UNAVAILABLE_RETRY_AFTER_SECONDS } from './respond.js';

/** How long /readyz waits for the store's answer (kubelet's probe gives up after 1 s unless told otherwise). */
const READY_PING_MS = 2_000;

/**
 * /healthz: the process answers. /readyz: the store answers too, and nothing in `notReady` (the event bus of a
 * replica that cannot listen to the others) says otherwise; its body shows each upstream's circuit, which never
 * makes the replica unready (an open circuit is one upstream down: the ledger and the other upstreams still serve,
 * and every replica would see the same). From the moment a shutdown begins (`stopping`), /readyz answers 503 at once,
 * also on a keep-alive connection opened before: its load balancer stops sending before the port is gone.
 * /metrics: Prometheus text.
 */
export function healthRoutes(deps: {
  store: Store;
  metrics: Metrics;
  notReady?: () => string | null;
  stopping?: () => boolean;
  circuits: () => Record<string, string>;
}): Route[] {
  const circuits = () => ({ circuits: deps.circuits() });
  return [
    {
      method: 'GET',
      path: '/healthz',
      name: 'healthz',
      handle: (_req, res) => sendJson(res, 200, { status: 'ok' }),
    },
    {
      method: 'GET',
      path: '/readyz',
      name: 'readyz',
      async handle(_req, res, ctx) {
        if (deps.stopping?.())
          return sendJson(res, 503, {
            status: 'stopping',
            store: deps.store.dialect,
            error: 'the gateway is shutting down',
            ...circuits(),
          });
        let timer: NodeJS.Timeout | undefined;
        try {
          // A database that stops answering without closing its connections (a partition) leaves the ping waiting for
          // good: past READY_PING_MS it is not ready, said as such, rather than a request that never ends.
          await Promise.race([
            deps.store.ping(),
            new Promise<never>((_resolve, reject) => {
              timer = setTimeout(
                () => reject(new Error(`the database did not answer within ${READY_PING_MS} ms`)),
                READY_PING_MS,
              );
            }),
          ]);
          const why = deps.notReady?.() ?? null;
          if (why !== null)
            return sendJson(res, 503, { status: 'unavailable', store: deps.store.dialect, error: why, ...circuits() });
          sendJson(res, 200, { status: 'ready', store: deps.store.dialect, ...circuits() });
        } catch (err) {
          ctx.logger.warn({ err }, 'readiness check failed');
          sendJson(res, 503, {
            status: 'unavailable',
            store: deps.store.dialect,
            error: 'the database does not answer',
            ...circuits(),
          });
        } finally {
          clearTimeout(timer);
        }
      },
    },
    {
      method: 'GET',
      path: '/metrics',
      name: 'metrics',
      async handle(_req, res) {
        const text = await deps.metrics.registry.metrics();
        res.writeHead(200, { 'content-type': deps.metrics.registry.contentType });
        res.end(text);
      },
    },
  ];
}

/**
 * What the port answers while the gateway waits for PostgreSQL at start-up: alive (/healthz 200, so an
 * orchestrator does not restart it into a crash loop), not ready (/readyz 503 with why), and 503 with Retry-After
 * for everything else, which is told `said`: `why` may hold the database's address and its driver's words, which are
 * the operator's to read (docs/contract.md, Error codes), never an app's or a webhook sender's.
 */
export function startingHandler(why: () => string, said: () => string = why) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    const { path } = requestTarget(req.url);
    req.resume();
    const id = { 'x-request-id': requestIdOf(req) };
    if (path === '/healthz') return sendJson(res, 200, { status: 'ok' }, id);
    if (path === '/readyz') return sendJson(res, 503, { status: 'starting', error: why() }, id);
    // As the running gateway answers a store that is away: the sender (a webhook's) retries a 503.
    sendOAuthError(res, 503, WebhookErrorCode.TEMPORARILY_UNAVAILABLE, `the gateway is starting: ${said()}`, {
      ...id,
      'retry-after': String(UNAVAILABLE_RETRY_AFTER_SECONDS),
    });
  };
}
