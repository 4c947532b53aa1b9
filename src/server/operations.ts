import { GraphQLError, getOperationAST, parse, validate, type DocumentNode, type GraphQLSchema, type OperationTypeNode } from 'graphql';
import { LRUCache } from 'lru-cache';

export interface PreparedDocument {
  /** The text, shared by every subscription of it (bench scenario 5, memory per idle subscription). */
  readonly query: string;
  readonly document: DocumentNode | readonly GraphQLError[];
}

/**
 * Parsed and validated documents by text, for the streaming transports (graphql-ws and graphql-sse): subscribe
 * churn re-uses them instead of re-parsing, and both transports apply the same validation.
 */
export class DocumentCache {
  private readonly documents: LRUCache<string, PreparedDocument>;

  constructor(
    private readonly schema: GraphQLSchema,
    max = 1000,
  ) {
    this.documents = new LRUCache({ max });
  }

  get(query: string): PreparedDocument {
    let cached = this.documents.get(query);
    if (!cached) {
      let document: DocumentNode | readonly GraphQLError[];
      try {
        const parsed = parse(query);
        const errors = validate(this.schema, parsed);
        document = errors.length ? errors : parsed;
      } catch (err) {
        document = [err instanceof GraphQLError ? err : new GraphQLError(String(err))];
      }
      cached = { query, document };
      this.documents.set(query, cached);
    }
    return cached;
  }
}

/** The operation `operationName` picks in `document`, or an error a client can act on. */
export function pickOperation(document: DocumentNode, operationName: string | null | undefined): { type: OperationTypeNode; name: string | undefined } | GraphQLError {
  const op = getOperationAST(document, operationName);
  if (!op) return new GraphQLError('Unable to identify the operation: pass operationName');
  return { type: op.operation, name: op.name?.value };
}
