import type { IncomingMessage, ServerResponse } from 'node:http';
import { HeaderMap, type ApolloServer } from '@apollo/server';
import { GraphQLError } from 'graphql';

import type { AuthFailure } from '../auth/keys.js';
import { ErrorCode } from '../errors.js';
import { UnwritableResult } from '../execution/apollo.js';
import { bodyTooLarge } from '../execution/limits.js';
import { SingleResultTypes } from '../execution/present.js';
import type { GraphQLContext } from '../graphql/context.js';
import type { DirectPath } from './direct-path.js';
import type { Route, RouteContext } from './http.js';
import { contentType, readBodyText, sendJson } from './respond.js';
import { admitHttp, untrustedHttp, type DocumentAdmission } from './trusted-documents.js';

export interface GraphqlRouteOptions {
  apollo: ApolloServer<GraphQLContext>;
  /**
   * The error the context rejects with when making it threw (src/execution/apollo.ts ApolloSetup.contextFailed): it
   * names the request, so that Apollo's error response logs an unexpected failure with the request's id.
   */
  contextFailed?: (failure: unknown, requestId: string) => unknown;
  /** The token limit, checked on the text before Apollo parses it (src/execution/limits.ts). */
  checkSource?: (source: string) => GraphQLError | undefined;
  /** GRAPHQL_MAX_BODY_BYTES: a larger body is answered 413 without being read further. */
  maxBodyBytes: number;
  /**
   * Builds the per-request context (a promise only when authentication has to wait, a JWT's keys); throws, or
   * rejects with, a GraphQLError (UNAUTHENTICATED) for a bad key.
   */
  context: (req: IncomingMessage, ctx: RouteContext) => GraphQLContext | Promise<GraphQLContext>;
  /**
   * Serves GraphiQL for browser GETs and HEADs; absent when introspection is off. What its promise rejects with is
   * answered and logged as the route's own unexpected failure.
   */
  graphiql?: {
    wants(req: IncomingMessage): boolean;
    serve(req: IncomingMessage, res: import('node:http').ServerResponse): Promise<void>;
  };
  /** TRUSTED_DOCUMENTS (absent when off). */
  trusted?: DocumentAdmission;
  /** The direct path: POST requests it can answer exactly as Apollo would skip its pipeline (decision 035). */
  direct?: DirectPath | null;
}

/**
 * GraphQL over HTTP through Apollo Server on plain node:http (Apollo has no node:http adapter that allows other
 * routes).
 */
