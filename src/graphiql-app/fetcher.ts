import { createGraphiQLFetcher, type Fetcher, type FetcherParams } from '@graphiql/toolkit';
import { Kind, type DocumentNode, type OperationDefinitionNode } from 'graphql';

/** Where the page talks GraphQL: HTTP for queries and mutations, graphql-ws for subscriptions. */
export interface GatewayEndpoints {
  url: string;
  subscriptionUrl: string;
}

/** The gateway's GraphQL endpoints on the page's own origin (DESIGN.md: one port, one path). */
export function sameOriginEndpoints(location: Pick<Location, 'protocol' | 'host'>, path = '/graphql'): GatewayEndpoints {
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
 * The params with an `operationName` that names an operation of the document. GraphiQL 5.4
 * can run a tab just switched to with the previous tab's operation name (or none), and the
 * toolkit only routes an operation over graphql-ws when that name picks a subscription; so
 * when the name matches nothing and the document holds one operation, that one is meant.
 */
export function withOperationName(params: FetcherParams, document: DocumentNode | undefined): FetcherParams {
  if (document === undefined) return params;
  const operations = document.definitions.filter((definition): definition is OperationDefinitionNode => definition.kind === Kind.OPERATION_DEFINITION);
  const names = operations.map((operation) => operation.name?.value);
  if (params.operationName && names.includes(params.operationName)) return params;
  if (operations.length !== 1) return params;
  return { ...params, operationName: names[0] ?? null };
}

/**
 * A fetcher that sends the header editor's headers over HTTP and, for subscriptions, as
 * graphql-ws connectionParams with the key under `authorization` (DESIGN.md: subscriptions
 * authenticate with the same key in the upgrade request or in `connectionParams.authorization`;
 * a browser cannot set headers on a WebSocket upgrade).
 */
export function createGatewayFetcher(endpoints: GatewayEndpoints): Fetcher {
  return (params, opts) => {
    const authorization = authorizationOf(opts?.headers);
    // The toolkit opens a fresh lazy graphql-ws client per subscription and merges these
    // params with the headers, so a key edited between runs is always the one sent.
    const fetcher = createGraphiQLFetcher({
      url: endpoints.url,
      subscriptionUrl: endpoints.subscriptionUrl,
      ...(authorization === undefined ? {} : { wsConnectionParams: { authorization } }),
    });
    return fetcher(withOperationName(params, opts?.documentAST), opts);
  };
}
