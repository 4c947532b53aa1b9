import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { GraphQLError, type ExecutionResult, type OperationTypeNode } from 'graphql';
import { createHandler } from 'graphql-sse';

import { ownerCaller, type Caller } from '../auth/caller.js';
import { expiredNow, onExpiry } from '../auth/jwt.js';
import { authorizationOf, type AuthFailure } from '../auth/keys.js';
import { readableBy } from '../auth/tenancy.js';
import { ErrorCode } from '../errors.js';
import { bodyTooLarge } from '../execution/limits.js';
import type { Pipeline, Ran } from '../execution/pipeline.js';
import { deliverable, streamFailure, streamPresenter, writable, type ResultStream } from '../execution/present.js';
import type { GraphQLContext } from '../graphql/context.js';
import type { Tracing } from '../telemetry/tracing.js';
import { Delivery, type Holding } from './held-credentials.js';
import type { Route, RouteContext } from './http.js';
import { contentType, readBodyText, refuseShuttingDown, sendJson } from './respond.js';
import type { StreamingTransportOptions } from './streaming.js';
import { untrustedRefusal, type DocumentRefusal } from './trusted-documents.js';

export const SSE_PATH = '/graphql/stream';
/** The header and query parameter graphql-sse's single-connection mode names a reserved stream by. */
const STREAM_TOKEN_HEADER = 'x-graphql-event-stream-token';
const STREAM_TOKEN_PARAM = 'token';
/** Reserved streams (single-connection mode) one API key may hold at once. */
const MAX_RESERVATIONS_PER_CALLER = 16;
/** A reserved stream that is not connected within this time is released. */
const RESERVATION_TIMEOUT_MS = 60_000;

export interface SseOptions extends StreamingTransportOptions {
  /** The execution pipeline's one entry: every operation runs through it (src/execution/pipeline.ts). */
  pipeline: Pipeline;
  tracing: Tracing;
  /** Largest request body, as for POST /graphql and a graphql-ws message. */
  bodyLimit: number;
  /**
   * Tests only: schedules the release of a reservation instead of a timer, so a test releases it when it chooses; the
   * release resolves once it is done (or put off, see `connecting`).
   */
  scheduleRelease?: (release: () => Promise<void>) => void;
  /**
   * Tests only: awaited by a request that graphql-sse has accepted as the connection of a reserved stream, before the
   * gateway marks the stream connected, so that a test releases the stream there.
   */
  connectionAccepted?: (token: string) => Promise<void>;
  /**
   * SUBSCRIBER_BUFFER_BYTES: the most bytes an event stream may leave unsent (its client not reading them) before it
   * is closed as a slow consumer, as a WebSocket subscriber is. Default 8 MiB.
   */
  subscriberBufferBytes?: number;
  /** Called with `slow_consumer` for each event stream closed as above (gateway_subscriptions_closed_total). */
  onClosed?: (reason: 'slow_consumer') => void;
}

interface SseContext {
  caller: Caller;
  /** The credential the request was authenticated with, authenticated again after a reload (recheck). */
  authorization: string | undefined;
  /** The configuration's generation when it was authenticated. */
  generation: number;
  requestId: string;
  /**
   * The reserved stream (single-connection mode) the request names, as graphql-sse reads it: another app's token is
   * replaced by one that names no stream (see `handle`).
   */
  stream?: string;
  /**
   * A refusal of trusted documents (with them off, of Apollo's persisted-query extension), delivered as the operation's
   * result (see onSubscribe).
   */
  refusal?: GraphQLError;
  /** The context of the request's operation, for graphql-sse's onNext and onComplete (set by onSubscribe). */
  operation?: GraphQLContext;
  /** A request that may open a distinct event stream: the `id:` of each of its `next` events to come (see EventIds). */
  ids?: EventIds;
}

const ALL_OPERATIONS = ['query', 'mutation', 'subscription'] as OperationTypeNode[];
/** Mutations cannot happen over GET (the GraphQL over HTTP spec): graphql-sse's own rule. */
const OVER_GET = ['query', 'subscription'] as OperationTypeNode[];
const JSON_HEADERS = { 'content-type': 'application/json; charset=utf-8' };

/**
 * graphql-sse's refusals, in the words and with the code (docs/contract.md, Error codes) this gateway answers them: a
 * request that is not a GraphQL request at all, and the misuse of the protocol's reserved streams.
 */
const REFUSALS: ReadonlyMap<string, readonly [code: string, message: string]> = new Map([
  ['Unparsable URL', [ErrorCode.BAD_REQUEST, 'the variables or extensions parameter is not valid JSON']],
  ['Missing body', [ErrorCode.BAD_REQUEST, 'the request has no body']],
  ['JSON body must be an object', [ErrorCode.BAD_REQUEST, 'the body must be a JSON object']],
  ['Missing query', [ErrorCode.BAD_REQUEST, 'the request names no query']],
  // A GET's (a POST's body is checked before graphql-sse reads it: postBodyRefusal), in GET /graphql's words.
  [
    'Invalid variables',
    [ErrorCode.BAD_REQUEST, 'The variables search parameter should contain a JSON-encoded object.'],
  ],
  [
    'Invalid extensions',
    [ErrorCode.BAD_REQUEST, 'The extensions search parameter should contain a JSON-encoded object.'],
  ],
  [
    'Stream not found',
    [ErrorCode.NOT_FOUND, `no reserved stream has this token (${STREAM_TOKEN_HEADER}): reserve one with PUT`],
  ],
  ['Stream already open', [ErrorCode.CONFLICT, 'this reserved stream is already connected: one GET connects it']],
  ['Stream already registered', [ErrorCode.CONFLICT, 'a stream with this token is already reserved']],
  [
    'Operation ID is missing',
    [
      ErrorCode.BAD_REQUEST,
      'an operation of a reserved stream is named by its id: extensions.operationId (POST) or ?operationId= (DELETE)',
    ],
  ],
  [
    'Operation with ID already exists',
    [ErrorCode.CONFLICT, 'an operation with this operationId is already running on the reserved stream'],
  ],
  [
    'Unable to detect operation AST',
    ['OPERATION_RESOLUTION_FAILURE', 'the document names no operation to run: with several, give operationName'],
  ],
  [
    'Cannot perform mutations over GET',
    [ErrorCode.BAD_REQUEST, 'a mutation cannot be sent with GET: send it with POST'],
  ],
]);

