import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import {
  GraphQLError,
  getOperationAST,
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
} from 'graphql';
import { CloseCode, handleProtocols, makeServer } from 'graphql-ws';
import { WebSocketServer, type WebSocket } from 'ws';
import type { GraphQLContext } from '../graphql/context.js';
import type { Caller } from '../caller.js';
import { DocumentCache } from './operations.js';
import { SEND_RESULT, deliverable, streamingExecution, type SendResult, type StreamingTransportOptions } from './streaming-execution.js';
import { TRACING_OFF, type Tracing } from '../telemetry/tracing.js';

export interface WsOptions extends StreamingTransportOptions {
  /** Interval of server pings that keep idle connections (and proxies) alive. */
  keepAliveMs?: number;
  /** GRAPHQL_MAX_BODY_BYTES: the largest WebSocket message (a larger one closes the socket, 1009). */
  maxMessageBytes?: number;
  /** Parsed and validated documents, shared with graphql-sse. */
  documents?: DocumentCache;
  tracing?: Tracing;
}

type Extra = {
  socket: WebSocket;
  /** Until the connection is authenticated (see onConnect). */
  request: IncomingMessage | undefined;
  /** Writes one message on the connection (corked until the end of the tick, see accept). */
  send: (data: string) => void;
};

/**
 * graphql-ws (subprotocol graphql-transport-ws) on the HTTP port's `/graphql` path. The API key comes from
 * the upgrade request's Authorization header or from connectionParams.authorization; a missing key
 * closes with 4401, a wrong one with 4403.
 */
