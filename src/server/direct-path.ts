import type { IncomingMessage, ServerResponse } from 'node:http';
import type { OperationTypeNode } from 'graphql';

import type { ApolloSetup } from '../execution/apollo.js';
import type { OperationParams, Pipeline } from '../execution/pipeline.js';
import { HttpPresenter, type HttpAnswer } from '../execution/present.js';
import type { GraphQLContext } from '../graphql/context.js';

/**
 * The direct path of POST /graphql (decision 035, revised by 044 and 065): a request whose answer is provably the one
 * Apollo Server would give is answered by the execution pipeline's one entry (src/execution/pipeline.ts runOperation)
 * without Apollo's per-request pipeline (the HeaderMap copy, the sha256 of the text, content negotiation twice, a
 * whatwg-mimetype parse, the dispatch of seven plugins' hooks, the copy of the context). This file only translates
 * the wire: the JSON body into the pipeline's params, and the pipeline's answer (src/execution/present.ts
 * HttpPresenter, made from the options object the gateway gives `new ApolloServer`) into the response.
 *
 * Which path answers is decided from the request's shape alone, after the credential is checked and before anything is
 * parsed or admitted (`accepts`), so nothing is done twice: Apollo answers GET, batches, other content types, APQ
 * (`extensions.persistedQuery`), a body Apollo would refuse as malformed, and an Accept header that allows no JSON
 * type. Every other POST is the direct path's to the end, refusals included (401, a document that does not parse or
 * validate, an operation that cannot be picked, FORBIDDEN, a refused cost, RATE_LIMITED), each answered as Apollo 5.5
 * answers it; test/server/direct-path.test.ts sends each kind of request to a gateway with the direct path on and off and
 * compares status, headers and body byte for byte. Off: `directPath: false`, or on its own (with a warning) when the
 * environment makes Apollo install plugins of its own (APOLLO_KEY, APOLLO_SCHEMA_REPORTING).
 */
export interface DirectPathOptions {
  /** The Apollo options (the same object Apollo was built from): the presenter formats errors as they say. */
  apollo: ApolloSetup;
  /** The execution pipeline's one entry. */
  pipeline: Pipeline;
  /** The run stage's counts of compiled queries (tests read them through `stats`). */
  runner: { readonly stats: { readonly compiled: number; readonly recompiled: number } };
  /** How many document texts the prepare stage holds. */
  documents: { readonly size: number };
  /** Whether the operation span plugin is installed (tracing on). */
  tracing: boolean;
}

/** A POST the direct path answers: its params, and the content type Apollo would negotiate for it. */
export interface DirectRequest {
  readonly params: OperationParams;
  readonly contentType: string;
}

export class DirectPath {
  private readonly present: HttpPresenter;
  /** JSON POSTs answered by the direct path, and those left to Apollo (tests check which path a request took). */
  readonly stats: { direct: number; apollo: number; readonly compiled: number; readonly recompiled: number };

  private constructor(private readonly options: DirectPathOptions) {
    const runner = options.runner;
    this.present = new HttpPresenter(options.apollo.options, options.tracing);
    this.stats = {
      direct: 0,
      apollo: 0,
      get compiled() {
        return runner.stats.compiled;
      },
      get recompiled() {
        return runner.stats.recompiled;
      },
    };
  }

  /**
   * The direct path, or null when the environment makes Apollo install plugins whose effects it does not reproduce
   * (usage or schema reporting): then every request goes through Apollo, and the operator is told once.
   */
  static create(
    options: DirectPathOptions,
    reporting: readonly string[],
    warn: (message: string) => void,
  ): DirectPath | null {
    if (reporting.length) {
      warn(
        `the direct path of POST /graphql is off: ${reporting.join(' and ')} ${reporting.length > 1 ? 'make' : 'makes'} Apollo Server install plugins of its own, so every request goes through Apollo's pipeline`,
      );
      return null;
    }
    return new DirectPath(options);
  }

  /** How many document texts are prepared (the prepare stage's cache, shared with the streaming transports). */
  get compiledDocuments(): number {
    return this.options.documents.size;
  }