/**
 * A POST body's field that is not of its type, in the words POST /graphql answers it with (Apollo Server's
 * runHttpQuery, which checks the fields in this order), or null. graphql-sse checks the query, the variables and the
 * extensions in words of its own, and the operationName not at all: a number there was read as no name, and the request
 * was refused as a document of several operations. test/server/sse-bad-requests.test.ts asks both routes, so that a
 * change of Apollo's words shows.
 */
function postBodyRefusal(body: Params): string | null {
  const { query, variables, extensions, operationName } = body;
  const object = (value: unknown) => typeof value === 'object' && !Array.isArray(value);
  if (query != null && typeof query !== 'string') return 'GraphQL queries must be strings.';
  for (const [name, value] of [
    ['variables', variables],
    ['extensions', extensions],
  ] as const)
    if (typeof value === 'string')
      return `\`${name}\` in a POST body should be provided as an object, not a recursively JSON-encoded string.`;
  if (extensions != null && !object(extensions)) return '`extensions` in a POST body must be an object if provided.';
  if (variables != null && !object(variables)) return '`variables` in a POST body must be an object if provided.';
  if (operationName != null && typeof operationName !== 'string')
    return '`operationName` in a POST body must be a string if provided.';
  return null;
}

/** A request's Content-Type in lower case, as graphql-sse's case-sensitive test of it needs (its value is only tested). */
function lowerContentType(req: IncomingMessage): string | undefined {
  return req.headers['content-type']?.toLowerCase();
}

/** The methods graphql-sse takes (its 405's Allow): GET, POST (an operation), PUT (reserve), DELETE (stop). */
const SSE_METHODS = ['GET', 'POST', 'PUT', 'DELETE'];

/** What graphql-sse answers with no body at all, by its status. */
const BARE_REFUSALS: ReadonlyMap<number, readonly [code: string, message: string]> = new Map([
  [
    404,
    [
      ErrorCode.NOT_FOUND,
      `no stream named: send Accept: text/event-stream for an event stream of the operation's own, or name a reserved ` +
        `stream with ${STREAM_TOKEN_HEADER}`,
    ],
  ],
  [
    405,
    [ErrorCode.BAD_REQUEST, `this method is not allowed on ${SSE_PATH}: GET, POST, PUT (reserve) or DELETE (stop)`],
  ],
  [
    406,
    [
      ErrorCode.BAD_REQUEST,
      'the Accept header takes nothing this request is answered with: text/event-stream (an event stream), ' +
        'application/json (an operation added to a reserved stream) or text/plain (PUT, the token)',
    ],
  ],
]);

/**
 * graphql-sse answers its refusals with a bare `{ errors: [{ message }] }`, or with no body at all: the status and body
 * every other transport gives (docs/contract.md, Error codes), its error with the contract's code; or null for a
 * refusal that already carries one (a document's validation). graphql-sse takes an event stream whose token names no
 * reserved stream (released, never reserved, another app's) for an operation of its own: without a query, it is
 * answered as the unknown token it is, not as a request that names no query.
 */
function protocolRefusal(
  status: number,
  body: string | null,
  namesStream: boolean,
): { status: number; body: { errors: unknown[] } } | null {
  if (!body) {
    const [code, message] = BARE_REFUSALS.get(status) ?? [ErrorCode.BAD_REQUEST, `refused (HTTP ${status})`];
    return { status, body: { errors: [{ message, extensions: { code } }] } };
  }
  let error: { message?: unknown; extensions?: { code?: unknown } } | undefined;
  try {
    error = (JSON.parse(body) as { errors?: (typeof error)[] }).errors?.[0];
  } catch {
    return null;
  }
  if (!error || error.extensions?.code !== undefined) return null;
  // A stream named but no query: the token names no reserved stream, which is what the client is told.
  const unknownStream = namesStream && error.message === 'Missing query';
  const said =
    typeof error.message === 'string' ? REFUSALS.get(unknownStream ? 'Stream not found' : error.message) : undefined;
  if (unknownStream) status = 404;
  const [code, message] = said ?? [
    status === 404 ? ErrorCode.NOT_FOUND : status === 409 ? ErrorCode.CONFLICT : ErrorCode.BAD_REQUEST,
    String(error.message),
  ];
  return { status, body: { errors: [{ message, extensions: { code } }] } };
}

