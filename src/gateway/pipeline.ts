// The execution pipeline (src/execution/, docs/decisions/044 and 065): one instance of each stage, used by every
// transport. prepare: parse, limits and validation once per text; admit: cost, then rate limit; run: graphql-js or
// the compiled query; present: masking, warnings, status codes.
import { ApolloServer } from '@apollo/server';
import type { GraphQLSchema } from 'graphql';

import type { Caller } from '../auth/caller.js';
import type { Config } from '../config/index.js';
import { createAdmission } from '../execution/admit.js';
import { apolloSetup, type ApolloSetup } from '../execution/apollo.js';
import { OperationLimits } from '../execution/limits.js';
import { createPipeline, type Pipeline } from '../execution/pipeline.js';
import { DocumentCache } from '../execution/prepare.js';
import { OperationRunner, streamingExecution } from '../execution/run.js';
import { SharedExecution } from '../execution/shared.js';
import { SourceStreams } from '../execution/source-stream.js';
import { agentResolvers } from '../graphql/agents.js';
import { catalogResolvers } from '../graphql/catalog.js';
import { cloudResolvers } from '../graphql/cloud.js';
import { commonResolvers } from '../graphql/common.js';
import { createContext, type GraphQLContext } from '../graphql/context.js';
import { identityResolvers } from '../graphql/identity.js';
import { mobileIdResolvers } from '../graphql/mobile-id.js';
import { provisioningResolvers } from '../graphql/provisioning.js';
import { buildSchema } from '../graphql/schema.js';
import type { Logger } from '../logger.js';
import { DirectPath } from '../server/direct-path.js';
import {
  untrustedRefusal,
  type Admission,
  type OperationRequest,
  type TrustedDocuments,
} from '../server/trusted-documents.js';
import type { Services } from '../services.js';
import { nameOperationApp } from '../telemetry/operations.js';
import type { Tracing } from '../telemetry/tracing.js';

/**
 * The GraphQL context of one operation. `logger` is the request's logger when it has one, as a function: a route's
 * child logger is made on first use only (most requests log nothing), so it must not be read here.
 */
export type ContextFor = (
  caller: Caller,
  requestId: string,
  logger?: () => Logger,
  connection?: string,
) => GraphQLContext;

export function contextBuilder(services: Services, logger: Logger): ContextFor {
  return (caller, requestId, requestLogger, connection) =>
    requestLogger
      ? createContext(services, caller, requestId, requestLogger)
      : createContext(services, caller, requestId, logger, true, connection);
}

/** The cloud creation mutations (src/graphql/cloud.ts): one upstream call each, and a payload read from the ledger. */
const CLOUD_CREATIONS: ReadonlySet<string> = new Set([
  'createProject',
  'createNetwork',
  'createSubnet',
  'createIpAddress',
  'createKafkaCluster',
  'createKafkaTopic',
  'createKafkaUser',
  'createVirtualMachine',
]);

/** The gateway's schema: every domain's resolvers. */
export function gatewaySchema(): GraphQLSchema {
  return buildSchema([
    commonResolvers,
    catalogResolvers,
    cloudResolvers,
    provisioningResolvers,
    identityResolvers,
    mobileIdResolvers,
    agentResolvers,
  ] as Record<string, unknown>[]);
}

export interface BuiltPipeline {
  readonly pipeline: Pipeline;
  readonly limits: OperationLimits;
  readonly documents: DocumentCache;
  readonly apollo: ApolloServer<GraphQLContext>;
  /** The error a request's context Apollo answers rejects with, naming the request (ApolloSetup.contextFailed). */
  readonly contextFailed: ApolloSetup['contextFailed'];
  /** POST /graphql's direct path (null: off, or Apollo's configuration is not one it reproduces). */
  readonly direct: DirectPath | null;
  /** The admission of trusted documents every transport uses (undefined when TRUSTED_DOCUMENTS is off). */
  readonly trusted: { admit(request: OperationRequest, owner: string | null): Admission } | undefined;
}