export function createWsServer(options: WsOptions) {
  const wss = new WebSocketServer({ noServer: true, maxPayload: options.maxMessageBytes ?? 1024 * 1024 });
  const documents = options.documents ?? new DocumentCache(options.schema);
  const execution = streamingExecution(options.tracing ?? TRACING_OFF, 'ws', options.shared);
  const callers = new WeakMap<object, Caller>();
  /** The TCP socket under each WebSocket (from the upgrade), to cork. */
  const raws = new WeakMap<WebSocket, Duplex>();

  const server = makeServer<Record<string, unknown> | undefined, Extra>(
    {
      schema: options.schema,
      execute: execution.execute,
      subscribe: execution.subscribe,
      onConnect(ctx) {
        const fromParams = ctx.connectionParams?.authorization ?? ctx.connectionParams?.Authorization;
        const header = ctx.extra.request?.headers.authorization ?? (typeof fromParams === 'string' ? fromParams : undefined);
        const result = options.authenticate(header);
        if (!result.ok) {
          if (result.reason === 'missing') ctx.extra.socket.close(CloseCode.Unauthorized, 'Unauthorized: send the API key');
          return false;
        }
        callers.set(ctx, result.caller);
        // The upgrade request is needed only to authenticate; graphql-ws would keep it (headers, parser
        // state) for the life of the connection. Dropped, it lowers the memory of an idle connection.
        (ctx.extra as { request: IncomingMessage | undefined }).request = undefined;
        return true;
      },
      onSubscribe(ctx, id, payload): ExecutionArgs | readonly GraphQLError[] | Promise<ExecutionArgs | readonly GraphQLError[]> {
        let query = payload.query;
        if (options.trusted) {
          const admission = options.trusted.admit(payload as typeof payload & { documentId?: unknown });
          if (!admission.ok) return [new GraphQLError(admission.message, { extensions: { code: admission.code } })];
          query = admission.query;
        }
        const cached = documents.get(query);
        // graphql-ws keeps the subscribe message for the life of the subscription: let it hold the shared
        // copy of the text rather than its own (bench scenario 5, memory per idle subscription).
        (payload as { query: string }).query = cached.query;
        const document = cached.document;
        if (Array.isArray(document)) return document as readonly GraphQLError[];
        const doc = document as DocumentNode;
        const operation = getOperationAST(doc, payload.operationName);
        if (!operation) {
          return [new GraphQLError('Unable to identify the operation: pass operationName')];
        }
        const caller = callers.get(ctx)!;
        const send = ctx.extra.send;
        const args = (): ExecutionArgs => {
          const contextValue = options.context(caller, `ws:${id}`);
          const execArgs: ExecutionArgs & { [SEND_RESULT]?: SendResult } = {
            schema: options.schema,
            document: doc,
            variableValues: payload.variables ?? null,
            operationName: payload.operationName ?? null,
            contextValue,
          };
          // A subscription's results are written here rather than through graphql-ws's onNext: the payload's JSON is
          // made once per shared result (src/server/shared-execution.ts) and spliced into each subscriber's message,
          // which is what graphql-ws would send (`{"id":…,"type":"next","payload":…}`).
          if (operation.operation === 'subscription') {
            execArgs[SEND_RESULT] = (result) => send(`{"id":${JSON.stringify(id)},"type":"next","payload":${payloadJson(result, contextValue)}}`);
          }
          return execArgs;
        };
        const admitted = options.admit?.(caller, doc, operation, payload.variables);
        return admitted ? admitted.then((refused) => (refused ? [refused] : args())) : args();
      },
      onNext(_ctx, _id, _payload, args, result) {
        // A mutation or query sent over the socket carries its warnings like over HTTP; errors are masked alike.
        const out = deliverable(result, args.contextValue as GraphQLContext | undefined, options.logger);
        return out === result ? undefined : out;
      },
      onError(_ctx, id, _payload, errors) {
        options.logger.debug({ id, errors: errors.map((e) => e.message) }, 'subscription error');
      },
    },
  );
  wss.options.handleProtocols = handleProtocols;

  /** A result's payload as JSON: masked and with its warnings (as onNext does), made once per result object. */
  const serialized = new WeakMap<ExecutionResult, string>();
  function payloadJson(result: ExecutionResult, context: GraphQLContext): string {
    const out = deliverable(result, context, options.logger);
    let json = serialized.get(out);
    if (json === undefined) {
      json = JSON.stringify(out);
      serialized.set(out, json);
    }
    return json;
  }
  const keepAliveMs = options.keepAliveMs ?? 12_000;
  wss.on('connection', (socket: WebSocket, request: IncomingMessage) => accept(socket, request));

  /**
   * graphql-ws's `useServer` (graphql-ws/use/ws), with one difference: a message is written without waiting for the
   * previous one's write callback, with the TCP socket corked until the end of the tick, so that what a subscription
   * sends for one event (`next`, then `complete`) leaves in one write (docs/decisions/030). The protocol itself
   * (every message, close code and order) is graphql-ws's `makeServer`.
   */
  function accept(socket: WebSocket, request: IncomingMessage): void {
    const raw = raws.get(socket);
    let corked = false;
    const uncork = () => {
      corked = false;
      raw?.uncork();
    };
    socket.once('error', (err) => {
      options.logger.warn({ err }, 'WebSocket error');
      socket.close(CloseCode.InternalServerError, 'Internal server error');
    });
    let pongWait: NodeJS.Timeout | null = null;
    const pingInterval =
      keepAliveMs > 0 && Number.isFinite(keepAliveMs)
        ? setInterval(() => {
            if (socket.readyState !== socket.OPEN) return;
            pongWait = setTimeout(() => socket.terminate(), keepAliveMs);
            socket.once('pong', () => {
              if (pongWait) clearTimeout(pongWait);
              pongWait = null;
            });
            socket.ping();
          }, keepAliveMs)
        : null;
    const send = (data: string): void => {
      if (socket.readyState !== socket.OPEN) return;
      if (raw && !corked) {
        corked = true;
        raw.cork();
        process.nextTick(uncork);
      }
      socket.send(data);
    };
    const closed = server.opened(
      {
        protocol: socket.protocol,
        send,
        close: (code, reason) => socket.close(code, reason),
        onMessage: (cb) =>
          socket.on('message', async (event) => {
            try {
              await cb(String(event));
            } catch (err) {
              options.logger.error({ err }, 'internal error while handling a WebSocket message');
              socket.close(CloseCode.InternalServerError, 'Internal server error');
            }
          }),
      },
      { socket, request, send },
    );
    socket.once('close', (code, reason) => {
      if (pongWait) clearTimeout(pongWait);
      if (pingInterval) clearInterval(pingInterval);
      void closed(code, String(reason));
    });
  }

  return {
    wss,
    handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
      wss.handleUpgrade(req, socket, head, (ws) => {
        raws.set(ws, socket);
        wss.emit('connection', ws, req);
      });
    },
    async close(): Promise<void> {
      for (const client of wss.clients) client.close(1001, 'Going away: the gateway is shutting down');
      wss.removeAllListeners();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}
