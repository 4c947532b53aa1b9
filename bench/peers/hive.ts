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
import { createGatewayRuntime } from '@graphql-hive/gateway';
import { getComposedSchemaFromConfig } from '@graphql-mesh/compose-cli';
import { loadOpenAPISubgraph } from '@omnigraph/openapi';

export const OPENAPI_FILE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'cloud-openapi.yaml');

/**
 * The request the load generator sends to Hive Gateway: the same upstream call as the gateway's
 * createNetwork (POST /ocs/v1/services with the envelope, the bearer token and a fresh Idempotency-Key),
 * in the shape the OpenAPI-generated schema has: the caller sends the envelope itself.
 */
export const HIVE_CREATE_NETWORK =
  'mutation($input: ServiceEnvelope_Input, $key: UUID!) { createService(Idempotency_Key: $key, input: $input) { id metadata { title } } }';

export function hiveMutationBody(projectId: string): string {
  const input = {
    platform: { productCode: 'network', regionCode: 'msk' },
    kind: 'network',
    metadata: { title: 'bench-net', description: '' },
    projectId,
    spec: { vendor_extensions_network: { bandwidth_mbps: 100, default_gfw_rule_action: 'allow' } },
    zoneCode: 'msk-avntg',
  };
  return JSON.stringify({ query: HIVE_CREATE_NETWORK, variables: { input, key: '{{uuid}}' } });
}

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
