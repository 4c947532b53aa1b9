import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { GraphQLError, getOperationAST, type DocumentNode, type ExecutionArgs, type ExecutionResult } from 'graphql';
import { createHandler } from 'graphql-sse';
import type { GraphQLContext } from '../graphql/context.js';
import type { Tracing } from '../telemetry/tracing.js';
import { ownerCaller, type Caller } from '../caller.js';
import { ErrorCode } from '../errors.js';
import type { RequestContext, Route } from './http.js';
import { deliverable } from '../execution/present.js';
import { streamingExecution } from '../execution/run.js';
import { BodyTooLargeError, readBody, sendJson } from './respond.js';
import type { StreamingTransportOptions } from './streaming.js';
import { onExpiry, type AuthExpiry } from './jwt-auth.js';

export const SSE_PATH = '/graphql/stream';
/** The header and query parameter graphql-sse's single-connection mode names a reserved stream by. */
const STREAM_TOKEN_HEADER = 'x-graphql-event-stream-token';
const STREAM_TOKEN_PARAM = 'token';

export interface SseOptions extends StreamingTransportOptions {
  tracing: Tracing;
  /** Largest request body, as for POST /graphql and a graphql-ws message. */
  bodyLimit: number;
  /** Reserved streams (single-connection mode) one API key may hold at once. */
  maxReservationsPerCaller?: number;
  /** A reserved stream that is not connected within this time is released. */
  reservationTimeoutMs?: number;
  /** Tests only: schedules the release of a reservation instead of a timer, so a test releases it when it chooses. */
  scheduleRelease?: (release: () => void) => void;
}

interface SseContext {
  caller: Caller;
  requestId: string;
  /** A refusal of trusted documents, delivered as the operation's result (see onSubscribe). */
  refusal?: GraphQLError;
}

interface Reservation {
  scope: string;
  connected: boolean;
  timer: NodeJS.Timeout | undefined;
}

type Params = { query?: unknown; documentId?: unknown; extensions?: unknown; [k: string]: unknown };

/**
 * Subscriptions (and queries and mutations) over Server-Sent Events on /graphql/stream, with graphql-sse: its
 * distinct-connections mode (one event stream per operation) and its single-connection mode (PUT reserves a
 * stream, GET with Accept: text/event-stream connects it, POST/GET add operations, DELETE stops one). The
 * transport is the only thing new: the API key, the trusted documents, the validation, the resolvers (and so
 * the replay of stored events to late subscribers) and the masking of errors are those of graphql-ws.
 */
