import { createGraphiQLFetcher, type Fetcher, type FetcherOpts, type FetcherParams } from '@graphiql/toolkit';
import { Kind, parse, type DocumentNode, type OperationDefinitionNode } from 'graphql';

import { withCredential } from './credential.js';

/** Where the page talks GraphQL: HTTP for queries and mutations, graphql-ws for subscriptions. */
export interface GatewayEndpoints {
  url: string;
  subscriptionUrl: string;
}

/** The gateway's GraphQL endpoints on the page's own origin (docs/contract.md: one port, one path). */
export function sameOriginEndpoints(
  location: Pick<Location, 'protocol' | 'host'>,
  path = '/graphql',
): GatewayEndpoints {
  const wsProtocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
  return {
    url: `${location.protocol}//${location.host}${path}`,
    subscriptionUrl: `${wsProtocol}//${location.host}${path}`,
  };
}

/** The value of the Authorization header in the header editor's JSON, whatever its case. */
export function authorizationOf(headers: Record<string, unknown> | undefined): string | undefined {
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (name.toLowerCase() === 'authorization' && typeof value === 'string') return value;
  }
  return undefined;
}

/**
 * The request as its query text means it. GraphiQL 5.4 can run a tab just switched to with
 * the previous tab's operation name and parsed document, and the toolkit only routes an
 * operation over graphql-ws when that name picks a subscription in that document, so a
 * subscription would go over HTTP. The query text is what is sent, so it decides: its parsed
 * document replaces GraphiQL's, and when the name matches none of its operations and it holds
 * just one, that one is meant.
 */
export function resolveOperation(
  params: FetcherParams,
  opts: FetcherOpts | undefined,
): { params: FetcherParams; opts: FetcherOpts | undefined } {
  let document: DocumentNode;
  try {
    document = parse(params.query);
  } catch {
    return { params, opts }; // The server reports the syntax error.
  }
  const operations = document.definitions.filter(
    (definition): definition is OperationDefinitionNode => definition.kind === Kind.OPERATION_DEFINITION,
  );
  const names = operations.map((operation) => operation.name?.value);
  const stale = !(params.operationName && names.includes(params.operationName));
  const resolved = stale && operations.length === 1 ? { ...params, operationName: names[0] ?? null } : params;
  return { params: resolved, opts: { ...opts, documentAST: document } };
}

/**
 * A fetcher that sends the header editor's headers (with the credential field's key or JWT, src/graphiql-app/credential.ts)
 * over HTTP and, for subscriptions, as
 * graphql-ws connectionParams with the key under `authorization` (docs/contract.md: subscriptions
 * authenticate with the same key in the upgrade request or in `connectionParams.authorization`;
 * a browser cannot set headers on a WebSocket upgrade).
 */
export function createGatewayFetcher(endpoints: GatewayEndpoints, credential: () => string = () => ''): Fetcher {
  return (requested, requestedOpts) => {
    const resolved = resolveOperation(requested, requestedOpts);
    const { params } = resolved;
    const headers = withCredential(resolved.opts?.headers, credential());
    const opts = headers === resolved.opts?.headers ? resolved.opts : { ...resolved.opts, headers };
    const authorization = authorizationOf(opts?.headers);
    // The toolkit opens a fresh lazy graphql-ws client per subscription and merges these
    // params with the headers, so a key edited between runs is always the one sent.
    const fetcher = createGraphiQLFetcher({
      url: endpoints.url,
      subscriptionUrl: endpoints.subscriptionUrl,
      ...(authorization === undefined ? {} : { wsConnectionParams: { authorization } }),
    });
    return fetcher(params, opts);
  };
}