export async function buildPipeline(
  config: Config,
  parts: {
    schema: GraphQLSchema;
    services: Services;
    logger: Logger;
    tracing: Tracing;
    trusted: { admit: TrustedDocuments['admit'] } | undefined;
    contextFor: ContextFor;
    /** false: every POST /graphql goes through Apollo's pipeline (tests compare the two paths). */
    directPath: boolean;
    onClose: (close: () => Promise<void>) => void;
  },
): Promise<BuiltPipeline> {
  const { schema, services, logger, tracing } = parts;
  const limits = new OperationLimits(config.graphqlLimits, { introspection: config.introspection });
  const documents = new DocumentCache(schema, limits);
  // A persisted query's hash is registered only with a text that runs: its preparation, kept for the run that follows.
  const runs = (text: string) => !Array.isArray(documents.get(text).document);
  const trusted: BuiltPipeline['trusted'] = parts.trusted && {
    admit: (request, owner) => parts.trusted!.admit(request, owner, runs),
  };
  const admit = createAdmission({
    schema,
    limits,
    rateLimits: services.rateLimits,
    seen: (caller) => {
      if (!caller.app) return;
      if (caller.via) services.apps.activity.seen(caller.app, caller.via, caller.grants.key);
      if (tracing.enabled) nameOperationApp(caller.app);
    },
  });
  // The cloud tree (src/graphql/cloud.ts): every field under these reads the ledger through the request's
  // DataLoaders, so a second run (graphql-js, after an error) changes nothing.
  // GRAPHQL_COMPILED_MUTATIONS: the cloud creations, whose payload's tree reads the ledger the same way; the root
  // resolver's outcome is kept for the second run (decisions 087, 099).
  const runner = new OperationRunner(
    schema,
    parts.directPath ? new Set(['project', 'projects']) : new Set(),
    !config.introspection,
    parts.directPath && config.compiledMutations ? CLOUD_CREATIONS : new Set(),
    config.variablesCheck,
  );
  // One shared execution for both transports: identical subscriptions share each event's result (decision 030).
  // SUBSCRIPTION_COMPILED_SELECTION: each selection as graphql-jit compiled it, graphql-js on any error (decision 062).
  const shared = new SharedExecution(config.delivery.compiledSelection ? schema : undefined);
  services.metrics.countSubscriptions(() => shared.stats);
  // SUBSCRIPTION_COMPILED_SOURCE: each subscribe's source stream from a plan per document, graphql-js's functions
  // (decision 154).
  const sources = config.delivery.compiledSource ? new SourceStreams(schema) : undefined;
  const pipeline = createPipeline({
    schema,
    documents,
    admit,
    runner,
    // graphql-ws and graphql-sse run graphql-js with each subscription event's result shared, a span per operation.
    streaming: {
      ws: streamingExecution(tracing, 'ws', shared, documents.hideSuggestions, sources),
      sse: streamingExecution(tracing, 'sse', shared, documents.hideSuggestions, sources),
    },
    trusted,
    // With trusted documents off, graphql-ws answers Apollo's persisted-query extension as POST /graphql's Apollo does.
    untrusted: untrustedRefusal,
    logger,
    context: (caller, requestId) => parts.contextFor(caller, requestId),
    live: services.liveSubscriptions,
  });
  const apolloConfig = apolloSetup({ schema, limits, pipeline, logger, tracing: tracing.enabled });
  const apollo = new ApolloServer<GraphQLContext>(apolloConfig.options);
  await apollo.start();
  parts.onClose(() => apollo.stop());
  const direct = parts.directPath
    ? DirectPath.create(
        { apollo: apolloConfig, pipeline, runner, documents, tracing: tracing.enabled },
        config.apolloReporting,
        (message) => logger.warn(message),
      )
    : null;
  return { pipeline, limits, documents, apollo, contextFailed: apolloConfig.contextFailed, direct, trusted };
}
