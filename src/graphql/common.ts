import { setTimeout as sleep } from 'node:timers/promises';
import { badUserInput } from '../errors.js';
import type { Resolvers } from '../generated/graphql.js';
import type { ResourceKind } from '../store/ledger.js';
import { DateTimeScalar, DecimalStringScalar, JSONScalar, UUIDScalar } from './scalars.js';

/** GraphQL type of each ledger kind, for `node(id)`. */
export const NODE_TYPES: Record<ResourceKind, string> = {
  project: 'Project',
  network: 'Network',
  subnet: 'Subnet',
  ip_address: 'IpAddress',
  kafka_cluster: 'KafkaCluster',
  kafka_topic: 'KafkaTopic',
  kafka_user: 'KafkaUser',
  virtual_machine: 'VirtualMachine',
  identification: 'Identification',
  verification: 'Verification',
};

export const commonResolvers: Resolvers = {
  UUID: UUIDScalar,
  DateTime: DateTimeScalar,
  JSON: JSONScalar,
  DecimalString: DecimalStringScalar,
  Query: {
    node: (_p, { id }, ctx) => ctx.loaders.resource.load(id),
  },
  Mutation: {
    ping: () => true,
  },
  Subscription: {
    heartbeat: {
      subscribe: async function* (_p, { intervalMs, count }) {
        const interval = intervalMs ?? 1000;
        const n = count ?? 3;
        if (interval < 10 || interval > 60_000) throw badUserInput('intervalMs', 'must be from 10 to 60000');
        if (n < 1 || n > 1000) throw badUserInput('count', 'must be from 1 to 1000');
        for (let i = 0; i < n; i++) {
          if (i > 0) await sleep(interval);
          yield { heartbeat: new Date() };
        }
      },
    },
  },
  Node: {
    __resolveType: (r) => NODE_TYPES[r.kind] as never,
  },
};
