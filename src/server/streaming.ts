import type { GraphQLSchema } from 'graphql';
import type { Caller } from '../caller.js';
import type { Admission } from '../execution/admit.js';
import type { DocumentCache } from '../execution/prepare.js';
import type { SharedExecution } from '../execution/shared.js';
import type { GraphQLContext } from '../graphql/context.js';
import type { Logger } from '../logger.js';
import type { Authenticate } from './auth.js';
import type { AuthExpiry } from './jwt-auth.js';
import type { DocumentAdmission } from './trusted-documents.js';

/**
 * What both streaming transports (graphql-ws, graphql-sse) are given: the stages of the execution pipeline
 * (src/execution/), the same instances HTTP uses, so they authenticate, prepare, admit and present alike.
 */
export interface StreamingTransportOptions {
  schema: GraphQLSchema;
  logger: Logger;
  authenticate: Authenticate;
  /** Ends a connection opened with a JWT when the token expires (absent: connections never end for that). */
  expiry?: AuthExpiry;
  context: (caller: Caller, requestId: string) => GraphQLContext;
  /** The prepare stage's cache (parse, limits, validation), shared with POST /graphql. */
  documents: DocumentCache;
  /** The admit stage: the cost limit, then the rate limit. */
  admit: Admission;
  /** TRUSTED_DOCUMENTS: an operation may come by `documentId` or `extensions.persistedQuery`. */
  trusted?: DocumentAdmission;
  /** Subscription results shared by identical subscriptions; one for both transports (src/execution/shared.ts). */
  shared?: SharedExecution;
}