export function createSseRoute(options: SseOptions): Route & { close(): Promise<void> } {
  const maxReservations = options.maxReservationsPerCaller ?? 16;
  const reservationTimeoutMs = options.reservationTimeoutMs ?? 60_000;
  const reservations = new Map<string, Reservation>();
  const open = new Set<AsyncGenerator<string, void, undefined>>();
  const execution = streamingExecution(options.tracing, 'sse', options.shared);
  const expiry = options.expiry;
  // A subscription opened with a JWT ends when the token expires: a last result with the reason, then `complete`
  // (graphql-sse then ends a distinct connection's stream). Callers without an expiry get the plain subscribe.
  const subscribe = expiry
    ? (((args: ExecutionArgs) => {
        const caller = (args.contextValue as GraphQLContext).caller;
        const result = execution.subscribe(args);
        if (caller.expiresAt === undefined) return result;
        return result instanceof Promise ? result.then((r) => endingAtExpiry(r, caller, expiry)) : endingAtExpiry(result, caller, expiry);
      }) as typeof execution.subscribe)
    : execution.subscribe;

  const handler = createHandler<IncomingMessage, SseContext, GraphQLContext & Record<PropertyKey, unknown>>({
    schema: options.schema,
    execute: execution.execute,
    subscribe,
    authenticate(req) {
      const token = req.headers.get(STREAM_TOKEN_HEADER) ?? new URL(req.url, 'http://localhost').searchParams.get(STREAM_TOKEN_PARAM);
      if (token) {
        const reservation = reservations.get(token);
        // Another app's stream is answered as one that does not exist.
        if (reservation && reservation.scope !== req.context.caller.scope) return [JSON.stringify({ errors: [{ message: 'Stream not found' }] }), { status: 404, statusText: 'Not Found' }];
        return token;
      }
      if (req.method === 'PUT') return randomUUID();
      return undefined;
    },
    async onSubscribe(req, params): Promise<(ExecutionArgs & { contextValue: GraphQLContext & Record<PropertyKey, unknown> }) | ExecutionResult> {
      if (req.context.refusal) return { data: null, errors: [req.context.refusal] };
      const { document } = options.documents.get(params.query as string);
      if (Array.isArray(document)) return { data: null, errors: document as GraphQLError[] };
      const operation = getOperationAST(document as DocumentNode, params.operationName);
      const refused = operation ? await options.admit(req.context.caller, document as DocumentNode, operation, params.variables) : null;
      if (refused) return { data: null, errors: [refused] };
      return {
        schema: options.schema,
        document: document as ExecutionArgs['document'],
        variableValues: params.variables ?? null,
        operationName: params.operationName ?? null,
        contextValue: options.context(req.context.caller, `sse:${req.context.requestId}`) as GraphQLContext & Record<PropertyKey, unknown>,
      };
    },
    onNext(ctx, _req, result) {
      // graphql-sse passes the operation's contextValue as ctx: a mutation sent here carries its warnings too.
      // The same masking as over HTTP and WebSocket: unexpected errors become INTERNAL_SERVER_ERROR.
      return deliverable(result as ExecutionResult, 'incremental' in result ? undefined : (ctx as unknown as GraphQLContext), options.logger);
    },
  });

  function admit(params: Params, context: SseContext): Params {
    if (!options.trusted) return params;
    const admission = options.trusted.admit(params);
    const { documentId: _id, ...rest } = params;
    if (!admission.ok) {
      context.refusal = new GraphQLError(admission.message, { extensions: { code: admission.code } });
      return { ...rest, query: '', extensions: undefined };
    }
    return { ...rest, query: admission.query, extensions: admission.extensions };
  }

  /** A GET's operation is in its query string: resolved there, and the URL rebuilt. */
  function admitSearch(url: string, context: SseContext): string {
    if (!options.trusted) return url;
    const q = url.indexOf('?');
    const search = new URLSearchParams(q === -1 ? '' : url.slice(q + 1));
    if (!search.has('query') && !search.has('documentId') && !search.has('extensions')) return url;
    let extensions: unknown;
    try {
      extensions = search.has('extensions') ? JSON.parse(search.get('extensions')!) : undefined;
    } catch {
      return url; // graphql-sse answers 400 for the unparsable parameter
    }
    const admitted = admit({ query: search.get('query') ?? undefined, documentId: search.get('documentId') ?? undefined, extensions }, context);
    search.delete('documentId');
    search.set('query', admitted.query as string);
    if (admitted.extensions === undefined) search.delete('extensions');
    else search.set('extensions', JSON.stringify(admitted.extensions));
    return `${q === -1 ? url : url.slice(0, q)}?${search.toString()}`;
  }

  function reserve(token: string, scope: string): void {
    const reservation: Reservation = { scope, connected: false, timer: undefined };
    if (options.scheduleRelease) {
      options.scheduleRelease(() => void release(token));
    } else {
      reservation.timer = setTimeout(() => void release(token), reservationTimeoutMs);
      reservation.timer.unref();
    }
    reservations.set(token, reservation);
  }

  /** Frees a stream that was reserved and never connected: graphql-sse frees it when its event stream ends. */
  async function release(token: string): Promise<void> {
    const reservation = reservations.get(token);
    if (!reservation || reservation.connected) return;
    reservations.delete(token);
    const [body] = await handler({
      method: 'GET',
      url: `${SSE_PATH}?${STREAM_TOKEN_PARAM}=${encodeURIComponent(token)}`,
      headers: { get: (key) => (key === 'accept' ? 'text/event-stream' : undefined) },
      body: null,
      raw: undefined as unknown as IncomingMessage,
      context: { caller: ownerCaller(reservation.scope), requestId: 'release' },
    });
    if (body && typeof body !== 'string') await body.return(undefined);
  }

  async function handle(req: IncomingMessage, res: ServerResponse, ctx: RequestContext): Promise<void> {
    const result = options.authenticate(req.headers.authorization);
    const auth = result instanceof Promise ? await result : result;
    if (!auth.ok) {
      // A JWT whose keys could not be fetched: the gateway's side is at fault, as for an upstream (503).
      if (auth.reason === 'unavailable') sendJson(res, 503, { errors: [{ message: auth.message, extensions: { code: ErrorCode.UPSTREAM_UNAVAILABLE } }] });
      else sendJson(res, 401, { errors: [{ message: auth.message, extensions: { code: ErrorCode.UNAUTHENTICATED } }] }, { 'www-authenticate': 'Bearer' });
      return;
    }
    const context: SseContext = { caller: auth.caller, requestId: ctx.requestId };
    ctx.app = auth.caller.app;
    const accept = req.headers.accept ?? '*/*';
    const tokenGiven = req.headers[STREAM_TOKEN_HEADER] !== undefined || new URL(req.url ?? '/', 'http://localhost').searchParams.has(STREAM_TOKEN_PARAM);

    if (req.method === 'PUT') {
      let held = 0;
      for (const r of reservations.values()) if (r.scope === auth.caller.scope) held += 1;
      if (held >= maxReservations) {
        sendJson(res, 409, { errors: [{ message: `this API key already holds ${held} reserved streams; connect or release them first` }] });
        return;
      }
    }

    let body: Params | null = null;
    if (req.method === 'POST') {
      let raw: Buffer;
      try {
        raw = await readBody(req, options.bodyLimit);
      } catch (err) {
        if (!(err instanceof BodyTooLargeError)) throw err;
        sendJson(res, 413, { errors: [{ message: `request body exceeds ${options.bodyLimit} bytes`, extensions: { code: ErrorCode.BAD_REQUEST } }] });
        return;
      }
      try {
        const parsed: unknown = raw.length ? JSON.parse(raw.toString('utf8')) : null;
        body = parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? admit(parsed as Params, context) : (parsed as Params | null);
      } catch {
        sendJson(res, 400, { errors: [{ message: 'request body is not valid JSON', extensions: { code: ErrorCode.BAD_REQUEST } }] });
        return;
      }
    }
    const url = req.method === 'GET' ? admitSearch(req.url ?? SSE_PATH, context) : (req.url ?? SSE_PATH);

    // An operation over SSE continues the app's traceparent: graphql-sse executes it inside this call.
    const [responseBody, init] = await options.tracing.withParent(req.headers, () => handler({
      method: req.method ?? 'GET',
      url,
      headers: {
        get(key) {
          const header = req.headers[key];
          return Array.isArray(header) ? header.join('\n') : header;
        },
      },
      body,
      raw: req,
      context,
    }));

    if (req.method === 'PUT' && init.status === 201 && typeof responseBody === 'string') reserve(responseBody, auth.caller.scope);
    let token: string | undefined;
    if (accept === 'text/event-stream' && tokenGiven && init.status === 200) {
      token = req.headers[STREAM_TOKEN_HEADER] as string | undefined ?? new URL(req.url ?? '/', 'http://localhost').searchParams.get(STREAM_TOKEN_PARAM) ?? undefined;
      const reservation = token ? reservations.get(token) : undefined;
      if (reservation) {
        reservation.connected = true;
        clearTimeout(reservation.timer);
      }
    }

    res.writeHead(init.status, init.statusText, { ...init.headers, ...(typeof responseBody === 'string' || !responseBody ? {} : { 'x-accel-buffering': 'no' }) });
    if (!responseBody || typeof responseBody === 'string') {
      res.end(responseBody ?? undefined);
      return;
    }
    open.add(responseBody);
    const stop = () => void responseBody.return(undefined);
    res.once('close', stop);
    try {
      for await (const chunk of responseBody) {
        if (!res.writable) break;
        const closed = await new Promise<boolean>((resolve, reject) => res.write(chunk, (err) => (err ? reject(err) : resolve(false))));
        if (closed) break;
      }
    } finally {
      res.off('close', stop);
      open.delete(responseBody);
      if (token) reservations.delete(token);
      res.end();
    }
  }

  return {
    method: 'ANY',
    path: SSE_PATH,
    name: 'graphql-stream',
    handle,
    async close() {
      for (const r of reservations.values()) clearTimeout(r.timer);
      await Promise.all([...open].map((body) => body.return(undefined)));
      for (const token of [...reservations.keys()]) await release(token);
    },
  };
}

