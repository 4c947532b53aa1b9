import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

import { STORE_RETRY_AFTER_SECONDS, StoreUnavailableError, WebhookErrorCode } from '../errors.js';
import { logUnexpected, type Logger } from '../logger.js';
import type { Metrics } from '../metrics.js';
import { sendOAuthError } from './respond.js';

export interface RouteContext {
  requestId: string;
  logger: Logger;
  /** True when the request's logger writes `level`; asks without making the request's child logger. */
  logs(level: 'debug' | 'info'): boolean;
  /** Capture groups of a RegExp route path. */
  params: string[];
  /** The request target's path (`/graphql`), whatever the target's form: read once, by the router (requestTarget). */
  readonly path: string;
  /** The request target's query from its `?` (`?query=…`), or '' when it has none. */
  readonly search: string;
  /** The app that sent the request, once a route has authenticated it: named on the request's log line (never its key). */
  app?: string | undefined;
}

export interface Route {
  method: 'GET' | 'POST' | 'ANY';
  path: string | RegExp;
  /** Low-cardinality name for metrics and logs. */
  name: string;
  /**
   * The route writes `X-Request-Id` (RouteContext.requestId) into every answer's headers itself, so the handler does
   * not set it beforehand: a header set with `setHeader` sends `writeHead` down Node's merge of the two sets of
   * headers, each validated again (the mobile-ID webhook, decision 155). Its failures are answered with it too.
   */
  writesRequestId?: boolean;
  handle(req: IncomingMessage, res: ServerResponse, ctx: RouteContext): Promise<void> | void;
}

/**
 * How many requests the HTTP port has received, a count that only grows. The store reads it to tell a trickle of writes
 * from several callers from a lone caller's (src/store/sqlite-dialect.ts, the commit window; docs/decisions/159).
 */
export class RequestArrivals {
  count = 0;
}

const REQUEST_ID_RE = /^[\w.:-]{1,128}$/;

/** A request's id: its X-Request-Id when that is sane, else a fresh UUID. */
export function requestIdOf(req: IncomingMessage): string {
  const incoming = req.headers['x-request-id'];
  return typeof incoming === 'string' && REQUEST_ID_RE.test(incoming) ? incoming : randomUUID();
}