interface Reservation {
  scope: string;
  connected: boolean;
  /**
   * The requests connecting it now: graphql-sse may have opened its event stream for one, which the gateway has not
   * marked `connected` yet. A release meanwhile is put off (`releaseDue`) until none is left, and then made only if
   * none connected it: released under an open event stream, its operations would be dropped and the client left
   * waiting.
   */
  connecting: number;
  /** A release came while a request was connecting it (see `connecting`). */
  releaseDue: boolean;
  timer: NodeJS.Timeout | undefined;
  /** The `id:` of each `next` event to come on the reserved stream, whichever request added its operation. */
  ids: EventIds;
  /** Once connected: its end with the credential that connected it (at that credential's expiry, or a reload's). */
  ending?: Ending;
  /**
   * The bytes of the results handed to graphql-sse for it while it is not connected: graphql-sse queues them until its
   * GET connects, and past SUBSCRIBER_BUFFER_BYTES it is released (see `hold`).
   */
  heldBytes: number;
}

/**
 * The SSE `id:` of each `next` event an event stream has yet to write, in order: its result's cursor
 * (`extensions.cursor`, src/execution/shared.ts), or undefined for a result without one (a query's, a mutation's).
 * onNext adds one per result it hands graphql-sse, and the stream's writer takes one per `next` event it writes:
 * graphql-sse (pinned) writes each result's `next` event one await after its onNext returns, so the events of every
 * operation on a stream come in the order onNext saw their results. The cursor is read from the result object, never
 * from the event's text, where a JSON scalar of the data may hold a key "cursor" of its own.
 */
type EventIds = (string | undefined)[];

type Params = {
  query?: unknown;
  documentId?: unknown;
  extensions?: unknown;
  variables?: unknown;
  operationName?: unknown;
  [k: string]: unknown;
};

/**
 * Subscriptions (and queries and mutations) over Server-Sent Events on /graphql/stream, with graphql-sse: its
 * distinct-connections mode (one event stream per operation) and its single-connection mode (PUT reserves a
 * stream, GET with Accept: text/event-stream connects it, POST/GET add operations, DELETE stops one). The
 * transport is the only thing new: the API key, the trusted documents, the validation, the resolvers (and so
 * the replay of stored events to late subscribers) and the masking of errors are those of graphql-ws.
 */
