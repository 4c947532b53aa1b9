import { createGraphiQLFetcher, type Fetcher } from '@graphiql/toolkit';

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
    return fetcher(params, opts);
  };
}
