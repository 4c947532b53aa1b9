/**
 * Peer: Apollo Server 5 with hand-written resolvers that call the stub with undici and keep nothing —
 * what a team would write with the same packages as the gateway: `startStandaloneServer` (node:http),
 * one resolver for createNetwork, one undici `Pool` to the upstream. It takes the very same request
 * bytes as the gateway (same operation, same variables) and answers the same JSON; no idempotency
 * record, no ledger, no validation beyond the schema's.
 */
import { randomUUID } from 'node:crypto';
import { ApolloServer } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { Pool } from 'undici';

import type { RunningPeer } from './hive.js';

const typeDefs = /* GraphQL */ `
  scalar UUID
  enum FirewallAction {
    ALLOW
    DENY
  }
  input CreateNetworkInput {
    projectId: ID!
    title: String!
    description: String
    bandwidthMbps: Int
    defaultFirewallAction: FirewallAction
  }
  type Network {
    id: ID!
    title: String!
  }
  type CreateNetworkPayload {
    network: Network!
    idempotencyKey: UUID!
    replayed: Boolean!
  }
  type Query {
    ok: Boolean!
  }
  type Mutation {
    createNetwork(input: CreateNetworkInput!, idempotencyKey: UUID): CreateNetworkPayload!
  }
`;

interface CreateNetworkArgs {
  input: {
    projectId: string;
    title: string;
    description?: string | null;
    bandwidthMbps?: number | null;
    defaultFirewallAction?: 'ALLOW' | 'DENY' | null;
  };
  idempotencyKey?: string | null;
}

export async function startApolloPeer(options: {
  upstream: string;
  token: string;
  port?: number;
}): Promise<RunningPeer> {
  const pool = new Pool(options.upstream, { connections: 64, pipelining: 1, keepAliveTimeout: 30_000 });
  const authorization = `Bearer ${options.token}`;
  const resolvers = {
    Query: { ok: () => true },
    Mutation: {
      async createNetwork(_: unknown, { input, idempotencyKey }: CreateNetworkArgs) {
        const key = idempotencyKey ?? randomUUID();
        const res = await pool.request({
          path: '/ocs/v1/services',
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization, 'idempotency-key': key },
          body: JSON.stringify({
            platform: { productCode: 'network', regionCode: 'msk' },
            kind: 'network',
            metadata: { title: input.title, description: input.description ?? '' },
            projectId: input.projectId,
            spec: {
              'vendor.extensions.network': {
                bandwidth_mbps: input.bandwidthMbps ?? 100,
                default_gfw_rule_action: (input.defaultFirewallAction ?? 'ALLOW').toLowerCase(),
              },
            },
            zoneCode: 'msk-avntg',
          }),
        });
        const created = (await res.body.json()) as { id: string; metadata: { title: string } };
        if (res.statusCode !== 201) throw new Error(`upstream answered ${res.statusCode}`);
        return { network: { id: created.id, title: created.metadata.title }, idempotencyKey: key, replayed: false };
      },
    },
  };
  const server = new ApolloServer({ typeDefs, resolvers });
  const { url } = await startStandaloneServer(server, { listen: { port: options.port ?? 0, host: '127.0.0.1' } });
  return {
    url,
    async close() {
      await server.stop();
      await pool.close();
    },
  };
}
