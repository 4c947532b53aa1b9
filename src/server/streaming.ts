import type { GraphQLSchema } from 'graphql';

import type { Caller } from '../auth/caller.js';
import type { AuthExpiry } from '../auth/jwt.js';
import type { Authenticate } from '../auth/keys.js';
import type { GraphQLContext } from '../graphql/context.js';
import type { Logger } from '../logger.js';
import type { HeldCredentials } from './held-credentials.js';
import type { DocumentAdmission } from './trusted-documents.js';

/**
 * What both streaming transports (graphql-ws, graphql-sse) are given besides the execution pipeline's one entry
 * (src/execution/pipeline.ts, the same instance HTTP and MCP use): how to authenticate a connection or request, and
 * make an operation's context.
 */
export interface StreamingTransportOptions {
  schema: GraphQLSchema;
  logger: Logger;
  authenticate: Authenticate;
  /** Ends a connection opened with a JWT when the token expires (absent: connections never end for that). */
  expiry?: AuthExpiry;
  /** What credentials hold open, authenticated again after a reload (one for every transport). */
  held: HeldCredentials;
  /** `connection`: graphql-ws's, the request id of the connection's upgrade (GraphQLContext.connection). */
  context: (caller: Caller, requestId: string, connection?: string) => GraphQLContext;
  /** TRUSTED_DOCUMENTS, for graphql-sse, which resolves them on its wire (graphql-ws leaves them to the pipeline). */
  trusted?: DocumentAdmission;
}