export function createSseRoute(options: SseOptions): Route & { close(): Promise<void> } {
  const reservations = new Map<string, Reservation>();
  const open = new Set<AsyncGenerator<string, void, undefined>>();
  /** True once `close` has begun (shutdown): a stream opened from then on is ended as soon as it opens. */
  let closing = false;
  const present = streamPresenter(options.logger);
  const bufferLimit = options.subscriberBufferBytes ?? 8 * 1024 * 1024;
  const expiry = options.expiry;
  const held = options.held;
  /**
   * The subscriptions that run on each reserved stream (single-connection mode), by their contextValue: they end before
   * it does, and with it (`closed`).
   */
  const endingOn = new Map<string, Map<GraphQLContext, Ending>>();
  /** Each operation's contextValue: the reserved stream it runs on, and what its `complete` ends (onComplete). */
  const streamOf = new WeakMap<object, string>();
  const completions = new WeakMap<object, () => void>();
  /** The results onSubscribe answered with, presented already: onNext masks and logs none of them again. */
  const presented = new WeakSet<object>();
  /** A subscription's contextValue: its result stream, which onNext ends after a result JSON cannot write. */
  const resultsOf = new WeakMap<object, ResultStream>();
  /**
   * A subscription ends when its token expires, or when a reload refuses the credential it was opened with or takes a
   * scope its operation (`ran`) needs: a last result saying why (UNAUTHENTICATED, as a new subscription with the
   * credential would get; FORBIDDEN naming the field and the scope), then `complete`
   * (graphql-sse then ends a distinct connection's stream). The result stream's own `end` does it
   * (src/execution/run.ts makes it): no iterator around it.
   */
  const ending = (stream: ResultStream, ran: Ran, context: GraphQLContext, request: SseContext): ResultStream => {
    const key = streamOf.get(context);
    const on = key === undefined ? undefined : (endingOn.get(key) ?? endingOn.set(key, new Map()).get(key)!);
    let completed!: () => void;
    const queued = new Promise<void>((resolve) => (completed = resolve));
    const subscription = heldEnding(request.authorization, context.caller, (error) => {
      stream.end({ errors: [error] });
      return queued;
    });
    subscription.admitted = (caller) => {
      const error = options.pipeline.forbiddenNow(caller, ran, context.caller);
      if (error && held.release(subscription)) void subscription.end(error);
    };
    const cancel = onExpiry(expiry, context.caller, (reason) => void subscription.end(expired(reason)));
    // A stream that ended on its own check of the expiry (its scheduled end not run yet: a timer firing late, a clock
    // moved) gets the same last result, not a bare `complete`. On a reserved stream whose own credential has expired,
    // the whole stream ends, as its scheduled end ends it: its other subscriptions would otherwise go on until then.
    if (context.caller.expiresAt !== undefined)
      stream.sourceEnded = () => {
        const reserved = key === undefined ? undefined : reservations.get(key)?.ending;
        const streamReason = reserved === undefined ? null : expiredNow(expiry, reserved.caller);
        if (streamReason !== null) return void reserved!.end(expired(streamReason));
        const reason = expiredNow(expiry, context.caller);
        if (reason !== null) void subscription.end(expired(reason));
      };
    // graphql-sse reads the stream in a loop of its own, which a rejected `next()` ends with the whole event stream
    // (every operation of a reserved one) and nothing said to the client. The failure is the operation's last result
    // instead, masked by the one rule as graphql-ws's `error` for it is (streamFailure), and then the stream is done.
    const next = stream.next;
    let failed = false;
    stream.next = () =>
      failed
        ? Promise.resolve({ done: true, value: undefined })
        : next.call(stream).catch((err: unknown) => {
            failed = true;
            stream.return(undefined).catch(() => undefined);
            return { done: false, value: { errors: [streamFailure(err, options.logger, context.requestId)] } };
          });
    stream.delivery = subscription.delivery;
    // On a reserved stream, its results wait while the credential that connected the stream is checked, too.
    const unfollow =
      key === undefined ? undefined : reservations.get(key)?.ending?.delivery.lead(subscription.delivery);
    resultsOf.set(context, stream);
    on?.set(context, subscription);
    held.hold(subscription, request.generation);
    // graphql-sse has queued the operation's `complete` (its source ended, it was stopped, or it was ended above), or
    // the operation was dropped (`drop`): then graphql-sse may still queue one, and this runs once.
    let finished = false;
    completions.set(context, () => {
      if (finished) return;
      finished = true;
      cancel();
      unfollow?.();
      held.release(subscription);
      on?.delete(context);
      if (on?.size === 0) endingOn.delete(key!);
      completed();
    });
    return stream;
  };

  const handler = createHandler<IncomingMessage, SseContext, GraphQLContext & Record<PropertyKey, unknown>>({
    schema: options.schema,
    // An operation's outcome is handed to graphql-sse by onSubscribe; its context is the pipeline's (for onNext, onComplete).
    context: (req) => req.context.operation as GraphQLContext & Record<PropertyKey, unknown>,
    authenticate(req) {
      // A reserved stream's token is always one the gateway makes; any other request names its stream by `stream`.
      return req.method === 'PUT' ? randomUUID() : req.context.stream;
    },
    async onSubscribe(req, params) {
      if (req.context.refusal) return { data: null, errors: [req.context.refusal] };
      const contextValue = withStream(
        options.context(req.context.caller, `sse:${req.context.requestId}`),
        req.context.stream,
      );
      // A browser's EventSource sends the last `id:` it received when it reconnects: the stream resumes after it.
      const lastEventId = req.headers.get('last-event-id');
      if (lastEventId) contextValue.lastEventId = lastEventId;
      req.context.operation = contextValue;
      const outcome = await options.pipeline.runOperation({
        caller: req.context.caller,
        params: {
          query: typeof params.query === 'string' ? params.query : undefined,
          operationName: params.operationName ?? undefined,
          variables: params.variables ?? undefined,
        },
        transport: 'sse',
        requestId: `sse:${req.context.requestId}`,
        context: contextValue,
        allow: req.method === 'GET' ? OVER_GET : ALL_OPERATIONS,
        // Trusted documents are resolved on this transport's wire (admit, admitSearch), before graphql-sse reads the params.
        trustedResolved: true,
        variables: 'in-run',
        present,
      });
      if ('refused' in outcome) {
        // graphql-sse's own answers for an operation it cannot pick, and for a mutation over GET.
        if (outcome.stage === 'operation')
          return [
            JSON.stringify({ errors: [{ message: 'Unable to detect operation AST' }] }),
            { status: 400, statusText: 'Bad Request', headers: JSON_HEADERS },
          ];
        if (outcome.stage === 'allow')
          return [
            JSON.stringify({ errors: [{ message: 'Cannot perform mutations over GET' }] }),
            { status: 405, statusText: 'Method Not Allowed', headers: { allow: 'POST', ...JSON_HEADERS } },
          ];
        return { data: null, errors: [...outcome.refused] };
      }
      if ('stream' in outcome) return ending(outcome.stream, outcome.ran, contextValue, req.context);
      // The result as the pipeline presented it (masked, with its warnings, each unexpected error logged once), which
      // onNext writes as it is. A subscription refused by its own field (a malformed or expired cursor, a source that
      // threw) is graphql-js's `{ errors }` alone: graphql-sse takes a result for one only with its `data`, and would
      // look for an operation in it instead.
      const result = 'data' in outcome.result ? outcome.result : { data: null, ...outcome.result };
      presented.add(result);
      return result;
    },
    onComplete(ctx) {
      // graphql-sse has queued the operation's `complete`: a stream ending at its token's expiry may end now.
      completions.get(ctx)?.();
    },
    onNext(ctx, req, result) {
      // graphql-sse passes the operation's contextValue as ctx: a mutation sent here carries its warnings too.
      // The same masking as over HTTP and WebSocket: unexpected errors become INTERNAL_SERVER_ERROR.
      const context = 'incremental' in result ? undefined : (ctx as unknown as GraphQLContext);
      // A result JSON cannot write is answered as graphql-ws answers it: graphql-sse's own write would throw and end
      // the event stream, with every operation on it, and the client would be told nothing. A subscription ends
      // there, as over graphql-ws: INTERNAL_SERVER_ERROR, then `complete`.
      const delivered = presented.has(result)
        ? (result as ExecutionResult)
        : deliverable(result as ExecutionResult, context, options.logger);
      const out = writable(delivered, options.logger, context?.requestId);
      if (out !== delivered && context)
        resultsOf
          .get(context)
          ?.return(undefined)
          .catch(() => undefined);
      const cursor = out.extensions?.cursor;
      const stream = req.context.stream;
      const reservation = stream === undefined ? undefined : reservations.get(stream);
      (reservation?.ids ?? req.context.ids)?.push(typeof cursor === 'string' ? cursor : undefined);
      // Only a reserved stream not connected yet is measured: a connected one's writer bounds what it leaves unsent.
      if (reservation !== undefined && !reservation.connected) hold(stream!, reservation, out, req.context.requestId);
      return out;
    },
  });

  /** The ids of the event stream a request's operation writes to: its reserved stream's, or its own distinct one's. */
  function idsOf(context: SseContext, stream = context.stream): EventIds | undefined {
    return (stream === undefined ? undefined : reservations.get(stream)?.ids) ?? context.ids;
  }

  /**
   * graphql-sse queues the results of a reserved stream's operations until its GET connects it, as many as its
   * subscriptions yield meanwhile (up to the minute of its reservation): past SUBSCRIBER_BUFFER_BYTES of them it is
   * released as an unconnected reservation is at that minute's end (its subscriptions end and give back their places),
   * and counted as a slow consumer, as a connected stream whose client does not read is closed. graphql-sse shows
   * nothing of its queue: each result is measured here as the JSON it is written in, once, and only until the GET.
   */
  function hold(token: string, reservation: Reservation, result: ExecutionResult | null, requestId: string): void {
    if (result !== null) reservation.heldBytes += Buffer.byteLength(JSON.stringify(result));
    // A request connecting it is about to hand what it holds to its writer, which bounds what the client leaves unread;
    // should none connect it, the bound is checked again then (`connectionEnded`).
    if (reservation.heldBytes <= bufferLimit || reservation.connecting > 0) return;
    options.logger.warn(
      { requestId, heldBytes: reservation.heldBytes },
      'releasing a reserved SSE stream not connected: its results waiting for its GET passed SUBSCRIBER_BUFFER_BYTES',
    );
    options.onClosed?.('slow_consumer');
    clearTimeout(reservation.timer);
    // It is released once: `release` forgets the reservation at once, and later results find none to count for.
    void release(token);
  }

  function withStream(context: GraphQLContext, stream: string | undefined): GraphQLContext {
    if (stream !== undefined) streamOf.set(context, stream);
    return context;
  }

  /**
   * A reserved stream ends when its token expires, or when a reload refuses the credential that connected it: each
   * subscription on it gets its last result and `complete` first (graphql-sse writes what it has queued before it
   * ends the stream).
   */
  async function endStream(stream: string, error: GraphQLError, stop: () => void): Promise<void> {
    await Promise.all([...(endingOn.get(stream)?.values() ?? [])].map((subscription) => subscription.end(error)));
    stop();
  }

  /**
   * Ends an operation that no reserved stream will carry, with no last result (nothing would write it): its result
   * stream's end gives back its place under APP_LIVE_SUBSCRIPTIONS and stops its source. A query's or a mutation's has
   * none: it just runs out.
   */
  function drop(operation: GraphQLContext): void {
    resultsOf
      .get(operation)
      ?.return(undefined)
      .catch(() => undefined);
    completions.get(operation)?.();
  }

  /**
   * A reserved stream has ended (its connection closed, or it was released unconnected): every subscription still on
   * it ends. graphql-sse ends those it holds, but not one whose setup it was awaiting when the stream went: it adds
   * that one to the ended stream and answers 202. Such an operation ready before this runs is ended here; one ready
   * after, in `handle`, which then finds no reservation.
   */
  function closed(token: string): void {
    for (const operation of [...(endingOn.get(token)?.keys() ?? [])]) drop(operation);
  }

  /**
   * The request's operation as the trusted documents admit it (`refusal`, answered by onSubscribe, when they refuse
   * it); with them off, as POST /graphql's Apollo answers its persisted-query extension and `documentId`
   * (untrustedRefusal), and `params` itself when it runs as it was sent.
   */
  function admit(params: Params, context: SseContext): Params {
    if (!options.trusted) {
      const refused = untrustedRefusal(params);
      return refused === null ? params : refuse(params, refused, context);
    }
    const admission = options.trusted.admit(params, context.caller.scope);
    if (!admission.ok) return refuse(params, admission, context);
    const { documentId: _id, ...rest } = params;
    return { ...rest, query: admission.query, extensions: admission.extensions };
  }

  /**
   * A refused operation goes on to onSubscribe, which answers `refusal` as its result, with nothing of what it asked
   * for but the id a reserved stream names it by (`extensions.operationId`): without it graphql-sse refuses the request
   * as one naming no operation, and the client of a reserved stream is told a bare 400 instead of the refusal.
   */
  function refuse(params: Params, refused: DocumentRefusal, context: SseContext): Params {
    context.refusal = new GraphQLError(refused.message, { extensions: { code: refused.code } });
    const { documentId: _id, extensions, ...rest } = params;
    const operationId =
      extensions !== null && typeof extensions === 'object'
        ? (extensions as { operationId?: unknown }).operationId
        : undefined;
    return { ...rest, query: '', extensions: operationId === undefined ? undefined : { operationId } };
  }

  /** A GET's operation is in its query string: resolved there, and the URL rebuilt when that changed it. */
  function admitSearch(url: string, context: SseContext): string {
    const q = url.indexOf('?');
    if (q === -1) return url;
    const search = new URLSearchParams(url.slice(q + 1));
    if (!search.has('query') && !search.has('documentId') && !search.has('extensions')) return url;
    let extensions: unknown;
    try {
      extensions = search.has('extensions') ? JSON.parse(search.get('extensions')!) : undefined;
    } catch {
      return url; // graphql-sse answers 400 for the unparsable parameter
    }
    const sent = {
      query: search.get('query') ?? undefined,
      documentId: search.get('documentId') ?? undefined,
      extensions,
    };
    const admitted = admit(sent, context);
    if (admitted === sent) return url;
    search.delete('documentId');
    search.set('query', admitted.query as string);
    if (admitted.extensions === undefined) search.delete('extensions');
    else search.set('extensions', JSON.stringify(admitted.extensions));
    return `${url.slice(0, q)}?${search.toString()}`;
  }

  function reserve(token: string, scope: string): void {
    const reservation: Reservation = {
      scope,
      connected: false,
      connecting: 0,
      releaseDue: false,
      timer: undefined,
      ids: [],
      heldBytes: 0,
    };
    if (options.scheduleRelease) {
      options.scheduleRelease(() => release(token));
    } else {
      reservation.timer = setTimeout(() => void release(token), RESERVATION_TIMEOUT_MS);
      reservation.timer.unref();
    }
    reservations.set(token, reservation);
  }

  /**
   * Frees a stream that was reserved and never connected: graphql-sse frees it when its event stream ends. While a
   * request is connecting it, the release waits for that request's outcome (`connecting`), unless the route is closing
   * (`now`).
   */
  async function release(token: string, now = false): Promise<void> {
    const reservation = reservations.get(token);
    if (!reservation || reservation.connected) return;
    if (reservation.connecting > 0 && !now) {
      reservation.releaseDue = true;
      return;
    }
    reservations.delete(token);
    const [body] = await handler({
      method: 'GET',
      url: `${SSE_PATH}?${STREAM_TOKEN_PARAM}=${encodeURIComponent(token)}`,
      headers: { get: (key) => (key === 'accept' ? 'text/event-stream' : undefined) },
      body: null,
      raw: undefined as unknown as IncomingMessage,
      context: {
        caller: ownerCaller(reservation.scope),
        stream: token,
        authorization: undefined,
        generation: held.generation(),
        requestId: 'release',
      },
    });
    if (body && typeof body !== 'string') await body.return(undefined);
    closed(token);
  }

  /**
   * A request that was connecting a reserved stream is answered, and none connected it (graphql-sse refused it): the
   * release that came meanwhile is made now, or the bound on what it holds, put off too, is checked.
   */
  function connectionEnded(token: string, reservation: Reservation, requestId: string): void {
    if (reservation.connecting > 0 || reservation.connected || reservations.get(token) !== reservation) return;
    if (reservation.releaseDue) void release(token);
    else hold(token, reservation, null, requestId);
  }

  async function handle(req: IncomingMessage, res: ServerResponse, ctx: RouteContext): Promise<void> {
    // The configuration the credential is checked under: a JWT's verification awaits its keys, and a reload
    // meanwhile must not pass the old configuration's answer off as the new one's.
    const checkedUnder = held.generation();
    const result = options.authenticate(authorizationOf(req), ctx);
    const auth = result instanceof Promise ? await result : result;
    if (!auth.ok) {
      // A JWT whose keys could not be fetched: the gateway's side is at fault, as for an upstream (503).
      if (auth.reason === 'unavailable')
        sendJson(res, 503, {
          errors: [{ message: auth.message, extensions: { code: ErrorCode.UPSTREAM_UNAVAILABLE } }],
        });
      else
        sendJson(
          res,
          401,
          { errors: [{ message: auth.message, extensions: { code: ErrorCode.UNAUTHENTICATED } }] },
          { 'www-authenticate': 'Bearer' },
        );
      return;
    }
    ctx.app = auth.caller.app;
    // A method the route does not take is refused as graphql-sse refuses it when a reserved stream is named (405 with
    // Allow): graphql-sse answers one that names no stream as a token that names none (404), or as an event stream's
    // operation in a body of no media type it reads (415).
    if (!SSE_METHODS.includes(req.method ?? '')) {
      sendJson(res, 405, protocolRefusal(405, null, false)!.body, { allow: SSE_METHODS.join(', ') });
      return;
    }
    const accept = req.headers.accept ?? '*/*';
    const named =
      (req.headers[STREAM_TOKEN_HEADER] as string | undefined) ??
      new URLSearchParams(ctx.search).get(STREAM_TOKEN_PARAM) ??
      undefined;
    const theirs = named === undefined ? undefined : reservations.get(named);
    // Another app's reserved stream is, for this caller, a token that names no stream (src/auth/tenancy.ts): every
    // method is answered as for an unknown token, and nothing of the request reaches that stream.
    const given = theirs && !readableBy(auth.caller, theirs.scope) ? randomUUID() : named;
    const context: SseContext = {
      caller: auth.caller,
      authorization: req.headers.authorization,
      generation: checkedUnder,
      requestId: ctx.requestId,
      ...(given !== undefined && req.method !== 'PUT' ? { stream: given } : {}),
      ...(accept === 'text/event-stream' ? { ids: [] } : {}),
    };

    if (req.method === 'PUT') {
      // A stream reserved once the route has closed would never carry anything: the client is told to go elsewhere.
      if (closing) {
        refuseShuttingDown(res);
        return;
      }
      let held = 0;
      for (const r of reservations.values()) if (r.scope === auth.caller.scope) held += 1;
      if (held >= MAX_RESERVATIONS_PER_CALLER) {
        sendJson(res, 409, {
          errors: [
            {
              message: `this API key already holds ${held} reserved streams; connect or release them first`,
              extensions: {
                code: ErrorCode.RATE_LIMITED,
                bound: 'sse-reservations:count',
                limit: MAX_RESERVATIONS_PER_CALLER,
              },
            },
          ],
        });
        return;
      }
    }

    let body: Params | null = null;
    if (req.method === 'POST') {
      // graphql-sse takes a POST's body only as JSON (its test, a Content-Type that includes application/json), and
      // refuses any other with a bare 415: said here, before the body is read, so that the client learns what to send.
      // A media type is case-insensitive (RFC 9110 §8.3.1): `Application/JSON` is JSON too, as /graphql and /mcp take it,
      // and graphql-sse is handed the header in lower case (`lowerContentType`) so that its own test agrees.
      if (!lowerContentType(req)?.includes('application/json')) {
        sendJson(
          res,
          415,
          {
            errors: [
              {
                message: 'the body must be JSON, sent with Content-Type: application/json',
                extensions: { code: ErrorCode.BAD_REQUEST },
              },
            ],
          },
          { connection: 'close' },
        );
        return;
      }
      // Read in the charset the Content-Type declares, as every JSON body is (a bare type: one comparison, no lookup).
      const read = await readBodyText(req, options.bodyLimit, contentType(req).charset);
      if (!read.ok) {
        sendJson(
          res,
          read.status,
          {
            errors: [
              read.message === null
                ? bodyTooLarge(options.bodyLimit)
                : { message: read.message, extensions: { code: ErrorCode.BAD_REQUEST } },
            ],
          },
          read.close ? { connection: 'close' } : undefined,
        );
        return;
      }
      const { raw, text } = read;
      let parsed: unknown;
      try {
        parsed = raw.length ? JSON.parse(text) : null;
      } catch {
        sendJson(res, 400, {
          errors: [{ message: 'request body is not valid JSON', extensions: { code: ErrorCode.BAD_REQUEST } }],
        });
        return;
      }
      // Only an object is a request. Anything else is refused here: graphql-sse reads a string body as JSON once more,
      // so a JSON string holding a request would run a document the trusted documents never admitted.
      if (parsed !== null && (typeof parsed !== 'object' || Array.isArray(parsed))) {
        sendJson(res, 400, {
          errors: [{ message: 'the body must be a JSON object', extensions: { code: ErrorCode.BAD_REQUEST } }],
        });
        return;
      }
      const refused = parsed === null ? null : postBodyRefusal(parsed as Params);
      if (refused !== null) {
        sendJson(res, 400, { errors: [{ message: refused, extensions: { code: ErrorCode.BAD_REQUEST } }] });
        return;
      }
      body = parsed === null ? null : admit(parsed as Params, context);
    }
    // graphql-sse reads the request's operation (GET) and its reserved stream's operation id (DELETE) from the query.
    const target = `${ctx.path}${ctx.search}`;
    const url = req.method === 'GET' ? admitSearch(target, context) : target;

    // graphql-sse connects a reserved stream for any request that names it and accepts an event stream. From just
    // before graphql-sse may open it until the gateway marks it connected below, a release is put off: it would drop
    // the stream's operations and leave this request's event stream open with nothing on it. The reservation is read
    // again here: one released while the body was read is not this request's to connect.
    const joining =
      accept === 'text/event-stream' &&
      theirs !== undefined &&
      named !== undefined &&
      given === named &&
      reservations.get(named) === theirs
        ? theirs
        : undefined;
    if (joining) joining.connecting += 1;
    let answered: Awaited<ReturnType<typeof handler>>;
    try {
      // An operation over SSE continues the app's traceparent: graphql-sse executes it inside this call.
      answered = await options.tracing.withParent(req.headers, () =>
        handler({
          method: req.method ?? 'GET',
          url,
          headers: {
            get(key) {
              if (key === 'content-type') return lowerContentType(req);
              const header = req.headers[key];
              return Array.isArray(header) ? header.join('\n') : header;
            },
          },
          body,
          raw: req,
          context,
        }),
      );
      if (joining && answered[1].status === 200) {
        if (options.connectionAccepted) await options.connectionAccepted(given!);
        if (reservations.get(given!) === joining) {
          joining.connected = true;
          clearTimeout(joining.timer);
        }
      }
    } finally {
      if (joining) {
        joining.connecting -= 1;
        connectionEnded(given!, joining, ctx.requestId);
      }
    }
    const [responseBody, init] = answered;

    // An operation added to a reserved stream that is no longer there to carry it ends now, whatever the order of
    // events: graphql-sse answers 204 for one stopped (DELETE) while it was set up and forgets it, and adds one to a
    // stream that ended meanwhile (202) where nothing reads it. One that arrived before the stream ended is `closed`'s.
    if (
      context.operation !== undefined &&
      context.stream !== undefined &&
      accept !== 'text/event-stream' &&
      (init.status !== 202 || !reservations.has(context.stream))
    )
      drop(context.operation);
    if (init.status >= 400 && (typeof responseBody === 'string' || !responseBody)) {
      const refusal = protocolRefusal(init.status, responseBody, given !== undefined);
      if (refusal) {
        const allow = (init.headers as Record<string, string> | undefined)?.allow;
        sendJson(res, refusal.status, refusal.body, allow ? { allow } : {});
        return;
      }
    }
    if (req.method === 'PUT' && init.status === 201 && typeof responseBody === 'string')
      reserve(responseBody, auth.caller.scope);
    let token: string | undefined;
    if (accept === 'text/event-stream' && given !== undefined && init.status === 200) {
      token = given;
      // Released while this request connected it all the same (the route closing does not wait): answered as a released
      // stream is, and graphql-sse's event stream for it ended, rather than left open with no operation on it.
      if (joining && !joining.connected && responseBody && typeof responseBody !== 'string') {
        await responseBody.return(undefined);
        const refusal = protocolRefusal(404, JSON.stringify({ errors: [{ message: 'Stream not found' }] }), true)!;
        sendJson(res, refusal.status, refusal.body);
        return;
      }
    }

    res.writeHead(init.status, init.statusText, {
      ...init.headers,
      ...(typeof responseBody === 'string' || !responseBody ? {} : { 'x-accel-buffering': 'no' }),
    });
    if (!responseBody || typeof responseBody === 'string') {
      res.end(responseBody ?? undefined);
      return;
    }
    open.add(responseBody);
    const stop = () => void responseBody.return(undefined);
    res.once('close', stop);
    // A stream opened once the route has ended the others (its request was on its way as the shutdown began) ends
    // at once as they did, rather than holding the drain until its deadline cuts the connection.
    if (closing) stop();
    const stream = token;
    const ids = idsOf(context, token);
    // A reserved stream ends with the credential that connected it; a distinct one with its one subscription.
    const connected =
      stream === undefined
        ? undefined
        : heldEnding(context.authorization, auth.caller, (error) => endStream(stream, error, stop));
    const cancelExpiry =
      connected === undefined
        ? undefined
        : onExpiry(expiry, auth.caller, (reason) => void connected.end(expired(reason)));
    if (connected) {
      // The operations added before it connected wait while its credential is checked, as those added after do.
      for (const subscription of endingOn.get(stream!)?.values() ?? []) connected.delivery.lead(subscription.delivery);
      held.hold(connected, checkedUnder);
      const reservation = reservations.get(stream!);
      if (reservation) reservation.ending = connected;
    }
    // graphql-sse asks a subscription for its next result as soon as it has one, whatever the client reads, and queues
    // the results for this loop: each is handed to the socket at once (a burst, a replay, reaches the kernel's buffers,
    // as a WebSocket's results do), and a client that leaves more than SUBSCRIBER_BUFFER_BYTES unsent is closed, rather
    // than buffered without bound. The events it received carry their ids, from which it resumes (an EventSource sends
    // the last one back as Last-Event-ID). What was written since the event loop last turned is not counted: it has
    // had no chance to leave yet (the response holds a burst's writes until the next tick).
    let lastId: string | undefined;
    let thisTurn = 0;
    let turning = false;
    const turned = () => {
      thisTurn = 0;
      turning = false;
    };
    try {
      for await (const chunk of responseBody) {
        if (!res.writable) break;
        const unsent = res.writableLength - thisTurn;
        if (unsent > bufferLimit) {
          options.logger.warn(
            { requestId: ctx.requestId, unsentBytes: unsent, lastCursor: lastId ?? null },
            'closing a slow SSE subscriber: more unsent bytes than SUBSCRIBER_BUFFER_BYTES',
          );
          options.onClosed?.('slow_consumer');
          res.destroy();
          break;
        }
        let out = chunk;
        if (chunk.startsWith(NEXT_EVENT)) {
          const id = ids?.shift();
          if (id !== undefined) lastId = id;
          out = withEventId(chunk, id);
        }
        res.write(out);
        thisTurn += out.length;
        if (!turning) {
          turning = true;
          setImmediate(turned);
        }
      }
    } finally {
      cancelExpiry?.();
      if (connected) held.release(connected);
      res.off('close', stop);
      open.delete(responseBody);
      if (token) {
        reservations.delete(token);
        closed(token);
      }
      res.end();
    }
  }

  return {
    method: 'ANY',
    path: SSE_PATH,
    name: 'graphql-stream',
    handle,
    async close() {
      closing = true;
      for (const r of reservations.values()) clearTimeout(r.timer);
      await Promise.all([...open].map((body) => body.return(undefined)));
      for (const token of [...reservations.keys()]) await release(token, true);
    },
  };
}