/**
 * A subscription's results until its caller's token expires: then one last result whose error names the expiry
 * (UNAUTHENTICATED, as a new subscription with the token would get), and the end. The source is stopped at once.
 */
function endingAtExpiry<R>(result: R, caller: Caller, expiry: AuthExpiry): R {
  if (!result || typeof result !== 'object' || !(Symbol.asyncIterator in result)) return result;
  const source = (result as unknown as AsyncIterable<ExecutionResult>)[Symbol.asyncIterator]();
  let expired: string | null = null;
  let finished = false;
  let wake!: () => void;
  const woken = new Promise<null>((resolve) => (wake = () => resolve(null)));
  const cancel = onExpiry(expiry, caller, (reason) => {
    expired = reason;
    wake();
  });
  const stop = async () => {
    if (finished) return;
    finished = true;
    cancel();
    await source.return?.();
  };
  const done = { done: true, value: undefined } as const;
  const ending: AsyncGenerator<ExecutionResult> = {
    async next() {
      if (finished) return done;
      if (expired === null) {
        const step = await Promise.race([source.next(), woken]);
        if (step !== null) {
          if (step.done) {
            finished = true;
            cancel();
          }
          return step;
        }
      }
      // Not awaited: a source waiting for its next event (a generator between two ticks) would hold the last result.
      stop().catch(() => undefined);
      const error = new GraphQLError(`${expired}: the subscription has ended; subscribe again with a new token`, { extensions: { code: ErrorCode.UNAUTHENTICATED } });
      return { done: false, value: { errors: [error] } };
    },
    async return() {
      await stop();
      return done;
    },
    async throw(err?: unknown) {
      await stop();
      throw err;
    },
    [Symbol.asyncIterator]() {
      return ending;
    },
  } as AsyncGenerator<ExecutionResult>;
  return ending as unknown as R;
}
