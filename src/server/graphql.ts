import type { IncomingMessage } from 'node:http';
import { HeaderMap, type ApolloServer } from '@apollo/server';
import { GraphQLError } from 'graphql';
import type { GraphQLContext } from '../graphql/context.js';
import { BodyTooLargeError, mediaType, readBody, sendJson } from './respond.js';
import type { RequestContext, Route } from './http.js';
import { admitHttp, type TrustedDocuments } from './trusted-documents.js';

const GRAPHQL_BODY_LIMIT = 1024 * 1024;

export interface GraphqlRouteOptions {
  apollo: ApolloServer<GraphQLContext>;
  /** Builds the per-request context; throws a GraphQLError (UNAUTHENTICATED) for a bad key. */
  context: (req: IncomingMessage, ctx: RequestContext) => Promise<GraphQLContext>;
  /** Serves GraphiQL for browser GETs; absent when introspection is off. */
  graphiql?: { wants(req: IncomingMessage): boolean; serve(req: IncomingMessage, res: import('node:http').ServerResponse): void };
  /** TRUSTED_DOCUMENTS (absent when off). */
  trusted?: TrustedDocuments;
}

/** GraphQL over HTTP through Apollo Server on plain node:http (Apollo has no node:http adapter that allows other routes). */
export function graphqlRoute(options: GraphqlRouteOptions): Route {
  const { apollo } = options;
  return {
    method: 'ANY',
    path: '/graphql',
    name: 'graphql',
    async handle(req, res, ctx) {
      if (req.method === 'GET' && options.graphiql?.wants(req)) {
        options.graphiql.serve(req, res);
        return;
      }
      let body: unknown;
      if (req.method === 'POST') {
        let raw: Buffer;
        try {
          raw = await readBody(req, GRAPHQL_BODY_LIMIT);
        } catch (err) {
          if (err instanceof BodyTooLargeError) {
            sendJson(res, 413, { errors: [{ message: `request body exceeds ${GRAPHQL_BODY_LIMIT} bytes`, extensions: { code: 'BAD_REQUEST' } }] });
            return;
          }
          throw err;
        }
        const type = mediaType(req);
        if (type === 'application/json' || type.endsWith('+json')) {
          try {
            body = raw.length ? JSON.parse(raw.toString('utf8')) : undefined;
          } catch {
            sendJson(res, 400, { errors: [{ message: 'request body is not valid JSON', extensions: { code: 'BAD_REQUEST' } }] });
            return;
          }
        } else {
          body = raw.toString('utf8');
        }
      }
      const headers = new HeaderMap();
      for (const [k, v] of Object.entries(req.headers)) {
        if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(', ') : v);
      }
      const url = req.url ?? '/graphql';
      const q = url.indexOf('?');
      let search = q === -1 ? '' : url.slice(q);
      if (options.trusted) {
        const admitted = admitHttp(options.trusted, req.method ?? 'GET', body, search);
        if (!admitted.ok) {
          sendJson(res, admitted.status, admitted.body, { 'cache-control': 'private, no-cache, must-revalidate' });
          return;
        }
        ({ body, search } = admitted);
      }
      const response = await apollo.executeHTTPGraphQLRequest({
        httpGraphQLRequest: { method: req.method ?? 'GET', headers, search, body },
        context: () => options.context(req, ctx),
      });
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

/** An UNAUTHENTICATED error that Apollo answers with HTTP 401. */
export function unauthenticatedHttpError(message: string): GraphQLError {
  return new GraphQLError(message, { extensions: { code: 'UNAUTHENTICATED', http: { status: 401 } } });
}
