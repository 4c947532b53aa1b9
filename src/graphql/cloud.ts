import type { MutationResult } from '../cloud/service.js';
import { viewAs, type CloudKind, type CloudViews } from '../cloud/views.js';
import { badUserInput } from '../errors.js';
import type { Resolvers } from '../generated/graphql.js';
import { creationPayload, pageSize } from './common.js';
import { PAGE_CAPS } from './pages.js';

/** A creation's payload, its record mapped to the view of its kind. */
const payload = <F extends string, K extends CloudKind>(field: F, kind: K, r: MutationResult) =>
  creationPayload(field, r, (record): CloudViews[K] => viewAs(kind, record));

/**
 * Only relations (through the request's loaders) have resolvers here: every other field of a cloud type
 * is a property of its view (src/cloud/views.ts), read by the default resolver. `DefaultResolved` below
 * checks that at compile time.
 */
export const cloudResolvers = {
  Query: {
    projects: async (_p, { first, offset }, ctx) => {
      const limit = pageSize('first', first, 50, PAGE_CAPS.Query.projects);
      if (offset != null && offset < 0) throw badUserInput('offset', 'must be 0 or more');
      return (await ctx.services.ledger.list('project', { limit, offset: offset ?? 0 })).map((r) =>
        viewAs('project', r),
      );
    },
    project: (_p, { id }, ctx) => ctx.loaders.ofKind(id, 'project'),
  },
  // The context goes along as the creation's RequestLog: its logger, naming the request id, is made only if the call
  // writes a line (an upstream attempt that failed, a lease warning), not on every mutation.
  Mutation: {
    createProject: async (_p, { input, idempotencyKey }, ctx) =>
      payload('project', 'project', await ctx.services.cloud.createProject(ctx.caller, input, idempotencyKey, ctx)),
    createNetwork: async (_p, { input, idempotencyKey }, ctx) =>
      payload('network', 'network', await ctx.services.cloud.createNetwork(ctx.caller, input, idempotencyKey, ctx)),
    createSubnet: async (_p, { input, idempotencyKey }, ctx) =>
      payload('subnet', 'subnet', await ctx.services.cloud.createSubnet(ctx.caller, input, idempotencyKey, ctx)),
    createIpAddress: async (_p, { input, idempotencyKey }, ctx) =>
      payload(
        'ipAddress',
        'ip_address',
        await ctx.services.cloud.createIpAddress(ctx.caller, input, idempotencyKey, ctx),
      ),
    createKafkaCluster: async (_p, { input, idempotencyKey }, ctx) =>
      payload(
        'kafkaCluster',
        'kafka_cluster',
        await ctx.services.cloud.createKafkaCluster(ctx.caller, input, idempotencyKey, ctx),
      ),
    createKafkaTopic: async (_p, { input, idempotencyKey }, ctx) =>
      payload(
        'kafkaTopic',
        'kafka_topic',
        await ctx.services.cloud.createKafkaTopic(ctx.caller, input, idempotencyKey, ctx),
      ),
    createKafkaUser: async (_p, { input, idempotencyKey }, ctx) =>
      payload(
        'kafkaUser',
        'kafka_user',
        await ctx.services.cloud.createKafkaUser(ctx.caller, input, idempotencyKey, ctx),
      ),
    createVirtualMachine: async (_p, { input, idempotencyKey }, ctx) =>
      payload(
        'virtualMachine',
        'virtual_machine',
        await ctx.services.cloud.createVirtualMachine(ctx.caller, input, idempotencyKey, ctx),
      ),
  },
  Project: {
    networks: (r, _a, ctx) => ctx.loaders.inProject('network').load(r.id),
    kafkaClusters: (r, _a, ctx) => ctx.loaders.inProject('kafka_cluster').load(r.id),
    virtualMachines: (r, _a, ctx) => ctx.loaders.inProject('virtual_machine').load(r.id),
  },
  Network: {
    project: (r, _a, ctx) => ctx.loaders.ofKind(r.projectId, 'project'),
    subnets: (r, _a, ctx) => ctx.loaders.children('subnet').load(r.id),
    ipAddresses: (r, _a, ctx) => ctx.loaders.children('ip_address').load(r.id),
  },
  Subnet: {
    network: (r, _a, ctx) => ctx.loaders.ofKind(r.parentId, 'network'),
  },
  IpAddress: {
    network: (r, _a, ctx) => ctx.loaders.ofKind(r.parentId, 'network'),
    // Read from the stored creation answer where CLOUD_IP_ADDRESS_PATH (or the guesses) says.
    address: (r, _a, ctx) => ctx.services.cloud.addressOf(r)?.address ?? null,
  },
  KafkaCluster: {
    project: (r, _a, ctx) => ctx.loaders.ofKind(r.projectId, 'project'),
    network: (r, _a, ctx) => ctx.loaders.ofKind(r.networkId, 'network'),
    subnet: (r, _a, ctx) => ctx.loaders.ofKind(r.subnetId, 'subnet'),
    topics: (r, _a, ctx) => ctx.loaders.children('kafka_topic').load(r.id),
    users: (r, _a, ctx) => ctx.loaders.children('kafka_user').load(r.id),
  },
  KafkaTopic: {
    cluster: (r, _a, ctx) => ctx.loaders.ofKind(r.parentId, 'kafka_cluster'),
  },
  KafkaUser: {
    cluster: (r, _a, ctx) => ctx.loaders.ofKind(r.parentId, 'kafka_cluster'),
  },
  VirtualMachine: {
    project: (r, _a, ctx) => ctx.loaders.ofKind(r.projectId, 'project'),
  },
  VmNetworkInterface: {
    network: (n, _a, ctx) => ctx.loaders.ofKind(n.networkId, 'network'),
    subnet: (n, _a, ctx) => ctx.loaders.ofKind(n.subnetId, 'subnet'),
    ipAddress: (n, _a, ctx) => ctx.loaders.ofKind(n.ipAddressId, 'ip_address'),
  },
} satisfies Resolvers;