export function graphqlRoute(options: GraphqlRouteOptions): Route {
  const { apollo } = options;
  // The route's own refusals are answered in the media type Apollo answers its own with (GraphQL over HTTP: the
  // Accept header's most preferred type the server has); JSON when the header allows none.
  const types = new SingleResultTypes();
  return {
    method: 'ANY',
    path: '/graphql',
    name: 'graphql',
    async handle(req, res, ctx) {
      // HEAD is answered as GET (RFC 9110 §9.3.2): the page's headers, no body.
      if ((req.method === 'GET' || req.method === 'HEAD') && options.graphiql?.wants(req)) {
        await options.graphiql.serve(req, res);
        return;
      }
      let body: unknown;
      let json = false;
      if (req.method === 'POST') {
        // A bare `application/json` (nearly every request) is one comparison in contentType, and no decoder is asked.
        const header = contentType(req);
        json = header.type === 'application/json';
        const jsonish = json || header.type.endsWith('+json');
        const read = await readBodyText(req, options.maxBodyBytes, jsonish ? header.charset : null);
        if (!read.ok) {
          if (read.close) res.setHeader('connection', 'close');
          refuse(types, req, res, read.status, {
            errors: [
              read.message === null
                ? bodyTooLarge(options.maxBodyBytes)
                : { message: read.message, extensions: { code: ErrorCode.BAD_REQUEST } },
            ],
          });
          return;
        }
        if (jsonish) {
          try {
            body = read.raw.length ? JSON.parse(read.text) : undefined;
          } catch {
            refuse(types, req, res, 400, {
              errors: [{ message: 'request body is not valid JSON', extensions: { code: ErrorCode.BAD_REQUEST } }],
            });
            return;
          }
        } else {
          // Not JSON, which Apollo refuses in its own words: read as UTF-8.
          body = read.text;
        }
      }
      let search = ctx.search;
      // Authenticated before the trusted documents are asked and the document is lexed (the token limit), parsed or
      // cached: a request without valid credentials is answered 401 whatever its body, learns nothing of the manifest
      // (which ids and hashes it holds), costs no lexing and leaves nothing behind; its 401 is answered by the path
      // that took it (Apollo is handed the settled context and asks it before it reads the body). The context is made
      // once, here, and in this turn when the key is checked without waiting (an API key).
      let contextValue: GraphQLContext | undefined;
      let failure: unknown;
      let authenticated = true;
      try {
        const made = options.context(req, ctx);
        contextValue = made instanceof Promise ? await made : made;
      } catch (err) {
        failure = err;
        authenticated = false;
      }
      if (authenticated) {
        const method = req.method ?? 'GET';
        const admitted = options.trusted
          ? admitHttp(options.trusted, method, body, search, contextValue!.caller.scope)
          : untrustedHttp(method, body, search);
        if (admitted && !admitted.ok) {
          refuse(types, req, res, admitted.status, admitted.body, {
            'cache-control': 'private, no-cache, must-revalidate',
          });
          return;
        }
        if (admitted) ({ body, search } = admitted);
      }
      // Which path answers is decided from the request's shape alone, before anything is parsed or admitted
      // (decision 065): what the direct path takes it answers to the end, refusals included.
      const direct = json && options.direct ? options.direct.accepts(req, body) : null;
      const source =
        req.method === 'POST'
          ? body && typeof body === 'object' && typeof (body as { query?: unknown }).query === 'string'
            ? (body as { query: string }).query
            : undefined
          : (new URLSearchParams(search).get('query') ?? undefined);
      const refused = source === undefined || !authenticated ? undefined : options.checkSource?.(source);
      if (refused) {
        const { http: _http, ...extensions } = refused.extensions;
        refuse(types, req, res, 400, { errors: [{ message: refused.message, extensions }] });
        return;
      }
      if (direct) {
        await options.direct!.run(res, direct, authenticated ? contextValue! : null, failure, ctx.requestId);
        return;
      }
      const headers = new HeaderMap();
      for (const [k, v] of Object.entries(req.headers)) {
        if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(', ') : v);
      }
      let response;
      try {
        response = await apollo.executeHTTPGraphQLRequest({
          httpGraphQLRequest: { method: req.method ?? 'GET', headers, search, body },
          context: authenticated
            ? () => Promise.resolve(contextValue!)
            : () => Promise.reject(options.contextFailed?.(failure, ctx.requestId) ?? failure),
        });
      } catch (err) {
        if (!(err instanceof UnwritableResult)) throw err;
        // Apollo's error response, made here where the request is known (src/execution/apollo.ts stringifyResult).
        const failed = err.answer(types.of(req.headers.accept) ?? 'application/json; charset=utf-8', ctx.requestId);
        for (const [k, v] of failed.headers) res.setHeader(k, v);
        res.statusCode = failed.status;
        res.end(JSON.stringify({ errors: failed.result.errors }) + '\n');
        return;
      }
      for (const [k, v] of response.headers) res.setHeader(k, v);
      res.statusCode = response.status ?? 200;
      if (response.body.kind === 'complete') {
        res.end(response.body.string);
        return;
      }
      for await (const chunk of response.body.asyncIterator) res.write(chunk);
      res.end();
    },
  };
}

/** One of the route's own refusals, in the media type `types` negotiates from the request's Accept header. */
function refuse(
  types: SingleResultTypes,
  req: IncomingMessage,
  res: ServerResponse,
  status: number,
  answer: unknown,
  headers: Record<string, string> = {},
): void {
  sendJson(res, status, answer, {
    'content-type': types.of(req.headers.accept) ?? 'application/json; charset=utf-8',
    ...headers,
  });
}

/**
 * The error Apollo answers a refused authentication with: UNAUTHENTICATED and 401, or when a JWT's keys could not be
 * fetched UPSTREAM_UNAVAILABLE and 503 (the identity provider is an upstream of the gateway's; the app may retry).
 */
export function authFailureHttpError(failure: AuthFailure): GraphQLError {
  const unavailable = failure.reason === 'unavailable';
  return new GraphQLError(failure.message, {
    extensions: {
      code: unavailable ? ErrorCode.UPSTREAM_UNAVAILABLE : ErrorCode.UNAUTHENTICATED,
      http: { status: unavailable ? 503 : 401 },
    },
  });
}
