/**
 * Peer: Hive Gateway serving the cloud endpoint through an OpenAPI description written by hand
 * (bench/peers/cloud-openapi.yaml), composed into a supergraph with the maintained Mesh tooling
 * (`@graphql-mesh/compose-cli` + `@omnigraph/openapi`) when the peer starts (~0.2 s, offline: the
 * description is a local file), then served by `createGatewayRuntime` on `node:http`, as the Hive
 * Gateway documentation shows for Node.
 *
 * Offline: the supergraph is given in memory (no Hive CDN, no GraphOS, no polling), no `reporting`
 * (usage reporting only starts with a Hive token or GraphOS key), no landing page.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { getComposedSchemaFromConfig } from '@graphql-mesh/compose-cli';
import { loadOpenAPISubgraph } from '@omnigraph/openapi';

/**
 * The one call this file makes into `@graphql-hive/gateway`, typed here. Its typings pull in graphql-yoga's,
 * which augment graphql's `GraphQLErrorExtensions` (`http.headers` as a plain record) for the whole program
 * and break the type of the gateway's own Apollo errors (src/execution/present.ts forHttp sends a HeaderMap); the
 * module is therefore loaded by a specifier TypeScript does not follow.
 */
interface HiveGatewayModule {
  createGatewayRuntime(config: {
    supergraph: string;
    logging: string;
    landingPage: boolean;
    graphiql: boolean;
  }): http.RequestListener & {
    dispose(): Promise<void> | void;
  };
}
const HIVE_GATEWAY: string = '@graphql-hive/gateway';

export const OPENAPI_FILE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'cloud-openapi.yaml');

/** Warnings and errors of the composition to stderr; its debug lines are noise here. */
const composeLogger: Parameters<typeof getComposedSchemaFromConfig>[1] = {
  log: () => undefined,
  info: () => undefined,
  debug: () => undefined,
  warn: (...a: unknown[]) => console.warn('mesh-compose:', ...a),
  error: (...a: unknown[]) => console.error('mesh-compose:', ...a),
  child: () => composeLogger,
};

/**
 * Composes the supergraph for an upstream at `upstreamUrl`. The bearer token stays out of it: the
 * transport reads `{env.CLOUD_API_TOKEN}` when it sends.
 */
export async function composeCloudSupergraph(upstreamUrl: string): Promise<string> {
  return getComposedSchemaFromConfig(
    {
      cwd: path.dirname(OPENAPI_FILE),
      subgraphs: [
        {
          sourceHandler: loadOpenAPISubgraph('cloud', {
            source: OPENAPI_FILE,
            endpoint: upstreamUrl,
            operationHeaders: { Authorization: 'Bearer {env.CLOUD_API_TOKEN}' },
          }),
        },
      ],
    },
    composeLogger,
  );
}

export interface RunningPeer {
  url: string;
  close(): Promise<void>;
}

/** Composes and serves; `token` goes to `process.env.CLOUD_API_TOKEN`, where the transport reads it. */
export async function startHivePeer(options: { upstream: string; token: string; port?: number }): Promise<RunningPeer> {
  process.env.CLOUD_API_TOKEN = options.token;
  const supergraph = await composeCloudSupergraph(options.upstream);
  const { createGatewayRuntime } = (await import(HIVE_GATEWAY)) as HiveGatewayModule;
  const gateway = createGatewayRuntime({
    supergraph,
    logging: 'warn',
    landingPage: false,
    graphiql: false,
  });
  const server = http.createServer(gateway);
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/graphql`,
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await gateway.dispose();
    },
  };
}
