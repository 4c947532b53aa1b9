import { GraphQLError, getOperationAST, parse, specifiedRules, validate, type DocumentNode, type GraphQLSchema, type OperationTypeNode, type ValidationRule } from 'graphql';
import { LRUCache } from 'lru-cache';
import type { OperationLimits } from './limits.js';

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
  private readonly rules: readonly ValidationRule[];

  /** With `limits`, documents are parsed by its token-counting parser and validated with its rules too. */
  constructor(
    private readonly schema: GraphQLSchema,
    private readonly limits?: OperationLimits,
    max = 1000,
  ) {
    this.documents = new LRUCache({ max });
    this.rules = [...specifiedRules, ...(limits?.validationRules ?? [])];
  }

  get(query: string): PreparedDocument {
    let cached = this.documents.get(query);
    if (!cached) {
      let document: DocumentNode | readonly GraphQLError[];
      try {
        const parsed = this.limits ? this.limits.parse(query) : parse(query);
        const errors = validate(this.schema, parsed, this.rules);
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