const NEXT_EVENT = 'event: next';
/** A cursor holds only base64url characters (src/events/cursor.ts): nothing that could end the `id:` line. */
const EVENT_ID = /^[A-Za-z0-9_-]+$/;

/**
 * A `next` event with its result's cursor as its SSE `id`, so that an EventSource that reconnects sends it back as
 * Last-Event-ID; a result without a cursor gets no `id`.
 */
function withEventId(chunk: string, cursor: string | undefined): string {
  return cursor !== undefined && EVENT_ID.test(cursor) ? `id: ${cursor}\n${chunk}` : chunk;
}

/**
 * A subscription or a reserved stream, held for the credential that opened it: a reload that refuses the credential
 * ends it with a last result saying why (a reserved stream's are its subscriptions').
 */
interface Ending extends Holding {
  /** Ends it with `error` as each subscription's last result; resolves once their `complete` is queued. */
  end(error: GraphQLError): Promise<void>;
}

function heldEnding(
  authorization: string | undefined,
  caller: Caller,
  end: (error: GraphQLError) => Promise<void>,
): Ending {
  return { authorization, caller, end, delivery: new Delivery(), refused: (failure) => void end(reloaded(failure)) };
}

/** The last result of a subscription its token's expiry ends: UNAUTHENTICATED, as a new one with it would get. */
function expired(reason: string): GraphQLError {
  return new GraphQLError(`${reason}: the subscription has ended; subscribe again with a new token`, {
    extensions: { code: ErrorCode.UNAUTHENTICATED },
  });
}

/**
 * The last result of a subscription whose credential a reload refused: UNAUTHENTICATED, as a new one with it would
 * get; or, for a JWT whose keys could not be fetched, UPSTREAM_UNAVAILABLE, as the request would get (503).
 */
function reloaded(failure: AuthFailure): GraphQLError {
  const unavailable = failure.reason === 'unavailable';
  const then = unavailable ? 'subscribe again later' : 'subscribe again with a credential the gateway accepts';
  return new GraphQLError(`${failure.message} (the configuration was reloaded): the subscription has ended; ${then}`, {
    extensions: { code: unavailable ? ErrorCode.UPSTREAM_UNAVAILABLE : ErrorCode.UNAUTHENTICATED },
  });
}