  /**
   * Whether the direct path answers a JSON POST whose body (already parsed; trusted documents already resolved when
   * the credential was accepted, left as sent when not) is `body`: decided from its shape and the Accept header
   * alone, before any work. Null: Apollo answers it.
   */
  accepts(req: IncomingMessage, body: unknown): DirectRequest | null {
    const direct = this.shape(req, body);
    if (direct) this.stats.direct++;
    else this.stats.apollo++;
    return direct;
  }

  private shape(req: IncomingMessage, body: unknown): DirectRequest | null {
    // runHttpQuery's POST checks, narrowed to what needs no error: an object with a non-empty query string,
    // variables and extensions objects or null, operationName a string or null, no persisted query.
    if (!body || typeof body !== 'object' || Array.isArray(body)) return null;
    const params = body as { query?: unknown; variables?: unknown; operationName?: unknown; extensions?: unknown };
    const query = params.query;
    if (typeof query !== 'string' || query === '') return null;
    const rawVariables = params.variables;
    if (rawVariables !== undefined && rawVariables !== null && !isRecord(rawVariables)) return null;
    const rawName = params.operationName;
    if (rawName !== undefined && rawName !== null && typeof rawName !== 'string') return null;
    const extensions = params.extensions;
    if (extensions !== undefined && extensions !== null && (!isRecord(extensions) || 'persistedQuery' in extensions))
      return null;
    const contentType = this.options.apollo.contentTypes.of(req.headers.accept);
    if (contentType === null) return null;
    return {
      contentType,
      params: {
        query,
        operationName: typeof rawName === 'string' ? rawName : undefined,
        variables: isRecord(rawVariables) ? rawVariables : undefined,
      },
    };
  }

  /**
   * Answers a request `accepts` took: the context the route made (null: its making threw `failure`, the
   * authentication refused), then the pipeline with HTTP's presentation, then the write.
   */
  async run(
    res: ServerResponse,
    request: DirectRequest,
    contextValue: GraphQLContext | null,
    failure: unknown,
    requestId: string,
  ): Promise<void> {
    if (contextValue === null) {
      this.send(
        res,
        this.present.failure(failure, request.contentType, requestId, 'Context creation failed: '),
        request.contentType,
        requestId,
      );
      return;
    }
    const answer = await this.options.pipeline.runOperation({
      caller: contextValue.caller,
      params: request.params,
      transport: 'http',
      requestId,
      context: contextValue,
      // Subscriptions run over WebSocket and SSE (docs/contract.md, Routes): one sent here is refused, BAD_REQUEST.
      allow: QUERIES_AND_MUTATIONS,
      trustedResolved: true,
      variables: 'in-run',
      present: this.present,
    });
    this.send(res, answer, request.contentType, requestId);
  }

  /** runHttpQuery.js for a single result, and the route's write: headers in Apollo's order, then the body. */
  private send(res: ServerResponse, answer: HttpAnswer, contentType: string, requestId: string): void {
    let text: string;
    try {
      // Apollo's default stringifyResult (checked at start-up), with its field order: errors, data, extensions.
      const { result } = answer;
      text = JSON.stringify({ errors: result.errors, data: result.data, extensions: result.extensions }) + '\n';
    } catch (err) {
      // ApolloServer.errorResponse: the failure formatted (masked), its own status (500), no plugin's header.
      const failed = this.present.failure(err, contentType, requestId);
      for (const [k, v] of failed.headers) res.setHeader(k, v);
      res.statusCode = failed.status;
      res.end(JSON.stringify({ errors: failed.result.errors }) + '\n');
      return;
    }
    const headers = answer.headers;
    if (!headers.get('content-type')) headers.set('content-type', contentType);
    for (const [k, v] of headers) res.setHeader(k, v);
    res.statusCode = answer.status;
    res.end(text);
  }
}

const QUERIES_AND_MUTATIONS = ['query', 'mutation'] as OperationTypeNode[];

function isRecord(o: unknown): o is Record<string, unknown> {
  return !!o && typeof o === 'object' && !Buffer.isBuffer(o) && !Array.isArray(o);
}