/** The absolute form's scheme and authority (`http://host:4000`), before its path. */
const ABSOLUTE_FORM = /^https?:\/\/[^/?#]*/i;

/**
 * A request target's path and query, whatever its form (RFC 9112 §3.2): the origin form (`/graphql?…`) as it is, the
 * absolute form (`http://host/graphql?…`, which a server MUST accept, §3.2.2) without its scheme and authority. Every
 * route, and what answers before the routes do (the WebSocket upgrade, the port while the gateway starts), reads the
 * path here, so that each form reaches the same route.
 */
export function requestTarget(url = '/'): { path: string; search: string } {
  const start = url.charCodeAt(0) === 0x2f ? 0 : (ABSOLUTE_FORM.exec(url)?.[0].length ?? 0);
  const q = url.indexOf('?', start);
  const end = q === -1 ? url.length : q;
  // The absolute form's path may be empty (`http://host?x`): it is the origin's root (RFC 9112 §3.2.1).
  return { path: start > 0 && end === start ? '/' : url.slice(start, end), search: q === -1 ? '' : url.slice(q) };
}

/** At most this many characters of a path are said back in a refusal: its size is the gateway's, not the client's. */
const SHOWN_PATH_LENGTH = 200;

/** A path as a refusal says it back: cut to SHOWN_PATH_LENGTH characters, with "…" where it was cut. */
export function shownPath(path: string): string {
  return path.length > SHOWN_PATH_LENGTH ? `${path.slice(0, SHOWN_PATH_LENGTH)}…` : path;
}

/**
 * The request handler of the one HTTP port: a request id on every log line (taken from X-Request-Id
 * when it is sane), a route table, and a masked 500 for anything a route throws.
 */
export function createRequestHandler(options: {
  routes: Route[];
  logger: Logger;
  metrics: Metrics;
  arrivals?: RequestArrivals;
}) {
  const { routes, logger, metrics } = options;
  const arrivals = options.arrivals ?? new RequestArrivals();
  return (req: IncomingMessage, res: ServerResponse): void => {
    arrivals.count += 1;
    const started = performance.now();
    const requestId = requestIdOf(req);
    const { path: pathname, search } = requestTarget(req.url);

    let route: Route | undefined;
    let params: string[] = [];
    let pathMatched = false;
    for (const r of routes) {
      if (typeof r.path === 'string') {
        if (r.path !== pathname) continue;
      } else {
        const m = r.path.exec(pathname);
        if (!m) continue;
        params = m.slice(1).map((p) => decodeURIComponent(p ?? ''));
      }
      pathMatched = true;
      if (r.method === 'ANY' || r.method === req.method || (r.method === 'GET' && req.method === 'HEAD')) {
        route = r;
        break;
      }
    }
    if (!route?.writesRequestId) res.setHeader('x-request-id', requestId);
    const routeName = route?.name ?? (pathMatched ? 'method-not-allowed' : 'not-found');
    // The request's child logger is made on first use: most requests log nothing at the default level.
    const context = new RequestContext(requestId, logger, routeName, params, pathname, search);
    res.on('finish', () => {
      const seconds = (performance.now() - started) / 1000;
      metrics.httpRequests.observe([routeName, String(res.statusCode)], seconds);
      if (logger.isLevelEnabled('debug'))
        context.logger.debug(
          {
            method: req.method,
            status: res.statusCode,
            ms: Math.round(seconds * 1000),
            ...(context.app ? { app: context.app } : {}),
          },
          'request',
        );
    });
    if (!route) {
      if (pathMatched)
        sendOAuthError(
          res,
          405,
          WebhookErrorCode.METHOD_NOT_ALLOWED,
          `${req.method} is not allowed on ${shownPath(pathname)}`,
          { allow: allowedMethods(routes, pathname) },
        );
      else sendOAuthError(res, 404, WebhookErrorCode.NOT_FOUND, `no route for ${shownPath(pathname)}`);
      return;
    }
    const failed = (err: unknown): void => {
      // A route that writes the request id itself has not had it set: its failures carry it here.
      const idHeader: Record<string, string> = route.writesRequestId ? { 'x-request-id': requestId } : {};
      if (err instanceof StoreUnavailableError && !res.headersSent) {
        // The database is away: nothing was stored, and the sender retries (a webhook's sender does on a 503).
        context.logger.warn({ err: err.cause }, 'the database cannot be reached: answered 503');
        sendOAuthError(res, 503, WebhookErrorCode.TEMPORARILY_UNAVAILABLE, err.message, {
          ...idHeader,
          'retry-after': String(STORE_RETRY_AFTER_SECONDS),
        });
        return;
      }
      // The client closed the connection before its request ended (a body shorter than its Content-Length): nothing
      // ran, and no one is left to answer. Its input, not the gateway's failure: no error line for an operator.
      if (!req.complete && req.destroyed && isClientAbort(err)) {
        if (context.logs('debug')) context.logger.debug({ err }, 'the client closed the connection mid-request');
        res.destroy();
        return;
      }
      logUnexpected(context.logger, err, {}, 'unhandled error in route');
      if (!res.headersSent)
        sendOAuthError(
          res,
          500,
          WebhookErrorCode.SERVER_ERROR,
          'internal error; see the gateway log for request ' + requestId,
          idHeader,
        );
      else res.destroy();
    };
    // The route runs in this turn; what it throws, at once or later, is answered the same way.
    let handled: Promise<void> | void;
    try {
      handled = route.handle(req, res, context);
    } catch (err) {
      failed(err);
      return;
    }
    if (handled) handled.catch(failed);
  };
}

/** The errors a request stream ends with when its client closes the connection before the body's end. */
function isClientAbort(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'ECONNRESET' || code === 'ERR_STREAM_PREMATURE_CLOSE';
}

/** A request's RouteContext: its child logger made on first use (most requests log nothing at the default level). */
class RequestContext implements RouteContext {
  app?: string | undefined;
  private child: Logger | undefined;

  constructor(
    readonly requestId: string,
    private readonly base: Logger,
    private readonly route: string,
    readonly params: string[],
    readonly path: string,
    readonly search: string,
  ) {}

  get logger(): Logger {
    return (this.child ??= this.base.child({ requestId: this.requestId, route: this.route }));
  }

  logs(level: 'debug' | 'info'): boolean {
    return this.base.isLevelEnabled(level);
  }
}

/** The methods the routes take on `pathname` (a 405's `Allow`, RFC 9110 §15.5.6): GET brings HEAD. */
function allowedMethods(routes: readonly Route[], pathname: string): string {
  const methods = new Set<string>();
  for (const r of routes) {
    if (typeof r.path === 'string' ? r.path !== pathname : !r.path.test(pathname)) continue;
    methods.add(r.method);
    if (r.method === 'GET') methods.add('HEAD');
  }
  return [...methods].join(', ');
}
