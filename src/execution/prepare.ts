// The *prepare* stage of the execution pipeline (docs/decisions/044): a document text is parsed (with the token
// limit) and validated (graphql-js's rules, the abuse limits and the introspection policy) once, for every
// transport: POST /graphql's direct path, graphql-ws and graphql-sse read the same cache. Apollo's own pipeline
// (GET, batches, APQ and what the direct path leaves to it) validates with the same rules (src/execution/apollo.ts).
import {
  getOperationAST,
  GraphQLError,
  specifiedRules,
  validate,
  type DocumentNode,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type ValidationRule,
} from 'graphql';
import type { CompiledQuery } from 'graphql-jit';
import { LRUCache } from 'lru-cache';

import { namingValidationStop, type OperationLimits } from './limits.js';

export interface PreparedDocument {
  /** The text, shared by every subscription of it (bench scenario 5, memory per idle subscription). */
  readonly query: string;
  /** The validated document, or why it is refused (a syntax error, a limit, a validation rule). */
  readonly document: DocumentNode | readonly GraphQLError[];
  /** Which check refused the document (the text does not parse, or a validation rule): Apollo answers them apart. */
  readonly refusedAt: 'parse' | 'validate' | null;
  /** The operation picked without an operationName (null: none, or several). */
  readonly anonymous: OperationDefinitionNode | null;
  /** graphql-jit's compilation per operation that qualifies (src/execution/run.ts), made on first use. */
  readonly compiled: Map<OperationDefinitionNode, CompiledQuery | null>;
}

/**
 * Prepared documents kept (parsed, validated, and their graphql-jit compilations), by text: at most this many, least recently
 * used first out, and at most DOCUMENT_CACHE_TEXT_BYTES of text in all. A document's AST and compilations weigh more
 * than its text; the count bounds them.
 */
const DOCUMENT_CACHE_SIZE = 1000;
const DOCUMENT_CACHE_TEXT_BYTES = 8 * 1024 * 1024;

export class DocumentCache {
  private readonly documents: LRUCache<string, PreparedDocument>;
  private readonly rules: readonly ValidationRule[];
  /**
   * With introspection off, graphql-js's "Did you mean …?" is left out of every error (validation here, variable
   * coercion where the transports execute): an error names no schema element the request did not name.
   */
  readonly hideSuggestions: boolean;

  constructor(
    private readonly schema: GraphQLSchema,
    private readonly limits: OperationLimits,
  ) {
    this.documents = new LRUCache({
      max: DOCUMENT_CACHE_SIZE,
      maxSize: DOCUMENT_CACHE_TEXT_BYTES,
      sizeCalculation: (_v, k) => k.length || 1,
    });
    this.rules = [...specifiedRules, ...limits.validationRules];
    this.hideSuggestions = !limits.introspection;
  }

  /** How many document texts are prepared. */
  get size(): number {
    return this.documents.size;
  }

  /**
   * The prepared document of `query`. `validated`: the document a framework already parsed and validated with these
   * same rules (Apollo's pipeline, src/execution/apollo.ts), kept as it is instead of being parsed a second time.
   */
  get(query: string, validated?: DocumentNode): PreparedDocument {
    let cached = this.documents.get(query);
    if (!cached) {
      let document: DocumentNode | readonly GraphQLError[];
      let refusedAt: PreparedDocument['refusedAt'] = null;
      if (validated) {
        document = validated;
      } else {
        try {
          const parsed = this.limits.parse(query);
          const errors = namingValidationStop(
            validate(this.schema, parsed, this.rules, { hideSuggestions: this.hideSuggestions }),
          );
          document = errors.length ? errors : parsed;
          if (errors.length) refusedAt = 'validate';
        } catch (err) {
          // Anything but a GraphQLError is a fault of the gateway's (a rule's bug), not the document's refusal: thrown,
          // so the transports answer INTERNAL_SERVER_ERROR and log it in full, and not kept with the text.
          if (!(err instanceof GraphQLError)) throw err;
          document = [err];
          refusedAt = 'parse';
        }
      }
      const anonymous = Array.isArray(document) ? null : (getOperationAST(document as DocumentNode) ?? null);
      cached = { query, document, refusedAt, anonymous, compiled: new Map() };
      this.documents.set(query, cached);
    }
    return cached;
  }
}