/** What a field's resolver must return, from its generated type. */
type FieldResult<R> = ReturnType<Extract<NonNullable<R>, (...args: never[]) => unknown>>;

/**
 * The fields of a type that `given` leaves to the default resolver, each mapped to whether the parent
 * (the view) has a property of that name whose type the generated resolver type accepts.
 */
type DefaultResolved<T extends keyof Resolvers, Given> = {
  [F in Exclude<keyof NonNullable<Resolvers[T]>, '__isTypeOf' | '__resolveType' | keyof Given>]-?: NonNullable<
    Resolvers[T]
  >[F] extends infer R
    ? Extract<NonNullable<R>, (...args: never[]) => unknown> extends (parent: infer P, ...rest: never[]) => unknown
      ? F extends keyof P
        ? P[F] extends FieldResult<R>
          ? true
          : { wrongType: F }
        : { missing: F }
      : never
    : never;
};
type AllTrue<T> = Exclude<T[keyof T], true> extends never ? true : T;
/** Compiles only when `T` is true, and names the offending field otherwise. */
type Check<T extends true> = T;

type CheckedViews = [
  Check<AllTrue<DefaultResolved<'Project', typeof cloudResolvers.Project>>>,
  Check<AllTrue<DefaultResolved<'Network', typeof cloudResolvers.Network>>>,
  Check<AllTrue<DefaultResolved<'Subnet', typeof cloudResolvers.Subnet>>>,
  Check<AllTrue<DefaultResolved<'IpAddress', typeof cloudResolvers.IpAddress>>>,
  Check<AllTrue<DefaultResolved<'KafkaCluster', typeof cloudResolvers.KafkaCluster>>>,
  Check<AllTrue<DefaultResolved<'KafkaTopic', typeof cloudResolvers.KafkaTopic>>>,
  Check<AllTrue<DefaultResolved<'KafkaUser', typeof cloudResolvers.KafkaUser>>>,
  Check<AllTrue<DefaultResolved<'VirtualMachine', typeof cloudResolvers.VirtualMachine>>>,
  Check<AllTrue<DefaultResolved<'BootDisk', object>>>,
  Check<AllTrue<DefaultResolved<'VmNetworkInterface', typeof cloudResolvers.VmNetworkInterface>>>,
];
