/**
 * Peer of scenarios 5 and 7: Hive Gateway turning the mobile-ID webhook into a subscription, configured as
 * its documentation says (Hive Gateway "Subscriptions", Mesh "Subscriptions & Webhooks"): `webhooks: true`,
 * the in-memory pubsub (`MemPubSub`), and one subscription field in `additionalTypeDefs` with
 * `@resolveTo(pubsubTopic: "webhook:post:/webhooks/mobile-id", filterBy: …)`, over a minimal hand-written
 * supergraph (one subgraph with one query field that nothing calls). Served by `createGatewayRuntime` on
 * `node:http` with graphql-ws on the same port and path, as `hive-gateway`'s own Node server does
 * (`getGraphQLWSOptions` with `useServer` from `graphql-ws/use/ws`).
 *
 * What the documented setup implies, and scenario 5 reports: the webhook plugin publishes the request body
 * as it came (parsed only when the content type is exactly `application/json`), answers 204 before
 * anything is stored, checks no token, and every subscription on the topic runs its filter on every event.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { useServer } from 'graphql-ws/use/ws';
import { WebSocketServer } from 'ws';

import type { RunningPeer } from './hive.js';

/** The subscription field's topic: the webhook plugin binds POST on this path to it. */
export const HIVE_WEBHOOK_PATH = '/webhooks/mobile-id';

/**
 * A supergraph (Federation v2, join v0.3) with one subgraph whose only field is never queried: the
 * subscription lives in `additionalTypeDefs`, so no subgraph is ever called.
 */
const SUPERGRAPH = /* GraphQL */ `
  schema
    @link(url: "https://specs.apollo.dev/link/v1.0")
    @link(url: "https://specs.apollo.dev/join/v0.3", for: EXECUTION) {
    query: Query
  }

  directive @join__enumValue(graph: join__Graph!) repeatable on ENUM_VALUE
  directive @join__field(
    graph: join__Graph
    requires: join__FieldSet
    provides: join__FieldSet
    type: String
    external: Boolean
    override: String
    usedOverridden: Boolean
  ) repeatable on FIELD_DEFINITION | INPUT_FIELD_DEFINITION
  directive @join__graph(name: String!, url: String!) on ENUM_VALUE
  directive @join__implements(graph: join__Graph!, interface: String!) repeatable on OBJECT | INTERFACE
  directive @join__type(
    graph: join__Graph!
    key: join__FieldSet
    extension: Boolean! = false
    resolvable: Boolean! = true
    isInterfaceObject: Boolean! = false
  ) repeatable on OBJECT | INTERFACE | UNION | ENUM | INPUT_OBJECT | SCALAR
  directive @join__unionMember(graph: join__Graph!, member: String!) repeatable on UNION
  directive @link(url: String, as: String, for: link__Purpose, import: [link__Import]) repeatable on SCHEMA

  scalar join__FieldSet
  scalar link__Import

  enum link__Purpose {
    SECURITY
    EXECUTION
  }

  enum join__Graph {
    MOBILEID @join__graph(name: "mobileid", url: "http://127.0.0.1:9/graphql")
  }

  type Query @join__type(graph: MOBILEID) {
    ok: Boolean
  }
`;

/**
 * The notification as the webhook plugin publishes it: the wire body itself (docs/upstreams.md, Mobile-ID notification,
 * snake_case), since `@resolveTo` can filter and pick a sub-path but not rename or decode. The filter
 * compares the body's `auth_req_id`: the issue's `root.authReqId` would match nothing, the payload has no
 * such member.
 */
export const HIVE_TYPE_DEFS = /* GraphQL */ `
  type MobileIdNotification {
    auth_req_id: String!
    access_token: String
    token_type: String
    id_token: String
    expires_in: Int
    error: String
    error_description: String
    correlation_id: String
  }
  extend schema {
    subscription: Subscription
  }
  type Subscription {
    mobileIdNotification(authReqId: String!): MobileIdNotification
      @resolveTo(pubsubTopic: "webhook:post:${HIVE_WEBHOOK_PATH}", filterBy: "root.auth_req_id === args.authReqId")
  }
`;

/**
 * The calls this file makes into `@graphql-hive/gateway`, typed here for the reason bench/peers/hive.ts gives
 * (its typings would augment graphql's error extensions for the whole program).
 */
interface HiveGatewayModule {
  MemPubSub: new () => unknown;
  createGatewayRuntime(config: {
    supergraph: string;
    additionalTypeDefs: string;
    pubsub: unknown;
    webhooks: boolean;
    logging: string;
    landingPage: boolean;
    graphiql: boolean;
  }): http.RequestListener & {
    graphqlEndpoint: string;
    getSchema(): Promise<unknown>;
    dispose(): Promise<void> | void;
  };
  getGraphQLWSOptions(
    runtime: unknown,
    onContext: (ctx: { extra: { request: http.IncomingMessage; socket: unknown } }) => Record<string, unknown>,
  ): Parameters<typeof useServer>[0];
}
const HIVE_GATEWAY: string = '@graphql-hive/gateway';

export async function startHiveWebhookPeer(options: { port?: number } = {}): Promise<RunningPeer> {
  const { MemPubSub, createGatewayRuntime, getGraphQLWSOptions } = (await import(HIVE_GATEWAY)) as HiveGatewayModule;
  const gateway = createGatewayRuntime({
    supergraph: SUPERGRAPH,
    additionalTypeDefs: HIVE_TYPE_DEFS,
    pubsub: new MemPubSub(),
    webhooks: true,
    logging: 'warn',
    landingPage: false,
    graphiql: false,
  });
  // As `hive-gateway` does before it listens: the unified graph is loaded on the first HTTP request
  // otherwise, and a subscription that comes first over WebSocket finds no schema.
  await gateway.getSchema();
  const server = http.createServer(gateway);
  server.keepAliveTimeout = 65_000;
  const wss = new WebSocketServer({ server, path: gateway.graphqlEndpoint });
  const ws = useServer(
    getGraphQLWSOptions(gateway, (ctx) => ({ req: ctx.extra.request, socket: ctx.extra.socket })),
    wss,
  );
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}${gateway.graphqlEndpoint}`,
    async close() {
      await ws.dispose();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await gateway.dispose();
    },
  };
}
